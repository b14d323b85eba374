/* IEEE 754 binary16 ("half") storage of float32 values, in integer arithmetic (C99: no _Float16 or
 * __fp16, no dependence on the FPU's subnormal or flush-to-zero mode). float32 -> binary16 rounds to
 * nearest, ties to even, with binary16 subnormals; a magnitude of 65520 or more becomes +-Inf; NaN
 * stays NaN (quiet, sign kept). binary16 -> float32 is exact for every pattern (NaN payloads kept).
 * Both agree with torch's and numpy's float16 casts (tested over all 65,536 patterns and the
 * float32 ties, subnormals and overflows). The trainer stores its reservoir this way when the
 * configuration asks for it (model.stream.reservoir_precision float16, tu_trainer.h). */
#ifndef TU_HALF_H
#define TU_HALF_H

#include <stdint.h>
#include <string.h>

/** The binary16 bit pattern nearest to `value` (round to nearest even). */
uint16_t tu_half_from_float(float value);

/** The float32 value of a binary16 pattern that is zero, subnormal, infinite or NaN (exact). */
float tu_half_to_float_special(uint16_t half);

/** The float32 value of a binary16 bit pattern (exact; NaN payloads kept). Inline for the normal
 * patterns: the trainer decodes a minibatch of jets per update with it. */
static inline float tu_half_to_float(uint16_t half)
{
    const uint32_t mag = half & 0x7FFFu;
    if (mag - 0x0400u < 0x7800u) {  /* normal: rebias the exponent by 127 - 15 = 112 */
        const uint32_t bits = ((uint32_t)(half & 0x8000u) << 16 | mag << 13) + (112u << 23);
        float value;
        memcpy(&value, &bits, sizeof value);
        return value;
    }
    return tu_half_to_float_special(half);
}

#endif /* TU_HALF_H */

/* IEEE 754 binary16 ("half") storage of float32 values. float32 -> binary16 rounds to nearest, ties to
 * even, with binary16 subnormals; a magnitude of 65520 or more becomes +-Inf; NaN stays NaN (quiet, sign
 * kept). binary16 -> float32 is exact for every pattern (NaN payloads kept). Both agree with torch's and
 * numpy's float16 casts (tested over all 65,536 patterns and the float32 ties, subnormals and overflows).
 * The trainer stores its reservoir this way when the configuration asks for it
 * (model.stream.reservoir_precision float16, tu_trainer.h).
 *
 * Two paths, bit-identical: the portable one (`_soft`: C99 integer arithmetic, no _Float16 or __fp16, no
 * dependence on the FPU's subnormal or flush-to-zero mode), and the FPU's own conversions (VCVTB.F32.F16,
 * VCVTB.F16.F32 through GCC's and clang's __fp16) where the compiler says the core has them
 * (TU_HALF_HARDWARE, below: e.g. a Cortex-M4F's FPv4-SP built with -mfp16-format=ieee). The hardware path
 * assumes the FPSCR's reset defaults, which the rest of the library assumes too: IEEE half format
 * (AHP = 0), round to nearest even, no default NaN (its NaNs take the portable path anyway); flush to zero
 * does not apply to half-precision inputs, and a float32 subnormal rounds to a signed zero either way.
 * Define TU_HALF_HARDWARE to 0 to build the portable path everywhere. */
#ifndef TU_HALF_H
#define TU_HALF_H

#include <stdint.h>
#include <string.h>

#ifndef TU_HALF_HARDWARE
/* the half-precision bit of __ARM_FP (2), or an M-profile single-precision FPU (FPv4-SP, FPv5: all have the
 * conversions, but GCC sets bit 2 only for double-precision FPUs), with __fp16 in the IEEE format */
#if defined(__ARM_FP16_FORMAT_IEEE) && defined(__ARM_FP) \
    && (((__ARM_FP) & 2) || (defined(__ARM_ARCH_PROFILE) && __ARM_ARCH_PROFILE == 'M' && ((__ARM_FP) & 4)))
#define TU_HALF_HARDWARE 1
#else
#define TU_HALF_HARDWARE 0
#endif
#endif

/** The binary16 bit pattern nearest to `value` (round to nearest even; the FPU's conversion where
 * TU_HALF_HARDWARE is 1). */
uint16_t tu_half_from_float(float value);

/** tu_half_from_float in integer arithmetic (the portable path, on every target). */
uint16_t tu_half_from_float_soft(float value);

/** The float32 value of a binary16 pattern that is zero, subnormal, infinite or NaN (exact). */
float tu_half_to_float_special(uint16_t half);

/** The float32 value of a binary16 bit pattern in integer arithmetic (exact; NaN payloads kept): the
 * portable path of tu_half_to_float, on every target. */
static inline float tu_half_to_float_soft(uint16_t half)
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

/** The float32 value of a binary16 bit pattern (exact; NaN payloads kept). Inline: the trainer decodes
 * a minibatch of jets per update with it. */
static inline float tu_half_to_float(uint16_t half)
{
#if TU_HALF_HARDWARE
    if ((half & 0x7C00u) != 0x7C00u) {  /* finite: VCVTB.F32.F16, exact (Inf and NaN below: the FPU would
                                           quiet a signalling NaN) */
        __fp16 value;
        memcpy(&value, &half, sizeof value);
        return (float)value;
    }
    return tu_half_to_float_special(half);
#else
    return tu_half_to_float_soft(half);
#endif
}

/** The float32 value of a binary16 pattern that is not a NaN (exact), for a caller that knows it holds
 * no NaN (the trainer's reservoir keeps only finite patterns, tu_trainer.h): the FPU path converts without
 * looking at the pattern first (the hardware's NaN would have its payload quieted), the portable path is
 * tu_half_to_float_soft. */
static inline float tu_half_to_float_number(uint16_t half)
{
#if TU_HALF_HARDWARE
    __fp16 value;
    memcpy(&value, &half, sizeof value);
    return (float)value;
#else
    return tu_half_to_float_soft(half);
#endif
}

/** tu_half_to_float_number of two adjacent binary16 patterns, `pair` 4-byte aligned: on an Arm FPU one
 * load of both into one register, VCVTB of its low half and VCVTT of its high half (little-endian; the
 * compiler's __fp16 has no such pair). */
static inline void tu_half_pair_to_float_number(const uint16_t *pair, float *first, float *second)
{
#if TU_HALF_HARDWARE && defined(__GNUC__) && defined(__arm__) && !defined(__aarch64__) \
    && defined(__ARM_BIG_ENDIAN) == 0
    float both;
    memcpy(&both, __builtin_assume_aligned(pair, 4), sizeof both);
    __asm__("vcvtb.f32.f16 %0, %2\n\tvcvtt.f32.f16 %1, %2" : "=&t"(*first), "=t"(*second) : "t"(both));
#else
    *first = tu_half_to_float_number(pair[0]);
    *second = tu_half_to_float_number(pair[1]);
#endif
}

#endif /* TU_HALF_H */

/* float32 -> binary16 with round to nearest even (the FPU's conversion or integer arithmetic), and
 * binary16 -> float32 of the patterns that are not normal numbers (see tu_half.h). */
#define TU_LIBRARY 1 /* the library reads its configuration from a tu_config, no single-configuration macro */
#include "tu_fp.h" /* first: no fused multiply-add in the library */

#include <string.h>

#include "tu_half.h"

uint16_t tu_half_from_float(float value)
{
#if TU_HALF_HARDWARE
    if (value == value) {  /* not NaN: VCVTB.F16.F32 (a NaN takes the portable path: with the FPSCR's default
                              NaN mode set the FPU would drop its sign) */
        const __fp16 half = (__fp16)value;
        uint16_t bits;
        memcpy(&bits, &half, sizeof bits);
        return bits;
    }
#endif
    return tu_half_from_float_soft(value);
}

uint16_t tu_half_from_float_soft(float value)
{
    uint32_t bits, mag, sign, exponent, mantissa, shift, rest, halfway, out;
    memcpy(&bits, &value, sizeof bits);
    sign = bits >> 16 & 0x8000u;
    mag = bits & 0x7FFFFFFFu;
    if (mag > 0x7F800000u) {  /* NaN: quiet, the payload's top bits kept */
        return (uint16_t)(sign | 0x7E00u | (mag >> 13 & 0x03FFu));
    }
    if (mag >= 0x477FF000u) {  /* 65520 and above (and Inf): Inf (65520 is the tie of 65504 and 2^16) */
        return (uint16_t)(sign | 0x7C00u);
    }
    if (mag >= 0x38800000u) {  /* a normal half (>= 2^-14): drop 13 bits; a carry moves into the exponent */
        out = (mag >> 13) - (112u << 10);
        rest = mag & 0x1FFFu;
        out += rest > 0x1000u || (rest == 0x1000u && (out & 1u) != 0u);
        return (uint16_t)(sign | out);
    }
    exponent = mag >> 23;
    if (exponent < 102u) {  /* below 2^-25: rounds to zero (float subnormals too) */
        return (uint16_t)sign;
    }
    /* a subnormal half: value / 2^-24 = (1.f 2^23) >> (126 - exponent), shift in [14, 24] */
    mantissa = (mag & 0x007FFFFFu) | 0x00800000u;
    shift = 126u - exponent;
    out = mantissa >> shift;
    rest = mantissa & ((1u << shift) - 1u);
    halfway = 1u << (shift - 1u);
    out += rest > halfway || (rest == halfway && (out & 1u) != 0u);  /* may carry into the smallest normal */
    return (uint16_t)(sign | out);
}

float tu_half_to_float_special(uint16_t half)
{
    const uint32_t sign = (uint32_t)(half & 0x8000u) << 16;
    uint32_t mag = half & 0x7FFFu, bits, exponent = 113u;
    float value;
    if (mag >= 0x7C00u) {  /* Inf, NaN (payload kept) */
        bits = sign | 0x7F800000u | (mag & 0x03FFu) << 13;
    } else if (mag == 0u || mag >= 0x0400u) {  /* zero (a normal pattern also comes out right) */
        bits = mag == 0u ? sign : (sign | mag << 13) + (112u << 23);
    } else {  /* subnormal m 2^-24: normalize to 1.f 2^(exponent - 127) */
        while ((mag & 0x0400u) == 0u) {
            mag <<= 1;
            --exponent;
        }
        bits = sign | exponent << 23 | (mag & 0x03FFu) << 13;
    }
    memcpy(&value, &bits, sizeof value);
    return value;
}

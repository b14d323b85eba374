/* tanh in float arithmetic (see tu_math.h). Coefficients: least-squares fits in float64 on
 * Chebyshev nodes (tanh(x)/x - 1 on [0, 0.55], relative error 1.3e-10; exp(r) on |r| <= ln2/2,
 * 4e-9), far below the float rounding they feed. */
#define TU_LIBRARY 1 /* the library reads its configuration from a tu_config, no single-configuration macro */
#include "tu_fp.h" /* first: no fused multiply-add in the library */

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "tu_math.h"

#define TU_LOG2E 1.44269504f
#define TU_LN2_HI 0.693145751953125f      /* ln 2 = TU_LN2_HI + TU_LN2_LO, TU_LN2_HI exact in 16 bits */
#define TU_LN2_LO 1.42860676533018e-06f

/* exp(y) for y in [0, 18.3]: y = k ln2 + r (Cody-Waite), a polynomial in r, times 2^k. */
static float tu_exp_small(float y)
{
    const int32_t k = (int32_t)(y * TU_LOG2E + 0.5f);
    const float r = (y - (float)k * TU_LN2_HI) - (float)k * TU_LN2_LO;
    const float p = 1.0f + r + r * r * (0.500000010f + r * (0.166665159f + r * (0.0416662600f
                                      + r * (0.00836916263f + r * 0.00139465000f))));
    const uint32_t bits = (uint32_t)(k + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

float tu_tanhf(float x)
{
    const float a = fabsf(x);
    float y;
    if (a < 0.55f) {
        const float t = x * x;
        return x + x * t * (-0.333333333f + t * (0.133333260f + t * (-0.0539651700f + t * (0.0218223800f
                                              + t * (-0.00854021000f + t * 0.00254389000f)))));
    }
    if (a <= 9.1f) {
        y = 1.0f - 2.0f / (tu_exp_small(2.0f * a) + 1.0f);
    } else if (a > 9.1f) {
        y = 1.0f; /* tanh rounds to 1 in float beyond 9.01 */
    } else {
        return x + x; /* NaN */
    }
    return x < 0.0f ? -y : y;
}

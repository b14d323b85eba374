/* PCG32 XSH-RR (O'Neill 2014); mirrored by torch_ude/prng.py. */
#define TU_LIBRARY 1 /* the library reads its configuration from a tu_config, no single-configuration macro */
#include "tu_fp.h" /* first: no fused multiply-add in the library */

#include <math.h>

#include "tu_prng.h"

#define TU_TWO_PI 6.28318530717958647692f

void tu_prng_seed(tu_prng *self, uint64_t seed, uint64_t stream)
{
    self->state = 0u;
    self->inc = (stream << 1u) | 1u;
    (void)tu_prng_next(self);
    self->state += seed;
    (void)tu_prng_next(self);
}

uint32_t tu_prng_next(tu_prng *self)
{
    return tu_prng_next_inline(self);
}

uint32_t tu_prng_below(tu_prng *self, uint32_t bound)
{
    return tu_prng_below_inline(self, bound, tu_prng_threshold(bound));
}

float tu_prng_uniform(tu_prng *self)
{
    return (float)(tu_prng_next(self) >> 8) * (1.0f / 16777216.0f);
}

float tu_prng_normal(tu_prng *self)
{
    const float u1 = ((float)(tu_prng_next(self) >> 8) + 1.0f) * (1.0f / 16777216.0f);  /* (0, 1] */
    const float u2 = tu_prng_uniform(self);
    return sqrtf(-2.0f * logf(u1)) * cosf(TU_TWO_PI * u2);
}

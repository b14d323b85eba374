/* PCG32 (O'Neill 2014, the pcg32 "XSH RR" variant): the trainer's only source of randomness.
 * The same generator is implemented in Python (torch_ude/prng.py) so that both trainers can
 * draw the same reservoir slots and minibatch indices. */
#ifndef TU_PRNG_H
#define TU_PRNG_H

#include <stdint.h>

/** Generator state: 64-bit LCG state and odd increment (selects the stream). */
typedef struct {
    uint64_t state;
    uint64_t inc;
} tu_prng;

/** Seed a generator like pcg32_srandom_r(seed, stream). */
void tu_prng_seed(tu_prng *self, uint64_t seed, uint64_t stream);

/** The next 32 uniformly distributed bits. */
uint32_t tu_prng_next(tu_prng *self);

/** A uniform integer in [0, bound) without modulo bias (rejection); bound >= 1. */
uint32_t tu_prng_below(tu_prng *self, uint32_t bound);

/** tu_prng_next, inline (the body of tu_prng_next). */
static inline uint32_t tu_prng_next_inline(tu_prng *self)
{
    const uint64_t old = self->state;
    const uint32_t xorshifted = (uint32_t)(((old >> 18u) ^ old) >> 27u);
    const uint32_t rot = (uint32_t)(old >> 59u);
    self->state = old * 6364136223846793005ULL + self->inc;
    return (xorshifted >> rot) | (xorshifted << ((32u - rot) & 31u));
}

/** The rejection threshold of tu_prng_below for `bound` (>= 1), for tu_prng_below_inline. */
static inline uint32_t tu_prng_threshold(uint32_t bound)
{
    return (uint32_t)(0u - bound) % bound;
}

/** tu_prng_below, inline, with the threshold tu_prng_threshold(bound) computed once by a caller that
 * draws many integers below the same bound (the trainer's minibatch): the same draws. */
static inline uint32_t tu_prng_below_inline(tu_prng *self, uint32_t bound, uint32_t threshold)
{
    for (;;) {
        const uint32_t r = tu_prng_next_inline(self);
        if (r >= threshold) {
            return r % bound;
        }
    }
}

/** A uniform float in [0, 1) with 24 random bits. */
float tu_prng_uniform(tu_prng *self);

/** A standard normal float by the Box-Muller transform of two uniforms (one value per call). */
float tu_prng_normal(tu_prng *self);

#endif /* TU_PRNG_H */

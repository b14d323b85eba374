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

/** A uniform float in [0, 1) with 24 random bits. */
float tu_prng_uniform(tu_prng *self);

/** A standard normal float by the Box-Muller transform of two uniforms (one value per call). */
float tu_prng_normal(tu_prng *self);

#endif /* TU_PRNG_H */

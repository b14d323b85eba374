/* Float helpers. The one transcendental function of the trainer's hot loop is computed the same way on every
 * target: newlib's tanhf takes about 90 instructions on a Cortex-M4 and differs from glibc's in
 * the last bit; this one takes about 30 and gives the same bits on every IEEE-754 single
 * precision unit (float arithmetic only, -ffp-contract=off). Error at most 2 ulp (tested). */
#ifndef TU_MATH_H
#define TU_MATH_H

/** tanh(x) for float x (NaN for NaN, +-1 for +-Inf). */
float tu_tanhf(float x);

/** 1 for a finite float, 0 for NaN and +-Inf (without libm or classification macros). */
static inline int tu_finite(float v)
{
    return v - v == 0.0f;
}

#endif /* TU_MATH_H */

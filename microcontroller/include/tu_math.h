/* The one transcendental function of the trainer's hot loop, computed the same way on every
 * target: newlib's tanhf takes about 90 instructions on a Cortex-M4 and differs from glibc's in
 * the last bit; this one takes about 30 and gives the same bits on every IEEE-754 single
 * precision unit (float arithmetic only, -ffp-contract=off). Error at most 2 ulp (tested). */
#ifndef TU_MATH_H
#define TU_MATH_H

/** tanh(x) for float x (NaN for NaN, +-1 for +-Inf). */
float tu_tanhf(float x);

#endif /* TU_MATH_H */

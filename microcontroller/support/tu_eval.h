/* On-device evaluation of the single pendulum: the recovered damping c_hat (torch_ude.metrics.
 * damping_estimate on the visited grid) and a simulated plant (RK4 of the true pendulum,
 * re-excitation and Gaussian noise from PCG32) for firmware that trains on its own stream. */
#ifndef TU_EVAL_H
#define TU_EVAL_H

#include "tu_trainer.h"

#if TU_SIM_PENDULUM

/** c_hat = -<r, omega> / <omega, omega> of the learned omega residual r = F - f_known (EMA
 * weights) over the 41 x 41 grid theta in [-1.2, 1.2], omega in [-3.5, 3.5] inside the energy
 * level of x0 (TU_SIM_X0), as torch_ude.metrics.damping_estimate. */
float tu_pendulum_damping(const tu_trainer *trainer);

/** The simulated pendulum: state, re-excitation clock, generators, noise level. */
typedef struct {
    float x[2];           /**< clean state (rad, rad/s) */
    int32_t left;         /**< samples until the next re-excitation */
    int32_t segment;      /**< re-excitation count (the segment id of the samples) */
    float sigma[2];       /**< noise standard deviation per channel */
    float added_damping;  /**< damping added to the true plant's, 1/s (a plant that changes) */
    tu_prng excite, noise;
} tu_pendulum_sim;

/** Start at x0 with noise `noise` x the clean channel RMS over `rms_seconds` (a first clean pass). */
void tu_pendulum_sim_init(tu_pendulum_sim *sim, uint64_t seed, float noise, float rms_seconds);

/** The next noisy sample; writes the sensor values and returns the segment id. */
int32_t tu_pendulum_sim_next(tu_pendulum_sim *sim, float y[2]);

#endif

#endif /* TU_EVAL_H */

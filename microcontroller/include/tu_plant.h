/* The known physics f_known of the plants (Eq. 3-8) with their state Jacobians.
 * The plant is chosen at compile time by TU_PLANT in the generated tu_config.h;
 * its constants (known model and true plant) come from the generated model tables. */
#ifndef TU_PLANT_H
#define TU_PLANT_H

#include "tu_config.h"

#define TU_PLANT_PENDULUM 1         /* theta' = omega, omega' = -(g/L) sin theta - c omega (Eq. 3-4) */
#define TU_PLANT_DOUBLE_PENDULUM 2  /* Eq. (5)-(8), state (theta1, theta2, omega1, omega2) */

#if TU_PLANT == TU_PLANT_PENDULUM
/** Single pendulum constants: g in m/s^2, L in m, c in 1/s. */
typedef struct {
    float gravity;
    float length;
    float damping;
} tu_plant;
#if TU_N != 2
#error "the single pendulum has TU_N = 2 states"
#endif
#elif TU_PLANT == TU_PLANT_DOUBLE_PENDULUM
/** Double pendulum constants: g in m/s^2, masses in kg, lengths in m, joint damping in 1/s. */
typedef struct {
    float gravity;
    float m1, m2;
    float l1, l2;
    float c1, c2;
} tu_plant;
#if TU_N != 4
#error "the double pendulum has TU_N = 4 states"
#endif
#else
#error "TU_PLANT must be TU_PLANT_PENDULUM or TU_PLANT_DOUBLE_PENDULUM"
#endif

/** f(x): states (rad, rad/s) -> time derivatives, both TU_N floats. */
void tu_plant_field(const tu_plant *plant, const float x[TU_N], float f[TU_N]);

/** The state Jacobian df/dx at x, row-major jac[i][j] = d f_i / d x_j, in 1/s. */
void tu_plant_jacobian(const tu_plant *plant, const float x[TU_N], float jac[TU_N][TU_N]);

#endif /* TU_PLANT_H */

/* The plant's known field f_known(x, u) with its Jacobians, and the true field of a plant the
 * firmware simulates. Their code is generated, never written by hand: microcontroller.generate
 * traces the plant's Python definition (its torch_ude System's known field) into CasADi,
 * differentiates it there and writes it as float C into tu_plant_code.h, which src/tu_plant.c
 * compiles (microcontroller/plant_code.py). */
#ifndef TU_PLANT_H
#define TU_PLANT_H

#include "tu_config.h"

/** f_known(x, u): states x (TU_N, the plant's units) and inputs u (TU_NU; NULL when TU_NU is 0)
 * -> f (TU_N, units per second). */
void tu_plant_field(const float x[TU_N], const float *u, float f[TU_N]);

/** f_known(x, u) with its state Jacobian jx[i][j] = d f_i / d x_j (1/s) and input Jacobian
 * ju[i * TU_NU + k] = d f_i / d u_k (TU_N x TU_NU, row-major; NULL when TU_NU is 0). */
void tu_plant_jacobians(const float x[TU_N], const float *u, float f[TU_N], float jx[TU_N][TU_N], float *ju);

#if TU_SIM_PENDULUM
/** f*(x) of the true plant the firmware simulates (support/tu_eval.c), TU_N -> TU_N. */
void tu_plant_truth(const float x[TU_N], float f[TU_N]);
#endif

#endif /* TU_PLANT_H */

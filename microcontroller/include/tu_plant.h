/* The plant's known field f_known(x, u) with its Jacobians, and the true field of a plant the
 * firmware simulates. Their code is generated, never written by hand: microcontroller.generate
 * traces the plant's Python definition (its torch_ude System's known field) into CasADi,
 * differentiates it there and writes it as float C into tu_plant_code.h (static functions, one
 * set per configuration, microcontroller/plant_code.py), which a configuration (tu_model.h)
 * points to. */
#ifndef TU_PLANT_H
#define TU_PLANT_H

#include "tu_config.h"

/** f_known(x, u): states x (n, the plant's units) and inputs u (nu; NULL when nu is 0)
 * -> f (n, units per second). */
typedef void (*tu_plant_field_fn)(const float *x, const float *u, float *f);

/** f_known(x, u) with its state Jacobian jx[i * TU_N_MAX + j] = d f_i / d x_j (1/s) and input
 * Jacobian ju[i * nu + k] = d f_i / d u_k (n x nu, row-major; NULL when nu is 0). */
typedef void (*tu_plant_jacobians_fn)(const float *x, const float *u, float *f, float *jx, float *ju);

/** f*(x) of the true plant the firmware simulates (support/tu_eval.c), n -> n. */
typedef void (*tu_plant_truth_fn)(const float *x, float *f);

#endif /* TU_PLANT_H */

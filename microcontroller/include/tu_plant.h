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

/* A known model that trains physical parameters (torch_ude/systems/parameters.py; tu_model.h's TU_PHYSICAL):
 * its field and Jacobians read theta (P values, p = p0 + s theta for each trained constant) too, and a third
 * function gives the physical part of the jet gradient. Float32. */

/** f_known(x, u; theta), as tu_plant_field_fn. */
typedef void (*tu_plant_field_p_fn)(const float *x, const float *u, const float *theta, float *f);

/** f_known(x, u; theta) with J_x and J_u, as tu_plant_jacobians_fn. */
typedef void (*tu_plant_jacobians_p_fn)(const float *x, const float *u, const float *theta, float *f, float *jx,
                                        float *ju);

/** g (P) = d/dtheta [ubar . f + wbar . (J_x f v + J_u f udot)] at (x, u, theta) with the tangent v (n) and the
 * input rates udot (nu; NULL when nu is 0) held fixed, ubar and wbar (n) the cotangents of f and of the tangent
 * term (torch_ude.field.HybridField.physical_vjp). */
typedef void (*tu_plant_physical_fn)(const float *x, const float *u, const float *theta, const float *v,
                                     const float *udot, const float *ubar, const float *wbar, float *g);

/** fp = df/dtheta and lp = d/dtheta (J_x f v + J_u f udot) at (x, u, theta), n x P row-major each (per second and
 * per second squared per unit of theta), the tangent v (n) and the input rates udot (nu; NULL when nu is 0) held
 * fixed: the known model's part of the jet residuals' Jacobian in theta (torch_ude/physical.py), read by the
 * end-of-run refit and the standard errors (tu_trainer_refit, tu_trainer_standard_errors). */
typedef void (*tu_plant_sensitivity_fn)(const float *x, const float *u, const float *theta, const float *v,
                                        const float *udot, float *fp, float *lp);

/** f*(x) of the true plant the firmware simulates (support/tu_eval.c), n -> n. */
typedef void (*tu_plant_truth_fn)(const float *x, float *f);

#endif /* TU_PLANT_H */

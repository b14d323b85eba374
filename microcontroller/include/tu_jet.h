/* The hybrid field F = f_known + N_theta and the jet-matching loss with its exact gradient
 * (Eq. 10-16), one sample at a time, float32. Mirrors torch_ude/field.py and jet.py. */
#ifndef TU_JET_H
#define TU_JET_H

#include "tu_config.h"
#include "tu_model.h"

/** F(x) = f_known(x) + out_scale * MLP(x / in_scale) (Eq. 2), f_known the configuration's generated
 * field; with TU_NU recorded inputs u (the sizes are the configuration's), F(x, u) = f_known(x, u) + out_scale * MLP([x / in_scale, u / input scale])
 * (the plain residual of torch_ude.field.HybridField); with the configuration's input map the network reads
 * z = phi(x, u) instead: periodic states as (sin, cos), invariant ones not at all (tu_model.h). Pointers are
 * borrowed. */
typedef struct {
    const tu_config *config; /**< sizes, plant and network shape */
    const float *params;     /**< num_params network weights, then num_physical theta (TU_PHYSICAL) */
    const float *in_scale;   /**< TU_CH network input scales: the TU_N state RMS, then the TU_NU input RMS
                                  (calibrated x_rms of every channel; the map reads those of its plain states) */
    const float *out_scale;  /**< TU_N output scales (calibrated first-derivative RMS s1) */
} tu_field;

/** The loss of Eq. (13): scales of the residuals and the weights lambda1, lambda2. */
typedef struct {
    float s1[TU_N_MAX];  /**< first-derivative RMS per channel (r1 scale) */
    float s2[TU_N_MAX];  /**< second-derivative RMS per channel (r2 scale) */
    float lambda1;   /**< weight of ||r1||^2 */
    float lambda2;   /**< weight of ||r2||^2 (0 when the SNR gate is closed) */
} tu_jet_loss;

/** F(x, u) in state units per second; u holds TU_NU inputs (NULL when TU_NU is 0). */
void tu_field_eval(const tu_field *field, const float *x, const float *u, float *value);

/** One sample (x_hat, xdot_hat, xddot_hat) of a minibatch of `batch` samples: adds its
 * share of the gradient of the batch-mean loss to grad (Eq. 14-16) and its ||r1||^2 and
 * ||r2||^2 to *sq1 and *sq2. r2 is evaluated only when lambda2 > 0 or report_r2 is set
 * (the second-order terms of the gradient only when lambda2 > 0). With recorded inputs, u and
 * udot are the SG estimates of the TU_NU inputs and their rates at the same window centre
 * (NULL when TU_NU is 0): r1 compares with F(x, u) and r2 with the Lie derivative
 * G = J_x F F + J_u F udot (torch_ude.jet). */
void tu_jet_accumulate(const tu_field *field, const tu_jet_loss *loss, int batch, const float *x,
                       const float *xdot, const float *xddot, const float *u, const float *udot,
                       int report_r2, float *grad, float *sq1, float *sq2);

#if TU_PHYSICAL
/** The Jacobian in theta of one sample's scaled jet residuals r = (sqrt(lambda1) r1, sqrt(lambda2) r2) (Eq. 10, 12;
 * torch_ude/physical.py), the network held at its weights: rows (2 n x P, row-major) gets dr1/dtheta =
 * -sqrt(lambda1) (df/dtheta) / s1 in its first n rows and dr2/dtheta = -sqrt(lambda2) (d/dtheta (J_x f v + J_u f
 * udot) + J_x F df/dtheta) / s2, v = F, in the next n (zero when lambda2 is 0), f_known from the configuration's
 * generated sensitivity and J_x F (df/dtheta) the known Jacobian's product plus the network's tangent along each
 * column. u, udot as for tu_jet_accumulate. Only a configuration that trains physical parameters. */
void tu_jet_physical_rows(const tu_field *field, const tu_jet_loss *loss, const float *x, const float *u,
                          const float *udot, float *rows);
#endif

#endif /* TU_JET_H */

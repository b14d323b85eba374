/* The tanh MLP with hand-written forward, JVP, input VJP and reverse-over-JVP parameter
 * gradient (Appendix A.1), one sample at a time, float32. Mirrors torch_ude/mlp.py.
 *
 * The sizes are the configuration's (tu_model.h; below in the upper case of the single-configuration
 * macros): layers l = 1..L (TU_NUM_LAYERS affine layers, sizes TU_LAYER_SIZES: TU_LAYER_SIZES[0] inputs, the
 * TU_CH channels or, with the input map, the columns of z = phi(x, u) (tu_model.h); TU_N outputs):
 * h_0 = z[0 : TU_MLP_READS], a_l = W_l h_{l-1} + b_l, h_l = tanh(a_l) for l < L, output o = a_L.
 * With TU_LINEAR the output gains the linear term of the whole input, o = a_L + L z, L a
 * (TU_N, TU_LAYER_SIZES[0]) matrix (torch_ude.mlp.TanhMLP(linear=True)); its derivatives: odot gains L zdot,
 * the input cotangent L^T obar, and dL = obar z^T + tbar zdot^T. TU_MLP_READS < TU_LAYER_SIZES[0] (the
 * input-affine residual: the tanh layers read the columns of the states) needs TU_LINEAR: the
 * inputs then reach the output through L alone, and W_1 is (d_1, TU_MLP_READS).
 * Parameters are one flat array in the order W_1, b_1, ..., W_L, b_L (then L with TU_LINEAR)
 * with W_l and L row-major [out][in] (torch's nn.Linear layout), TU_NUM_PARAMS floats. */
#ifndef TU_MLP_H
#define TU_MLP_H

#include "tu_config.h"
#include "tu_model.h"

#if TU_NUM_LAYERS_MAX < 2
#error "the MLP needs at least one hidden layer (TU_NUM_LAYERS_MAX >= 2)"
#endif

/** Parameter tensors of the build's largest MLP: W_1, b_1, ..., W_L, b_L, then L with the linear term. */
#define TU_MLP_TENSORS_MAX (2 * TU_NUM_LAYERS_MAX + 1)

/** Forward values kept for the reverse sweeps. */
typedef struct {
    float z[TU_NET_IN_MAX];                           /**< input h_0 */
    float hidden[TU_NUM_LAYERS_MAX - 1][TU_WIDTH_MAX]; /**< h_1 .. h_{L-1} */
    float out[TU_N_MAX];                              /**< o */
} tu_mlp_acts;

/** Forward-mode tangents of a JVP along zdot. */
typedef struct {
    float zdot[TU_NET_IN_MAX];                        /**< input tangent */
    float pre[TU_NUM_LAYERS_MAX - 1][TU_WIDTH_MAX];    /**< adot_1 .. adot_{L-1} */
    float hidden[TU_NUM_LAYERS_MAX - 1][TU_WIDTH_MAX]; /**< hdot_l = (1 - h_l^2) adot_l */
    float out[TU_N_MAX];                              /**< odot */
} tu_mlp_tangents;

/** Number of parameter tensors (2 TU_NUM_LAYERS + TU_LINEAR) and the size of tensor k (W_1, b_1, ..., L), floats. */
int tu_mlp_tensor_count(const tu_config *cfg);
int tu_mlp_tensor_size(const tu_config *cfg, int k);

/** Forward pass at z (TU_LAYER_SIZES[0] inputs: the mapped states, then the scaled recorded inputs), filling acts. */
void tu_mlp_forward(const tu_config *cfg, const float *params, const float *z, tu_mlp_acts *acts);

/** The tangent odot = (do/dz) zdot at the point of acts. */
void tu_mlp_jvp(const tu_config *cfg, const float *params, const tu_mlp_acts *acts, const float *zdot,
                tu_mlp_tangents *tan);

/** The input cotangent zbar = (do/dz)^T obar (TU_LAYER_SIZES[0] columns). */
void tu_mlp_vjp_input(const tu_config *cfg, const float *params, const tu_mlp_acts *acts, const float *obar,
                      float *zbar);

/** Add to grad (TU_NUM_PARAMS floats) the parameter gradient of <obar, o> + <tbar, odot>.
 * tan and tbar are NULL for the first term only (Eq. 16). */
void tu_mlp_backward(const tu_config *cfg, const float *params, const tu_mlp_acts *acts, const float *obar,
                     const tu_mlp_tangents *tan, const float *tbar, float *grad);

#endif /* TU_MLP_H */

/* Jet-matching gradient by a VJP and reverse mode over a JVP (Eq. 14-16), float32. */
#define TU_LIBRARY 1 /* the library reads its configuration from a tu_config, no single-configuration macro */
#include "tu_fp.h" /* first: no fused multiply-add in the library */

#include <math.h>
#include <stddef.h>

#include "tu_jet.h"
#include "tu_mlp.h"

/* The input map of a configuration with one (cfg->input_map, tu_model.h; torch_ude/input_map.py): z's columns
 * are x_j / s_in_j for the plain states j, sin x_i for the periodic states i (rad), cos x_i for the same i, then
 * u_k / s_u_k; invariant states are not read. The map is elementwise per state, so its Jacobian comes from z
 * itself: d sin x / dx = cos x, d cos x / dx = -sin x. A build without the map (TU_INPUT_MAP 0) calls none of
 * these: its conditions fold to the plain z = [x / s_in, u / s_u], the code it had before. */
static void tu_map_input(const tu_config *cfg, const float *in_scale, const float *x, const float *u, float *z)
{
    const int a = cfg->n_plain, p = cfg->n_periodic;
    int k;
    for (k = 0; k < a; ++k) {
        z[k] = x[cfg->plain[k]] / in_scale[cfg->plain[k]];
    }
    for (k = 0; k < p; ++k) {
        z[a + k] = sinf(x[cfg->periodic[k]]);
        z[a + p + k] = cosf(x[cfg->periodic[k]]);
    }
    for (k = 0; k < cfg->nu; ++k) {
        z[a + 2 * p + k] = u[k] / in_scale[cfg->n + k];
    }
}

/* zdot = (dz/dx) v + (dz/du) udot at z: the state tangent v (n) and the input rates udot (nu). */
static void tu_map_tangent(const tu_config *cfg, const float *in_scale, const float *z, const float *v,
                           const float *udot, float *zdot)
{
    const int a = cfg->n_plain, p = cfg->n_periodic;
    int k;
    for (k = 0; k < a; ++k) {
        zdot[k] = v[cfg->plain[k]] / in_scale[cfg->plain[k]];
    }
    for (k = 0; k < p; ++k) {
        const float w = v[cfg->periodic[k]];
        zdot[a + k] = z[a + p + k] * w;
        zdot[a + p + k] = -z[a + k] * w;
    }
    for (k = 0; k < cfg->nu; ++k) {
        zdot[a + 2 * p + k] = udot[k] / in_scale[cfg->n + k];
    }
}

/* The state cotangent xbar = (dz/dx)^T zbar at z (n values; 0 for an invariant state; the inputs' columns
 * get none: inputs are data). */
static void tu_map_pullback(const tu_config *cfg, const float *in_scale, const float *z, const float *zbar,
                            float *xbar)
{
    const int a = cfg->n_plain, p = cfg->n_periodic;
    int k;
    for (k = 0; k < cfg->n; ++k) {
        xbar[k] = 0.0f;
    }
    for (k = 0; k < a; ++k) {
        xbar[cfg->plain[k]] = zbar[k] / in_scale[cfg->plain[k]];
    }
    for (k = 0; k < p; ++k) {
        xbar[cfg->periodic[k]] = zbar[a + k] * z[a + p + k] - zbar[a + p + k] * z[a + k];
    }
}

/* The network's input z = [x / in_scale, u / input scale] (TU_CH columns), or phi(x, u) with the input map. */
TU_KERNEL void tu_net_input(int n, int nu, const tu_field *field, const float *x, const float *u, float *z)
{
    int i;
    if (TU_INPUT_MAP && field->config->input_map) {
        tu_map_input(field->config, field->in_scale, x, u, z);
        return;
    }
    for (i = 0; i < n; ++i) {
        z[i] = x[i] / field->in_scale[i];
    }
    for (i = 0; i < nu; ++i) {
        z[n + i] = u[i] / field->in_scale[n + i];
    }
}

/* f_known(x, u) of the configuration, and with its Jacobians J_x, J_u: at theta = params[num_params ..] for one that
 * trains physical parameters (TU_PHYSICAL). A build without TU_PHYSICAL calls field and jacobians as before. */
TU_KERNEL void tu_known_field(const tu_config *cfg, const float *params, const float *x, const float *u, float *f)
{
#if TU_PHYSICAL
    if (cfg->num_physical > 0) {
        cfg->field_p(x, u, params + cfg->num_params, f);
        return;
    }
#else
    (void)params;
#endif
    cfg->field(x, u, f);
}

TU_KERNEL void tu_known_jacobians(const tu_config *cfg, const float *params, const float *x, const float *u, float *f,
                                  float *jx, float *ju)
{
#if TU_PHYSICAL
    if (cfg->num_physical > 0) {
        cfg->jacobians_p(x, u, params + cfg->num_params, f, jx, ju);
        return;
    }
#else
    (void)params;
#endif
    cfg->jacobians(x, u, f, jx, ju);
}

void tu_field_eval(const tu_field *field, const float *x, const float *u, float *value)
{
    const tu_config *cfg = field->config;
    tu_mlp_acts acts;
    float z[TU_NET_IN_MAX];
    int i;
    tu_net_input(cfg->n, cfg->nu, field, x, u, z);
    tu_mlp_forward(cfg, field->params, z, &acts);
    tu_known_field(cfg, field->params, x, u, value);
    for (i = 0; i < cfg->n; ++i) {
        value[i] += field->out_scale[i] * acts.out[i];
    }
}

#if TU_PHYSICAL
/* grad[num_params + k] += d/dtheta_k [ubar . f + wbar . (J_x f v + J_u f udot)] at the sample (the generated
 * tu_plant_physical_fn; torch_ude.field.HybridField.physical_vjp). */
static void tu_physical_accumulate(const tu_field *field, const float *x, const float *u, const float *v,
                                   const float *udot, const float *ubar, const float *wbar, float *grad)
{
    const tu_config *cfg = field->config;
    float g[TU_PHYSICAL_MAX];
    int k;
    cfg->physical(x, u, field->params + cfg->num_params, v, udot, ubar, wbar, g);
    for (k = 0; k < cfg->num_physical; ++k) {
        grad[cfg->num_params + k] += g[k];
    }
}
#endif

#if TU_PHYSICAL
void tu_jet_physical_rows(const tu_field *field, const tu_jet_loss *loss, const float *x, const float *u,
                          const float *udot, float *rows)
{
    const tu_config *cfg = field->config;
    const int n = cfg->n, nu = cfg->nu, p = cfg->num_physical;
    const float r1w = sqrtf(loss->lambda1), r2w = loss->lambda2 > 0.0f ? sqrtf(loss->lambda2) : 0.0f;
    tu_mlp_acts acts;
    tu_mlp_tangents tan;
    float z[TU_NET_IN_MAX], value[TU_N_MAX], col[TU_N_MAX], dz[TU_NET_IN_MAX], held[TU_NU_MAX + 1] = {0.0f};
    float jac[TU_N_MAX][TU_N_MAX], ju[TU_N_MAX * TU_NU_MAX + 1];
    float fp[TU_N_MAX * TU_PHYSICAL_MAX], lp[TU_N_MAX * TU_PHYSICAL_MAX];
    int i, j, k;
    tu_net_input(n, nu, field, x, u, z);
    tu_mlp_forward(cfg, field->params, z, &acts);
    tu_known_jacobians(cfg, field->params, x, u, value, &jac[0][0], ju);
    for (i = 0; i < n; ++i) {
        value[i] += field->out_scale[i] * acts.out[i];
    }
    cfg->sensitivity(x, u, field->params + cfg->num_params, value, udot, fp, lp);
    for (k = 0; k < p; ++k) {
        for (i = 0; i < n; ++i) {
            col[i] = fp[i * p + k];
        }
        /* the network's tangent along the state direction col, the inputs held (their rates zero) */
        if (TU_INPUT_MAP && cfg->input_map) {
            tu_map_tangent(cfg, field->in_scale, z, col, held, dz);
        } else {
            tu_net_input(n, nu, field, col, held, dz);
        }
        tu_mlp_jvp(cfg, field->params, &acts, dz, &tan);
        for (i = 0; i < n; ++i) {
            float jf = field->out_scale[i] * tan.out[i];
            for (j = 0; j < n; ++j) {
                jf += jac[i][j] * col[j];
            }
            rows[i * p + k] = -r1w * col[i] / loss->s1[i];
            rows[(n + i) * p + k] = r2w > 0.0f ? -r2w * (lp[i * p + k] + jf) / loss->s2[i] : 0.0f;
        }
    }
}
#endif

/* The body of tu_jet_accumulate for n states and nu inputs. */
TU_KERNEL void tu_accumulate(int n, int nu, const tu_field *field, const tu_jet_loss *loss, int batch, const float *x,
                             const float *xdot, const float *xddot, const float *u, const float *udot, int report_r2,
                             float *grad, float *sq1, float *sq2)
{
    const tu_config *cfg = field->config;
    const int second = loss->lambda2 > 0.0f;
    const float fb = (float)batch;
    tu_mlp_acts acts;
    tu_mlp_tangents tan;
    float z[TU_NET_IN_MAX], value[TU_N_MAX], lie[TU_N_MAX], r1[TU_N_MAX], r2[TU_N_MAX], ubar[TU_N_MAX], obar[TU_N_MAX];
    /* J_x (row stride TU_N_MAX) and J_u (row-major n x nu) of f_known (one spare: C99 has no empty array) */
    float jac[TU_N_MAX][TU_N_MAX], ju[TU_N_MAX * TU_NU_MAX + 1];
    int i, j;
    tu_net_input(n, nu, field, x, u, z);
    tu_mlp_forward(cfg, field->params, z, &acts);
    if (second || report_r2) {
        tu_known_jacobians(cfg, field->params, x, u, value, &jac[0][0], ju); /* f_known and its Jacobians share
                                                                                their terms */
    } else {
        tu_known_field(cfg, field->params, x, u, value);
    }
    for (i = 0; i < n; ++i) {
        value[i] += field->out_scale[i] * acts.out[i];
        r1[i] = (xdot[i] - value[i]) / loss->s1[i];
        *sq1 += r1[i] * r1[i];
        ubar[i] = (-2.0f * loss->lambda1 / fb) * (r1[i] / loss->s1[i]);
    }
    if (second || report_r2) {
        /* G = J_x F F + J_u F udot (Eq. 11): the known Jacobians and the MLP's tangent along
         * v = [F / in_scale, udot / input scale] (with the input map: (dz/dx) F + (dz/du) udot) */
        float v[TU_NET_IN_MAX];
        if (TU_INPUT_MAP && cfg->input_map) {
            tu_map_tangent(cfg, field->in_scale, z, value, udot, v);
        } else {
            tu_net_input(n, nu, field, value, udot, v);
        }
        tu_mlp_jvp(cfg, field->params, &acts, v, &tan);
        for (i = 0; i < n; ++i) {
            float g = 0.0f;
            for (j = 0; j < n; ++j) {
                g += jac[i][j] * value[j];
            }
            if (nu > 0) {
                float gu = 0.0f;
                for (j = 0; j < nu; ++j) {
                    gu += ju[i * nu + j] * udot[j];
                }
                g += gu;
            }
            lie[i] = g + field->out_scale[i] * tan.out[i];
            r2[i] = (xddot[i] - lie[i]) / loss->s2[i];
            *sq2 += r2[i] * r2[i];
        }
    }
    if (second) {
        float w[TU_N_MAX], ow[TU_N_MAX], back[TU_NET_IN_MAX], xbar[TU_N_MAX], tbar[TU_N_MAX];
        for (i = 0; i < n; ++i) {
            w[i] = (-2.0f / fb) * (r2[i] / loss->s2[i]);
            ow[i] = field->out_scale[i] * w[i];
        }
        tu_mlp_vjp_input(cfg, field->params, &acts, ow, back);
        if (TU_INPUT_MAP && cfg->input_map) {  /* J_x,N^T w = (dz/dx)^T J_z,N^T w */
            tu_map_pullback(cfg, field->in_scale, z, back, xbar);
        }
        for (j = 0; j < n; ++j) {
            float jtw = 0.0f;  /* (J_x,known^T w)_j + (J_x,N^T w)_j: the inputs are data, no cotangent */
            for (i = 0; i < n; ++i) {
                jtw += jac[i][j] * w[i];
            }
            jtw += TU_INPUT_MAP && cfg->input_map ? xbar[j] : back[j] / field->in_scale[j];
            ubar[j] += loss->lambda2 * jtw;
        }
        for (i = 0; i < n; ++i) {
            obar[i] = field->out_scale[i] * ubar[i];
            tbar[i] = field->out_scale[i] * (loss->lambda2 * w[i]);
        }
        tu_mlp_backward(cfg, field->params, &acts, obar, &tan, tbar, grad);
#if TU_PHYSICAL
        if (cfg->num_physical > 0) {  /* theta's part: ubar through f, lambda2 w through the tangent term */
            float wbar[TU_N_MAX];
            for (i = 0; i < n; ++i) {
                wbar[i] = loss->lambda2 * w[i];
            }
            tu_physical_accumulate(field, x, u, value, udot, ubar, wbar, grad);
        }
#endif
    } else {
        for (i = 0; i < n; ++i) {
            obar[i] = field->out_scale[i] * ubar[i];
        }
        tu_mlp_backward(cfg, field->params, &acts, obar, NULL, NULL, grad);
#if TU_PHYSICAL
        if (cfg->num_physical > 0) {  /* theta's part: ubar through f (no tangent term: wbar 0) */
            float wbar[TU_N_MAX] = {0.0f};
            tu_physical_accumulate(field, x, u, value, udot, ubar, wbar, grad);
        }
#endif
    }
}

void tu_jet_accumulate(const tu_field *field, const tu_jet_loss *loss, int batch, const float *x,
                       const float *xdot, const float *xddot, const float *u, const float *udot,
                       int report_r2, float *grad, float *sq1, float *sq2)
{
    const tu_config *cfg = field->config;
    if (cfg->n == TU_N_MAX && cfg->nu == TU_NU_MAX) {  /* the build's largest sizes: constant bounds */
        tu_accumulate(TU_N_MAX, TU_NU_MAX, field, loss, batch, x, xdot, xddot, u, udot, report_r2, grad, sq1, sq2);
    } else {
        tu_accumulate(cfg->n, cfg->nu, field, loss, batch, x, xdot, xddot, u, udot, report_r2, grad, sq1, sq2);
    }
}

/* Jet-matching gradient by a VJP and reverse mode over a JVP (Eq. 14-16), float32. */
#define TU_LIBRARY 1 /* the library reads its configuration from a tu_config, no single-configuration macro */
#include "tu_fp.h" /* first: no fused multiply-add in the library */

#include <stddef.h>

#include "tu_jet.h"
#include "tu_mlp.h"

/* The network's input z = [x / in_scale, u / input scale] (TU_CH columns). */
TU_KERNEL void tu_net_input(int n, int nu, const tu_field *field, const float *x, const float *u, float *z)
{
    int i;
    for (i = 0; i < n; ++i) {
        z[i] = x[i] / field->in_scale[i];
    }
    for (i = 0; i < nu; ++i) {
        z[n + i] = u[i] / field->in_scale[n + i];
    }
}

void tu_field_eval(const tu_field *field, const float *x, const float *u, float *value)
{
    const tu_config *cfg = field->config;
    tu_mlp_acts acts;
    float z[TU_CH_MAX];
    int i;
    tu_net_input(cfg->n, cfg->nu, field, x, u, z);
    tu_mlp_forward(cfg, field->params, z, &acts);
    cfg->field(x, u, value);
    for (i = 0; i < cfg->n; ++i) {
        value[i] += field->out_scale[i] * acts.out[i];
    }
}

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
    float z[TU_CH_MAX], value[TU_N_MAX], lie[TU_N_MAX], r1[TU_N_MAX], r2[TU_N_MAX], ubar[TU_N_MAX], obar[TU_N_MAX];
    /* J_x (row stride TU_N_MAX) and J_u (row-major n x nu) of f_known (one spare: C99 has no empty array) */
    float jac[TU_N_MAX][TU_N_MAX], ju[TU_N_MAX * TU_NU_MAX + 1];
    int i, j;
    tu_net_input(n, nu, field, x, u, z);
    tu_mlp_forward(cfg, field->params, z, &acts);
    if (second || report_r2) {
        cfg->jacobians(x, u, value, &jac[0][0], ju); /* f_known and its Jacobians share their terms */
    } else {
        cfg->field(x, u, value);
    }
    for (i = 0; i < n; ++i) {
        value[i] += field->out_scale[i] * acts.out[i];
        r1[i] = (xdot[i] - value[i]) / loss->s1[i];
        *sq1 += r1[i] * r1[i];
        ubar[i] = (-2.0f * loss->lambda1 / fb) * (r1[i] / loss->s1[i]);
    }
    if (second || report_r2) {
        /* G = J_x F F + J_u F udot (Eq. 11): the known Jacobians and the MLP's tangent along
         * v = [F / in_scale, udot / input scale] */
        float v[TU_CH_MAX];
        tu_net_input(n, nu, field, value, udot, v);
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
        float w[TU_N_MAX], ow[TU_N_MAX], back[TU_CH_MAX], tbar[TU_N_MAX];
        for (i = 0; i < n; ++i) {
            w[i] = (-2.0f / fb) * (r2[i] / loss->s2[i]);
            ow[i] = field->out_scale[i] * w[i];
        }
        tu_mlp_vjp_input(cfg, field->params, &acts, ow, back);
        for (j = 0; j < n; ++j) {
            float jtw = 0.0f;  /* (J_x,known^T w)_j + (J_x,N^T w)_j: the inputs are data, no cotangent */
            for (i = 0; i < n; ++i) {
                jtw += jac[i][j] * w[i];
            }
            jtw += back[j] / field->in_scale[j];
            ubar[j] += loss->lambda2 * jtw;
        }
        for (i = 0; i < n; ++i) {
            obar[i] = field->out_scale[i] * ubar[i];
            tbar[i] = field->out_scale[i] * (loss->lambda2 * w[i]);
        }
        tu_mlp_backward(cfg, field->params, &acts, obar, &tan, tbar, grad);
    } else {
        for (i = 0; i < n; ++i) {
            obar[i] = field->out_scale[i] * ubar[i];
        }
        tu_mlp_backward(cfg, field->params, &acts, obar, NULL, NULL, grad);
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

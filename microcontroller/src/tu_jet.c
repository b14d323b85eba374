/* Jet-matching gradient by a VJP and reverse mode over a JVP (Eq. 14-16), float32. */
#include "tu_fp.h" /* first: no fused multiply-add in the library */

#include <stddef.h>

#include "tu_jet.h"
#include "tu_mlp.h"

/* The network's input z = [x / in_scale, u / input scale] (TU_CH columns). */
static void tu_net_input(const tu_field *field, const float x[TU_N], const float *u, float z[TU_CH])
{
    int i;
    for (i = 0; i < TU_N; ++i) {
        z[i] = x[i] / field->in_scale[i];
    }
    for (i = 0; i < TU_NU; ++i) {
        z[TU_N + i] = u[i] / field->in_scale[TU_N + i];
    }
}

void tu_field_eval(const tu_field *field, const float x[TU_N], const float *u, float value[TU_N])
{
    tu_mlp_acts acts;
    float z[TU_CH];
    int i;
    tu_net_input(field, x, u, z);
    tu_mlp_forward(field->params, z, &acts);
    tu_plant_field(x, u, value);
    for (i = 0; i < TU_N; ++i) {
        value[i] += field->out_scale[i] * acts.out[i];
    }
}

void tu_jet_accumulate(const tu_field *field, const tu_jet_loss *loss, int batch, const float x[TU_N],
                       const float xdot[TU_N], const float xddot[TU_N], const float *u, const float *udot,
                       int report_r2, float *grad, float *sq1, float *sq2)
{
    const int second = loss->lambda2 > 0.0f;
    const float fb = (float)batch;
    tu_mlp_acts acts;
    tu_mlp_tangents tan;
    float z[TU_CH], value[TU_N], lie[TU_N], r1[TU_N], r2[TU_N], ubar[TU_N], obar[TU_N];
    float jac[TU_N][TU_N], ju[TU_N * TU_NU + 1];  /* J_u of f_known, row-major (one spare: C99 has no empty array) */
    int i, j;
    tu_net_input(field, x, u, z);
    tu_mlp_forward(field->params, z, &acts);
    if (second || report_r2) {
        tu_plant_jacobians(x, u, value, jac, ju); /* f_known and its Jacobians share their terms */
    } else {
        tu_plant_field(x, u, value);
    }
    for (i = 0; i < TU_N; ++i) {
        value[i] += field->out_scale[i] * acts.out[i];
        r1[i] = (xdot[i] - value[i]) / loss->s1[i];
        *sq1 += r1[i] * r1[i];
        ubar[i] = (-2.0f * loss->lambda1 / fb) * (r1[i] / loss->s1[i]);
    }
    if (second || report_r2) {
        /* G = J_x F F + J_u F udot (Eq. 11): the known Jacobians and the MLP's tangent along
         * v = [F / in_scale, udot / input scale] */
        float v[TU_CH];
        tu_net_input(field, value, udot, v);
        tu_mlp_jvp(field->params, &acts, v, &tan);
        for (i = 0; i < TU_N; ++i) {
            float g = 0.0f;
            for (j = 0; j < TU_N; ++j) {
                g += jac[i][j] * value[j];
            }
            if (TU_NU > 0) {
                float gu = 0.0f;
                for (j = 0; j < TU_NU; ++j) {
                    gu += ju[i * TU_NU + j] * udot[j];
                }
                g += gu;
            }
            lie[i] = g + field->out_scale[i] * tan.out[i];
            r2[i] = (xddot[i] - lie[i]) / loss->s2[i];
            *sq2 += r2[i] * r2[i];
        }
    }
    if (second) {
        float w[TU_N], ow[TU_N], back[TU_CH], tbar[TU_N];
        for (i = 0; i < TU_N; ++i) {
            w[i] = (-2.0f / fb) * (r2[i] / loss->s2[i]);
            ow[i] = field->out_scale[i] * w[i];
        }
        tu_mlp_vjp_input(field->params, &acts, ow, back);
        for (j = 0; j < TU_N; ++j) {
            float jtw = 0.0f;  /* (J_x,known^T w)_j + (J_x,N^T w)_j: the inputs are data, no cotangent */
            for (i = 0; i < TU_N; ++i) {
                jtw += jac[i][j] * w[i];
            }
            jtw += back[j] / field->in_scale[j];
            ubar[j] += loss->lambda2 * jtw;
        }
        for (i = 0; i < TU_N; ++i) {
            obar[i] = field->out_scale[i] * ubar[i];
            tbar[i] = field->out_scale[i] * (loss->lambda2 * w[i]);
        }
        tu_mlp_backward(field->params, &acts, obar, &tan, tbar, grad);
    } else {
        for (i = 0; i < TU_N; ++i) {
            obar[i] = field->out_scale[i] * ubar[i];
        }
        tu_mlp_backward(field->params, &acts, obar, NULL, NULL, grad);
    }
}

/* Jet-matching gradient by a VJP and reverse mode over a JVP (Eq. 14-16), float32. */
#include <stddef.h>

#include "tu_jet.h"
#include "tu_mlp.h"

void tu_field_eval(const tu_field *field, const float x[TU_N], float value[TU_N])
{
    tu_mlp_acts acts;
    float z[TU_N];
    int i;
    for (i = 0; i < TU_N; ++i) {
        z[i] = x[i] / field->in_scale[i];
    }
    tu_mlp_forward(field->params, z, &acts);
    tu_plant_field(x, NULL, value);
    for (i = 0; i < TU_N; ++i) {
        value[i] += field->out_scale[i] * acts.out[i];
    }
}

void tu_jet_accumulate(const tu_field *field, const tu_jet_loss *loss, int batch, const float x[TU_N],
                       const float xdot[TU_N], const float xddot[TU_N], int report_r2, float *grad,
                       float *sq1, float *sq2)
{
    const int second = loss->lambda2 > 0.0f;
    const float fb = (float)batch;
    tu_mlp_acts acts;
    tu_mlp_tangents tan;
    float z[TU_N], value[TU_N], lie[TU_N], r1[TU_N], r2[TU_N], ubar[TU_N], obar[TU_N];
    float jac[TU_N][TU_N];
    int i, j;
    for (i = 0; i < TU_N; ++i) {
        z[i] = x[i] / field->in_scale[i];
    }
    tu_mlp_forward(field->params, z, &acts);
    if (second || report_r2) {
        tu_plant_jacobians(x, NULL, value, jac, NULL); /* f_known and J_known share their terms */
    } else {
        tu_plant_field(x, NULL, value);
    }
    for (i = 0; i < TU_N; ++i) {
        value[i] += field->out_scale[i] * acts.out[i];
        r1[i] = (xdot[i] - value[i]) / loss->s1[i];
        *sq1 += r1[i] * r1[i];
        ubar[i] = (-2.0f * loss->lambda1 / fb) * (r1[i] / loss->s1[i]);
    }
    if (second || report_r2) {
        /* G = J_F F (Eq. 11): the known Jacobian and the MLP's tangent along v = F / in_scale */
        float v[TU_N];
        for (i = 0; i < TU_N; ++i) {
            v[i] = value[i] / field->in_scale[i];
        }
        tu_mlp_jvp(field->params, &acts, v, &tan);
        for (i = 0; i < TU_N; ++i) {
            float g = 0.0f;
            for (j = 0; j < TU_N; ++j) {
                g += jac[i][j] * value[j];
            }
            lie[i] = g + field->out_scale[i] * tan.out[i];
            r2[i] = (xddot[i] - lie[i]) / loss->s2[i];
            *sq2 += r2[i] * r2[i];
        }
    }
    if (second) {
        float w[TU_N], ow[TU_N], back[TU_N], tbar[TU_N];
        for (i = 0; i < TU_N; ++i) {
            w[i] = (-2.0f / fb) * (r2[i] / loss->s2[i]);
            ow[i] = field->out_scale[i] * w[i];
        }
        tu_mlp_vjp_input(field->params, &acts, ow, back);
        for (j = 0; j < TU_N; ++j) {
            float jtw = 0.0f;  /* (J_known^T w)_j + (J_N^T w)_j */
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

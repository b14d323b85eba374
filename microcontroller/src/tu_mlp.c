/* Hand-written derivatives of the tanh MLP, one sample, float32 (mirrors torch_ude/mlp.py). */
#include <math.h>
#include <string.h>

#include "tu_mlp.h"

#define TU_L TU_NUM_LAYERS

static const int tu_sizes[TU_L + 1] = TU_LAYER_SIZES;

/* Offset of W_l (layer l = 0..L-1) in the flat parameter array; b_l follows it. */
static int tu_offset(int l)
{
    int off = 0, k;
    for (k = 0; k < l; ++k) {
        off += tu_sizes[k + 1] * (tu_sizes[k] + 1);
    }
    return off;
}

int tu_mlp_tensor_count(void)
{
    return 2 * TU_L;
}

int tu_mlp_tensor_size(int k)
{
    const int l = k / 2;
    if (k < 0 || k >= 2 * TU_L) {
        return 0;
    }
    return k % 2 == 0 ? tu_sizes[l + 1] * tu_sizes[l] : tu_sizes[l + 1];
}

void tu_mlp_forward(const float *params, const float z[TU_N], tu_mlp_acts *acts)
{
    const float *prev = acts->z;
    int l, i, j;
    memcpy(acts->z, z, sizeof acts->z);
    for (l = 0; l < TU_L; ++l) {
        const int din = tu_sizes[l], dout = tu_sizes[l + 1];
        const float *w = params + tu_offset(l);
        const float *b = w + dout * din;
        float *out = l < TU_L - 1 ? acts->hidden[l] : acts->out;
        for (j = 0; j < dout; ++j) {
            float a = 0.0f;
            for (i = 0; i < din; ++i) {
                a += w[j * din + i] * prev[i];
            }
            a += b[j];
            out[j] = l < TU_L - 1 ? tanhf(a) : a;
        }
        prev = out;
    }
}

void tu_mlp_jvp(const float *params, const tu_mlp_acts *acts, const float zdot[TU_N], tu_mlp_tangents *tan)
{
    const float *hdot = tan->zdot;
    int l, i, j;
    memcpy(tan->zdot, zdot, sizeof tan->zdot);
    for (l = 0; l < TU_L; ++l) {
        const int din = tu_sizes[l], dout = tu_sizes[l + 1];
        const float *w = params + tu_offset(l);
        for (j = 0; j < dout; ++j) {
            float a = 0.0f;
            for (i = 0; i < din; ++i) {
                a += w[j * din + i] * hdot[i];
            }
            if (l < TU_L - 1) {
                const float h = acts->hidden[l][j];
                tan->pre[l][j] = a;
                tan->hidden[l][j] = (1.0f - h * h) * a;
            } else {
                tan->out[j] = a;
            }
        }
        if (l < TU_L - 1) {
            hdot = tan->hidden[l];
        }
    }
}

void tu_mlp_vjp_input(const float *params, const tu_mlp_acts *acts, const float obar[TU_N], float zbar[TU_N])
{
    float g[TU_WIDTH_MAX], next[TU_WIDTH_MAX];
    int l, i, j;
    memcpy(g, obar, TU_N * sizeof(float));
    for (l = TU_L - 1; l >= 0; --l) {
        const int din = tu_sizes[l], dout = tu_sizes[l + 1];
        const float *w = params + tu_offset(l);
        for (i = 0; i < din; ++i) {
            float s = 0.0f;
            for (j = 0; j < dout; ++j) {
                s += g[j] * w[j * din + i];
            }
            if (l > 0) {
                const float h = acts->hidden[l - 1][i];
                s *= 1.0f - h * h;
            }
            next[i] = s;
        }
        memcpy(g, next, (size_t)din * sizeof(float));
    }
    memcpy(zbar, g, TU_N * sizeof(float));
}

void tu_mlp_backward(const float *params, const tu_mlp_acts *acts, const float obar[TU_N],
                     const tu_mlp_tangents *tan, const float *tbar, float *grad)
{
    const int with_tangent = tan != NULL && tbar != NULL;
    float abar[TU_WIDTH_MAX], tabar[TU_WIDTH_MAX], hbar[TU_WIDTH_MAX], thbar[TU_WIDTH_MAX];
    int l, i, j;
    memcpy(abar, obar, TU_N * sizeof(float));
    if (with_tangent) {
        memcpy(tabar, tbar, TU_N * sizeof(float));
    }
    for (l = TU_L - 1; l >= 0; --l) {
        const int din = tu_sizes[l], dout = tu_sizes[l + 1];
        const float *w = params + tu_offset(l);
        float *gw = grad + tu_offset(l);
        float *gb = gw + dout * din;
        const float *h_prev = l > 0 ? acts->hidden[l - 1] : acts->z;
        const float *hdot_prev = with_tangent ? (l > 0 ? tan->hidden[l - 1] : tan->zdot) : NULL;
        for (j = 0; j < dout; ++j) {
            gb[j] += abar[j];
            for (i = 0; i < din; ++i) {
                float d = abar[j] * h_prev[i];
                if (with_tangent) {
                    d += tabar[j] * hdot_prev[i];
                }
                gw[j * din + i] += d;
            }
        }
        if (l == 0) {
            break;
        }
        for (i = 0; i < din; ++i) {
            float s = 0.0f, t = 0.0f;
            for (j = 0; j < dout; ++j) {
                s += abar[j] * w[j * din + i];
                if (with_tangent) {
                    t += tabar[j] * w[j * din + i];
                }
            }
            thbar[i] = t;
            hbar[i] = with_tangent ? s - 2.0f * h_prev[i] * t * tan->pre[l - 1][i] : s;
        }
        for (i = 0; i < din; ++i) {
            const float deriv = 1.0f - h_prev[i] * h_prev[i];
            abar[i] = hbar[i] * deriv;
            if (with_tangent) {
                tabar[i] = thbar[i] * deriv;
            }
        }
    }
}

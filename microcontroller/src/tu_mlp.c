/* Hand-written derivatives of the tanh MLP, one sample, float32 (mirrors torch_ude/mlp.py).
 * Weight rows are read contiguously; every sum runs over its terms in the same order as the
 * reference (transposed products accumulate row by row, which keeps each sum's order). */
#include "tu_fp.h" /* first: no fused multiply-add in the library */

#include <math.h>
#include <string.h>

#include "tu_math.h"
#include "tu_mlp.h"

#define TU_L TU_NUM_LAYERS

static const int tu_sizes[TU_L + 1] = TU_LAYER_SIZES;

/* L of the linear term, (TU_N, TU_CH) row-major, is the last tensor of the flat array. */
#define TU_LINEAR_OFFSET (TU_NUM_PARAMS - TU_N * TU_CH)

/* The inputs layer l reads: TU_MLP_READS for the first, the previous width after it. */
static int tu_din(int l)
{
    return l == 0 ? TU_MLP_READS : tu_sizes[l];
}

/* offsets[l]: where W_l starts in the flat parameter array (b_l follows it). */
static void tu_offsets(int offsets[TU_L])
{
    int l, off = 0;
    for (l = 0; l < TU_L; ++l) {
        offsets[l] = off;
        off += tu_sizes[l + 1] * (tu_din(l) + 1);
    }
}

int tu_mlp_tensor_count(void)
{
    return TU_MLP_TENSORS;
}

int tu_mlp_tensor_size(int k)
{
    const int l = k / 2;
    if (k < 0 || k >= TU_MLP_TENSORS) {
        return 0;
    }
    if (k == 2 * TU_L) {
        return TU_N * TU_CH;
    }
    return k % 2 == 0 ? tu_sizes[l + 1] * tu_din(l) : tu_sizes[l + 1];
}

/* out += L v for the linear term (TU_LINEAR): each row's sum over the TU_CH inputs in order, then
 * added, as torch.addmm(out, v, L^T) does. */
static void tu_linear_add(const float *params, const float v[TU_CH], float out[TU_N])
{
    const float *lw = params + TU_LINEAR_OFFSET;
    int i, j;
    for (j = 0; j < TU_N; ++j) {
        float s = 0.0f;
        for (i = 0; i < TU_CH; ++i) {
            s += lw[j * TU_CH + i] * v[i];
        }
        out[j] += s;
    }
}

/* a = W x + b for one layer, four rows at a time (each x[i] loaded once for all four); each
 * sum runs over i in order, then adds the bias, as the reference does. */
static void tu_affine(const float *w, const float *b, const float *x, int din, int dout, float *a)
{
    int i, j = 0;
    for (; j + 3 < dout; j += 4) {
        const float *r0 = w + j * din, *r1 = r0 + din, *r2 = r1 + din, *r3 = r2 + din;
        float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
        for (i = 0; i < din; ++i) {
            const float xi = x[i];
            a0 += r0[i] * xi;
            a1 += r1[i] * xi;
            a2 += r2[i] * xi;
            a3 += r3[i] * xi;
        }
        a[j] = a0 + b[j];
        a[j + 1] = a1 + b[j + 1];
        a[j + 2] = a2 + b[j + 2];
        a[j + 3] = a3 + b[j + 3];
    }
    for (; j < dout; ++j) {
        const float *r = w + j * din;
        float s = 0.0f;
        for (i = 0; i < din; ++i) {
            s += r[i] * x[i];
        }
        a[j] = s + b[j];
    }
}

void tu_mlp_forward(const float *params, const float z[TU_CH], tu_mlp_acts *acts)
{
    const float *prev = acts->z, *w = params;
    int l, j;
    memcpy(acts->z, z, sizeof acts->z);
    for (l = 0; l < TU_L; ++l) {
        const int din = tu_din(l), dout = tu_sizes[l + 1];
        float *out = l < TU_L - 1 ? acts->hidden[l] : acts->out;
        tu_affine(w, w + dout * din, prev, din, dout, out);
        if (l < TU_L - 1) {
            for (j = 0; j < dout; ++j) {
                out[j] = tu_tanhf(out[j]);
            }
        }
        prev = out;
        w += dout * (din + 1);
    }
    if (TU_LINEAR) {
        tu_linear_add(params, acts->z, acts->out);
    }
}

void tu_mlp_jvp(const float *params, const tu_mlp_acts *acts, const float zdot[TU_CH], tu_mlp_tangents *tan)
{
    const float *hdot = tan->zdot, *w = params;
    int l, i, j;
    memcpy(tan->zdot, zdot, sizeof tan->zdot);
    for (l = 0; l < TU_L; ++l) {
        const int din = tu_din(l), dout = tu_sizes[l + 1];
        for (j = 0; j < dout; ++j) {
            const float *row = w + j * din;
            float a = 0.0f;
            for (i = 0; i < din; ++i) {
                a += row[i] * hdot[i];
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
        w += dout * (din + 1);
    }
    if (TU_LINEAR) {
        tu_linear_add(params, tan->zdot, tan->out);
    }
}

void tu_mlp_vjp_input(const float *params, const tu_mlp_acts *acts, const float obar[TU_N], float zbar[TU_CH])
{
    float g[TU_WIDTH_MAX], next[TU_WIDTH_MAX];
    int offsets[TU_L], l, i, j;
    tu_offsets(offsets);
    memcpy(g, obar, TU_N * sizeof(float));
    for (l = TU_L - 1; l >= 0; --l) {
        const int din = tu_din(l), dout = tu_sizes[l + 1];
        const float *w = params + offsets[l];
        memset(next, 0, (size_t)din * sizeof(float));
        for (j = 0; j < dout; ++j) {
            const float *row = w + j * din;
            for (i = 0; i < din; ++i) {
                next[i] += g[j] * row[i];
            }
        }
        for (i = 0; i < din; ++i) {
            if (l > 0) {
                const float h = acts->hidden[l - 1][i];
                next[i] *= 1.0f - h * h;
            }
            g[i] = next[i];
        }
    }
    if (!TU_LINEAR) {
        memcpy(zbar, g, TU_CH * sizeof(float));
        return;
    }
    for (i = 0; i < TU_CH; ++i) { /* (L^T obar)_i, a sum over the outputs in order, plus the tanh path's */
        const float *lw = params + TU_LINEAR_OFFSET;
        float s = 0.0f;
        for (j = 0; j < TU_N; ++j) {
            s += obar[j] * lw[j * TU_CH + i];
        }
        zbar[i] = i < TU_MLP_READS ? s + g[i] : s;
    }
}

/* gw += abar h^T and (when hbar is not NULL) hbar = W^T abar for one layer, four columns at a
 * time (each abar[j] loaded once for all four); each sum runs over j in order. */
static void tu_outer_and_transpose(const float *w, const float *abar, const float *h, int din, int dout, float *gw,
                                   float *hbar)
{
    int i = 0, j;
    for (; i + 3 < din; i += 4) {
        const float h0 = h[i], h1 = h[i + 1], h2 = h[i + 2], h3 = h[i + 3];
        float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
        for (j = 0; j < dout; ++j) {
            const float a = abar[j];
            float *g = gw + j * din + i;
            const float *r = w + j * din + i;
            g[0] += a * h0;
            g[1] += a * h1;
            g[2] += a * h2;
            g[3] += a * h3;
            s0 += a * r[0];
            s1 += a * r[1];
            s2 += a * r[2];
            s3 += a * r[3];
        }
        if (hbar != NULL) {
            hbar[i] = s0;
            hbar[i + 1] = s1;
            hbar[i + 2] = s2;
            hbar[i + 3] = s3;
        }
    }
    for (; i < din; ++i) {
        float s0 = 0.0f;
        if (hbar == NULL) { /* the first layer: no cotangent of the input is needed */
            for (j = 0; j < dout; ++j) {
                gw[j * din + i] += abar[j] * h[i];
            }
            continue;
        }
        for (j = 0; j < dout; ++j) {
            gw[j * din + i] += abar[j] * h[i];
            s0 += abar[j] * w[j * din + i];
        }
        hbar[i] = s0;
    }
}

void tu_mlp_backward(const float *params, const tu_mlp_acts *acts, const float obar[TU_N],
                     const tu_mlp_tangents *tan, const float *tbar, float *grad)
{
    const int with_tangent = tan != NULL && tbar != NULL;
    float abar[TU_WIDTH_MAX], tabar[TU_WIDTH_MAX], hbar[TU_WIDTH_MAX], thbar[TU_WIDTH_MAX];
    int offsets[TU_L], l, i, j;
    tu_offsets(offsets);
    memcpy(abar, obar, TU_N * sizeof(float));
    if (with_tangent) {
        memcpy(tabar, tbar, TU_N * sizeof(float));
    }
    if (TU_LINEAR) { /* dL += obar z^T (+ tbar zdot^T) */
        float *gl = grad + TU_LINEAR_OFFSET;
        for (j = 0; j < TU_N; ++j) {
            for (i = 0; i < TU_CH; ++i) {
                gl[j * TU_CH + i] += with_tangent ? obar[j] * acts->z[i] + tbar[j] * tan->zdot[i]
                                                  : obar[j] * acts->z[i];
            }
        }
    }
    for (l = TU_L - 1; l >= 0; --l) {
        const int din = tu_din(l), dout = tu_sizes[l + 1];
        const float *w = params + offsets[l];
        float *gw = grad + offsets[l];
        float *gb = gw + dout * din;
        const float *h_prev = l > 0 ? acts->hidden[l - 1] : acts->z;
        const float *hdot_prev = with_tangent ? (l > 0 ? tan->hidden[l - 1] : tan->zdot) : NULL;
        for (j = 0; j < dout; ++j) {
            gb[j] += abar[j];
        }
        if (with_tangent) {
            /* column i of W_l: its gradient and the cotangents of h_prev[i], hdot_prev[i];
             * each sum runs over j in order */
            for (i = 0; i < din; ++i) {
                const float h = h_prev[i], hd = hdot_prev[i];
                float s = 0.0f, t = 0.0f;
                for (j = 0; j < dout; ++j) {
                    gw[j * din + i] += abar[j] * h + tabar[j] * hd;
                    s += abar[j] * w[j * din + i];
                    t += tabar[j] * w[j * din + i];
                }
                hbar[i] = s;
                thbar[i] = t;
            }
        } else {
            tu_outer_and_transpose(w, abar, h_prev, din, dout, gw, l > 0 ? hbar : NULL);
        }
        if (l == 0) {
            break;
        }
        for (i = 0; i < din; ++i) {
            const float deriv = 1.0f - h_prev[i] * h_prev[i];
            if (with_tangent) {
                hbar[i] -= 2.0f * h_prev[i] * thbar[i] * tan->pre[l - 1][i];
                tabar[i] = thbar[i] * deriv;
            }
            abar[i] = hbar[i] * deriv;
        }
    }
}

/* Hand-written derivatives of the tanh MLP, one sample, float32 (mirrors torch_ude/mlp.py).
 * Weight rows are read contiguously; every sum runs over its terms in the same order as the
 * reference (transposed products accumulate row by row, which keeps each sum's order). */
#define TU_LIBRARY 1 /* the library reads its configuration from a tu_config, no single-configuration macro */
#include "tu_fp.h" /* first: no fused multiply-add in the library */

#include <math.h>
#include <string.h>

#include "tu_math.h"
#include "tu_mlp.h"

/* dst[0 .. count) = src[0 .. count): a few floats, copied in line (a memcpy of a size known only at run
 * time is a library call) */
static void tu_copy(float *dst, const float *src, int count)
{
    int i;
    for (i = 0; i < count; ++i) {
        dst[i] = src[i];
    }
}

/* The inputs layer l reads: mlp_reads for the first, the previous width after it. Written so that
 * for a configuration whose tanh layers read every input the choice folds to layer_sizes[l] when the
 * configuration is a constant (TU_MLP_COMMON): `l == 0 ? mlp_reads : layer_sizes[l]` kept the
 * select: 461,920 against 455,080 instructions per update on the single pendulum (M4F, QEMU -icount). */
static int tu_din(const tu_config *cfg, int l)
{
    return l == 0 && cfg->mlp_reads != cfg->layer_sizes[0] ? cfg->mlp_reads : cfg->layer_sizes[l];
}

/* offsets[l]: where W_l starts in the flat parameter array (b_l follows it). */
static void tu_offsets(const tu_config *cfg, int offsets[TU_NUM_LAYERS_MAX])
{
    int l, off = 0;
    for (l = 0; l < cfg->num_layers; ++l) {
        offsets[l] = off;
        off += cfg->layer_sizes[l + 1] * (tu_din(cfg, l) + 1);
    }
}

/* L of the linear term, (n, ch) row-major, is the last tensor of the flat array. Here and below ch is the
 * network's input width layer_sizes[0]: the stream's channels n + nu, or the input map's columns (tu_model.h). */
static const float *tu_linear_weights(const tu_config *cfg, const float *params)
{
    return params + (cfg->num_params - cfg->n * cfg->layer_sizes[0]);
}

int tu_mlp_tensor_count(const tu_config *cfg)
{
    return 2 * cfg->num_layers + (cfg->linear != 0);
}

int tu_mlp_tensor_size(const tu_config *cfg, int k)
{
    const int l = k / 2;
    if (k < 0 || k >= tu_mlp_tensor_count(cfg)) {
        return 0;
    }
    if (k == 2 * cfg->num_layers) {
        return cfg->n * cfg->layer_sizes[0];
    }
    return k % 2 == 0 ? cfg->layer_sizes[l + 1] * tu_din(cfg, l) : cfg->layer_sizes[l + 1];
}

/* out += L v for the linear term: each row's sum over the ch inputs in order, then added, as
 * torch.addmm(out, v, L^T) does. */
static void tu_linear_add(const tu_config *cfg, const float *params, const float *v, float *out)
{
    const float *lw = tu_linear_weights(cfg, params);
    const int n = cfg->n, ch = cfg->layer_sizes[0];
    int i, j;
    for (j = 0; j < n; ++j) {
        float s = 0.0f;
        for (i = 0; i < ch; ++i) {
            s += lw[j * ch + i] * v[i];
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

TU_KERNEL void tu_forward(const tu_config *cfg, const float *params, const float *z, tu_mlp_acts *acts)
{
    const int layers = cfg->num_layers;
    const float *prev = acts->z, *w = params;
    int l, j;
    tu_copy(acts->z, z, cfg->layer_sizes[0]);
    for (l = 0; l < layers; ++l) {
        const int din = tu_din(cfg, l), dout = cfg->layer_sizes[l + 1];
        float *out = l < layers - 1 ? acts->hidden[l] : acts->out;
        tu_affine(w, w + dout * din, prev, din, dout, out);
        if (l < layers - 1) {
            for (j = 0; j < dout; ++j) {
                out[j] = tu_tanhf(out[j]);
            }
        }
        prev = out;
        w += dout * (din + 1);
    }
    if (cfg->linear) {
        tu_linear_add(cfg, params, acts->z, acts->out);
    }
}

TU_KERNEL void tu_jvp(const tu_config *cfg, const float *params, const tu_mlp_acts *acts, const float *zdot,
                      tu_mlp_tangents *tan)
{
    const int layers = cfg->num_layers;
    const float *hdot = tan->zdot, *w = params;
    int l, i, j;
    tu_copy(tan->zdot, zdot, cfg->layer_sizes[0]);
    for (l = 0; l < layers; ++l) {
        const int din = tu_din(cfg, l), dout = cfg->layer_sizes[l + 1];
        for (j = 0; j < dout; ++j) {
            const float *row = w + j * din;
            float a = 0.0f;
            for (i = 0; i < din; ++i) {
                a += row[i] * hdot[i];
            }
            if (l < layers - 1) {
                const float h = acts->hidden[l][j];
                tan->pre[l][j] = a;
                tan->hidden[l][j] = (1.0f - h * h) * a;
            } else {
                tan->out[j] = a;
            }
        }
        if (l < layers - 1) {
            hdot = tan->hidden[l];
        }
        w += dout * (din + 1);
    }
    if (cfg->linear) {
        tu_linear_add(cfg, params, tan->zdot, tan->out);
    }
}

TU_KERNEL void tu_vjp_input(const tu_config *cfg, const float *params, const tu_mlp_acts *acts, const float *obar,
                            float *zbar)
{
    const int n = cfg->n, ch = cfg->layer_sizes[0];
    float g[TU_WIDTH_MAX], next[TU_WIDTH_MAX];
    int offsets[TU_NUM_LAYERS_MAX], l, i, j;
    tu_offsets(cfg, offsets);
    tu_copy(g, obar, n);
    for (l = cfg->num_layers - 1; l >= 0; --l) {
        const int din = tu_din(cfg, l), dout = cfg->layer_sizes[l + 1];
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
    if (!cfg->linear) {
        tu_copy(zbar, g, ch);
        return;
    }
    for (i = 0; i < ch; ++i) { /* (L^T obar)_i, a sum over the outputs in order, plus the tanh path's */
        const float *lw = tu_linear_weights(cfg, params);
        float s = 0.0f;
        for (j = 0; j < n; ++j) {
            s += obar[j] * lw[j * ch + i];
        }
        zbar[i] = i < cfg->mlp_reads ? s + g[i] : s;
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

TU_KERNEL void tu_backward(const tu_config *cfg, const float *params, const tu_mlp_acts *acts, const float *obar,
                           const tu_mlp_tangents *tan, const float *tbar, float *grad)
{
    const int with_tangent = tan != NULL && tbar != NULL;
    const int n = cfg->n, ch = cfg->layer_sizes[0];
    float abar[TU_WIDTH_MAX], tabar[TU_WIDTH_MAX], hbar[TU_WIDTH_MAX], thbar[TU_WIDTH_MAX];
    int offsets[TU_NUM_LAYERS_MAX], l, i, j;
    tu_offsets(cfg, offsets);
    tu_copy(abar, obar, n);
    if (with_tangent) {
        tu_copy(tabar, tbar, n);
    }
    if (cfg->linear) { /* dL += obar z^T (+ tbar zdot^T) */
        float *gl = grad + (cfg->num_params - n * ch);
        for (j = 0; j < n; ++j) {
            for (i = 0; i < ch; ++i) {
                gl[j * ch + i] += with_tangent ? obar[j] * acts->z[i] + tbar[j] * tan->zdot[i]
                                                  : obar[j] * acts->z[i];
            }
        }
    }
    for (l = cfg->num_layers - 1; l >= 0; --l) {
        const int din = tu_din(cfg, l), dout = cfg->layer_sizes[l + 1];
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

#if TU_MLP_COMMON
/* Every configuration of the build has this network (tu_config_check refuses another): the kernels
 * see its shape as constants, as a single-configuration build always did. */
static const tu_config tu_common = {
    .n = TU_MLP_COMMON_N, .ch = TU_MLP_COMMON_CH, .num_layers = TU_MLP_COMMON_LAYERS,
    .layer_sizes = TU_MLP_COMMON_SIZES, .num_params = TU_MLP_COMMON_PARAMS, .linear = TU_MLP_COMMON_LINEAR,
    .mlp_reads = TU_MLP_COMMON_READS,
};
#define TU_SHAPE(cfg) ((void)(cfg), &tu_common)
#else
#define TU_SHAPE(cfg) (cfg)
#endif

void tu_mlp_forward(const tu_config *cfg, const float *params, const float *z, tu_mlp_acts *acts)
{
    tu_forward(TU_SHAPE(cfg), params, z, acts);
}

void tu_mlp_jvp(const tu_config *cfg, const float *params, const tu_mlp_acts *acts, const float *zdot,
                tu_mlp_tangents *tan)
{
    tu_jvp(TU_SHAPE(cfg), params, acts, zdot, tan);
}

void tu_mlp_vjp_input(const tu_config *cfg, const float *params, const tu_mlp_acts *acts, const float *obar,
                      float *zbar)
{
    tu_vjp_input(TU_SHAPE(cfg), params, acts, obar, zbar);
}

void tu_mlp_backward(const tu_config *cfg, const float *params, const tu_mlp_acts *acts, const float *obar,
                     const tu_mlp_tangents *tan, const float *tbar, float *grad)
{
    tu_backward(TU_SHAPE(cfg), params, acts, obar, tan, tbar, grad);
}

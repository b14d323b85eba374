/* Clipping, AdamW, cosine schedule and EMA (torch's formulas, float32). */
#define TU_LIBRARY 1 /* the library reads its configuration from a tu_config, no single-configuration macro */
#include "tu_fp.h" /* first: no fused multiply-add in the library */

#include <math.h>

#include "tu_optim.h"

/* beta1 = 0.9, beta2 = 0.999; their complements are written out, as torch computes 1 - beta in
 * double before rounding to float */
#define TU_BETA1 0.9f
#define TU_BETA2 0.999f
#define TU_ONE_MINUS_BETA1 0.1f
#define TU_ONE_MINUS_BETA2 0.001f
#define TU_EPS 1e-8f
#define TU_PI 3.14159265358979323846f

float tu_clip_grad_norm(float *grad, const int *tensor_sizes, int n_tensors, float max_norm)
{
    float total_sq = 0.0f, total, coef;
    int k, i, off = 0, n;
    for (k = 0; k < n_tensors; ++k) {
        float sq = 0.0f, norm;
        for (i = 0; i < tensor_sizes[k]; ++i) {
            sq += grad[off + i] * grad[off + i];
        }
        norm = sqrtf(sq);
        total_sq += norm * norm;
        off += tensor_sizes[k];
    }
    n = off;
    total = sqrtf(total_sq);
    coef = max_norm / (total + 1e-6f);
    if (coef < 1.0f) {
        for (i = 0; i < n; ++i) {
            grad[i] *= coef;
        }
    }
    return total;
}

void tu_adamw_step(tu_adam *adam, float *params, const float *grad, float lr, float weight_decay)
{
    int i;
    float bias1, bias2_sqrt, step_size;
    adam->step += 1;
    /* 1 - beta^t as -expm1(t log(1 - (1 - beta))): accurate in float where 1 - powf() cancels */
    bias1 = -expm1f((float)adam->step * log1pf(-TU_ONE_MINUS_BETA1));
    bias2_sqrt = sqrtf(-expm1f((float)adam->step * log1pf(-TU_ONE_MINUS_BETA2)));
    step_size = lr / bias1;
    for (i = 0; i < adam->n; ++i) {
        const float g = grad[i];
        float denom;
        if (weight_decay > 0.0f) {
            params[i] *= 1.0f - lr * weight_decay;
        }
        adam->exp_avg[i] += TU_ONE_MINUS_BETA1 * (g - adam->exp_avg[i]);
        adam->exp_avg_sq[i] = adam->exp_avg_sq[i] * TU_BETA2 + TU_ONE_MINUS_BETA2 * g * g;
        denom = sqrtf(adam->exp_avg_sq[i]) / bias2_sqrt + TU_EPS;
        params[i] -= step_size * (adam->exp_avg[i] / denom);
    }
}

float tu_cosine_lr(int64_t step, int64_t total, float lr0, float lr_min)
{
    if (total < 1) {
        return lr0;
    }
    if (step >= total) {
        return lr_min;
    }
    return lr_min + (lr0 - lr_min) * 0.5f * (1.0f + cosf(TU_PI * (float)step / (float)total));
}

void tu_ema_update(float *ema, const float *params, int n, float weight, int first)
{
    int i;
    for (i = 0; i < n; ++i) {
        ema[i] = first ? params[i] : ema[i] + weight * (params[i] - ema[i]);
    }
}

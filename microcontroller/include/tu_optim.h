/* Optimizer pieces of Algorithm 1, float32, with torch's formulas so the two trainers agree:
 * gradient-norm clipping (torch.nn.utils.clip_grad_norm_), Adam / AdamW with decoupled
 * weight decay (torch.optim.AdamW), the cosine schedule (CosineAnnealingLR) and the weight
 * EMA (torch.optim.swa_utils.get_ema_multi_avg_fn). */
#ifndef TU_OPTIM_H
#define TU_OPTIM_H

#include <stdint.h>

/** Adam state of n parameters (the moment arrays are owned by the caller). */
typedef struct {
    float *exp_avg;     /**< first moments, n floats */
    float *exp_avg_sq;  /**< second moments, n floats */
    int n;              /**< number of parameters */
    int64_t step;       /**< steps taken (the bias corrections use step + 1 next); 64-bit: never wraps */
} tu_adam;

/** Clip grad (the concatenation of the tensors of the given sizes) to norm max_norm:
 * total = || (||g_k||)_k ||, scaled by min(1, max_norm / (total + 1e-6)). Returns total
 * (non-finite if any gradient entry is). */
float tu_clip_grad_norm(float *grad, const int *tensor_sizes, int n_tensors, float max_norm);

/** One AdamW step (beta1 0.9, beta2 0.999, eps 1e-8): p *= 1 - lr wd, then Adam. */
void tu_adamw_step(tu_adam *adam, float *params, const float *grad, float lr, float weight_decay);

/** Cosine annealing: lr_min + (lr0 - lr_min) (1 + cos(pi t / total)) / 2 for step t in [0, total],
 * and lr_min from t = total on (a device keeps training past the schedule at its last rate;
 * torch's CosineAnnealingLR would climb back, the Python trainer stops at total). */
float tu_cosine_lr(int64_t step, int64_t total, float lr0, float lr_min);

/** ema <- ema + weight (params - ema) with weight = 1 - decay, or a copy of params on the
 * first update. */
void tu_ema_update(float *ema, const float *params, int n, float weight, int first);

#endif /* TU_OPTIM_H */

/* Calibration (Algorithm 1, lines 3-4), float32; the reference is torch_ude/calibration.py. */
#define TU_LIBRARY 1 /* the library reads its configuration from a tu_config, no single-configuration macro */
#include "tu_fp.h" /* first: no fused multiply-add in the library */

#include <math.h>

#include "tu_calibration.h"
#include "tu_math.h"
#include "tu_savgol.h"
#include "tu_select.h"

#define TU_MAD_TO_SD 1.4826f
#define TU_MAX_ROUNDS 5
#define TU_SCALE_STRIDE 5  /* window stride of the scale estimates (calibrate's stride) */

static unsigned tu_key(const tu_cal_record *r, int k)
{
    return r->flags[k] & TU_FLAG_KEY;
}

/* Sample k holds a real (not bridged), finite value in channel c. */
static int tu_real(const tu_cal_record *r, int k, int c)
{
    return !(r->flags[k] & TU_FLAG_BRIDGED) && tu_finite(r->y[k][c]);
}

/* r_k = y_k - median of the four neighbours (the mean of the middle two). */
static float tu_neighbour_residual(const tu_cal_record *r, int k, int c)
{
    float v[4] = {r->y[k - 2][c], r->y[k - 1][c], r->y[k + 1][c], r->y[k + 2][c]};
    int i, j;
    for (i = 1; i < 4; ++i) {  /* insertion sort of four values */
        const float t = v[i];
        for (j = i - 1; j >= 0 && v[j] > t; --j) {
            v[j + 1] = v[j];
        }
        v[j + 1] = t;
    }
    return r->y[k][c] - 0.5f * (v[1] + v[2]);
}

static int tu_screen_usable(const tu_cal_record *r, int k, int c)
{
    int j;
    if (tu_key(r, k - 2) != tu_key(r, k + 2)) {
        return 0;
    }
    for (j = k - 2; j <= k + 2; ++j) {
        if (!tu_real(r, j, c)) {
            return 0;
        }
    }
    return 1;
}

/* The outlier screen (torch_ude.calibration.screen_outliers) on the real samples. */
static void tu_screen_outliers(tu_cal_record *r, const tu_config *cfg)
{
    const int len = cfg->cal_len;
    int c, k;
    for (k = 0; k < len; ++k) {
        r->flags[k] &= (uint16_t)~TU_FLAG_OUTLIER;
    }
    if (!(cfg->outlier_threshold > 0.0f)) {
        return;
    }
    for (c = 0; c < cfg->ch; ++c) {
        int count = 0;
        float limit;
        for (k = 2; k < len - 2; ++k) {
            if (tu_screen_usable(r, k, c)) {
                r->scratch[count++] = fabsf(tu_neighbour_residual(r, k, c));
            }
        }
        if (count == 0) {
            continue;
        }
        limit = cfg->outlier_threshold * (TU_MAD_TO_SD * tu_lower_median(r->scratch, count));
        if (!(limit > 0.0f)) {
            continue;
        }
        for (k = 2; k < len - 2; ++k) {
            if (tu_screen_usable(r, k, c) && fabsf(tu_neighbour_residual(r, k, c)) > limit) {
                r->flags[k] |= TU_FLAG_OUTLIER;
            }
        }
    }
}

/* Window of cfg->taps taps `spacing` apart starting at `start`: all taps finite and not outliers
 * (and real, for the noise estimate) in every channel, first and last tap in one segment. */
static int tu_cal_window(const tu_cal_record *r, const tu_config *cfg, int start, int spacing, int real_only,
                         float taps[TU_CH_MAX][TU_TAPS_MAX])
{
    const int last = start + (cfg->taps - 1) * spacing;
    int c, j;
    if (tu_key(r, start) != tu_key(r, last)) {
        return 0;
    }
    for (j = 0; j < cfg->taps; ++j) {
        const int k = start + j * spacing;
        if (r->flags[k] & TU_FLAG_OUTLIER) {
            return 0;
        }
        if (real_only && (r->flags[k] & TU_FLAG_BRIDGED)) {
            return 0;
        }
        for (c = 0; c < cfg->ch; ++c) {
            if (!tu_finite(r->y[k][c])) {
                return 0;
            }
            taps[c][j] = r->y[k][c];
        }
    }
    return 1;
}

static tu_status tu_noise(const tu_cal_record *r, const tu_config *cfg, float *sigma)
{
    float taps[TU_CH_MAX][TU_TAPS_MAX], sum[TU_CH_MAX] = {0.0f};
    int start, c, count = 0;
    for (start = 0; start + cfg->taps <= cfg->cal_len; ++start) {
        if (tu_cal_window(r, cfg, start, 1, 1, taps)) {
            for (c = 0; c < cfg->ch; ++c) {
                const float e = tu_savgol_centre_residual(cfg, taps[c]);
                sum[c] += e * e;
            }
            ++count;
        }
    }
    if (count == 0) {
        return TU_ERR_CAL_NO_WINDOW;
    }
    for (c = 0; c < cfg->ch; ++c) {
        sigma[c] = sqrtf(sum[c] / (float)count / cfg->model->sg_noise_gain);
    }
    return TU_OK;
}

/* RMS of the SG estimates at spacing m with the noise share removed (calibration._scales). */
static tu_status tu_scales(const tu_cal_record *r, const tu_config *cfg, int m, const float *sigma, float *x_rms,
                           float *s1, float *s2)
{
    const float dt = (float)m / cfg->fs;
    const float dt_pow[3] = {1.0f, dt, dt * dt};
    const int ch = cfg->ch;
    float taps[TU_CH_MAX][TU_TAPS_MAX], power[3][TU_CH_MAX] = {{0.0f}};
    float *outs[3] = {x_rms, s1, s2};
    int start, c, d, count = 0;
    for (start = 0; start + (cfg->taps - 1) * m < cfg->cal_len; start += TU_SCALE_STRIDE) {
        float est[3][TU_CH_MAX];
        if (!tu_cal_window(r, cfg, start, m, 0, taps)) {
            continue;
        }
        tu_savgol_estimate(cfg, &taps[0][0], dt, est[0], est[1], est[2]);
        for (d = 0; d < 3; ++d) {
            for (c = 0; c < ch; ++c) {
                power[d][c] += est[d][c] * est[d][c];
            }
        }
        ++count;
    }
    if (count == 0) {
        return TU_ERR_CAL_NO_SPAN;
    }
    for (d = 0; d < 3; ++d) {
        for (c = 0; c < ch; ++c) {
            const float p = power[d][c] / (float)count;
            const float noise_sd = cfg->model->sg_row_norm[d] * sigma[c] / dt_pow[d];
            const float signal = p - noise_sd * noise_sd;
            outs[d][c] = sqrtf(signal > 0.01f * p ? signal : 0.01f * p);
            if (!(outs[d][c] > 0.0f) || !tu_finite(outs[d][c])) {
                return TU_ERR_CAL_ZERO_SCALE;
            }
        }
    }
    return TU_OK;
}

tu_status tu_calibrate(tu_cal_record *record, const tu_config *cfg, tu_calibration *out)
{
    const tu_model *model = cfg->model;
    const int adaptive = cfg->m_fixed == 0, n = cfg->n, m_max = cfg->m_max;
    int m = adaptive ? (cfg->m0 < m_max ? cfg->m0 : m_max) : cfg->m_fixed;
    int round, c;
    float noise_rel, ratio;
    tu_status st;
    tu_screen_outliers(record, cfg);
    st = tu_noise(record, cfg, out->sigma);
    if (st != TU_OK) {
        return st;
    }
    for (round = 0; round < (adaptive ? TU_MAX_ROUNDS : 1); ++round) {
        float rel = 0.0f, omega = 0.0f, steps;
        int new_m;
        out->m = m;  /* named by a failure */
        st = tu_scales(record, cfg, m, out->sigma, out->x_rms, out->s1, out->s2);
        if (st != TU_OK) {
            return st;
        }
        for (c = 0; c < n; ++c) {
            const float w = out->s2[c] / out->s1[c];
            rel += out->sigma[c] / out->x_rms[c];
            omega = c == 0 || w > omega ? w : omega;
        }
        out->sigma_rel = rel / (float)n;
        out->omega_c = omega;
        if (!adaptive) {
            break;
        }
        noise_rel = cfg->tap_average ? out->sigma_rel / sqrtf((float)m) : out->sigma_rel;  /* a box tap: 1/sqrt(m) */
        noise_rel = noise_rel > 1e-12f ? noise_rel : 1e-12f;
        steps = rintf(cfg->fs * (cfg->dt_scale / omega * powf(noise_rel / 0.01f, 0.2f)));  /* half to even */
        new_m = steps < 1.0f ? 1 : (steps > (float)m_max ? m_max : (int)steps);
        if (new_m == m) {
            break;
        }
        m = new_m;
    }
    out->m = m;
    out->dt_eff = (float)m / cfg->fs;
    out->snr2 = INFINITY;
    for (c = 0; c < n; ++c) {
        const float noise = cfg->tap_average ? model->box_row2_norm[(m < cfg->box_tables ? m : cfg->box_tables) - 1]
                                                 * (out->sigma[c] / sqrtf((float)m)) / (out->dt_eff * out->dt_eff)
                                           : model->sg_row_norm[2] * out->sigma[c] / (out->dt_eff * out->dt_eff);
        ratio = noise > 0.0f ? out->s2[c] / noise : INFINITY;
        if (ratio < out->snr2) {
            out->snr2 = ratio;
        }
    }
    out->lambda2 = (!cfg->snr_gate || out->snr2 >= cfg->snr_threshold) ? cfg->lambda2 : 0.0f;
    out->weight_decay = cfg->weight_decay;
    if (cfg->weight_decay_full_at > 0.0f) {
        const float q = out->sigma_rel / cfg->weight_decay_full_at;
        out->weight_decay = cfg->weight_decay * (q * q < 1.0f ? q * q : 1.0f);
    }
    return TU_OK;
}

/* Savitzky-Golay estimates, misfit and centre residual (Eq. 20-23, 27), float32. */
#define TU_LIBRARY 1 /* the library reads its configuration from a tu_config, no single-configuration macro */
#include "tu_fp.h" /* first: no fused multiply-add in the library */

#include <math.h>

#include "tu_savgol.h"

void tu_savgol_estimate(const tu_config *cfg, const float *taps, float dt, float *x, float *xdot, float *xddot)
{
    tu_savgol_estimate_rows(cfg, cfg->model->sg_rows, taps, dt, x, xdot, xddot);
}

TU_KERNEL void tu_estimate(int ch, int n_taps, const float rows[3][TU_TAPS_MAX], const float *taps, float dt,
                           float *x, float *xdot, float *xddot)
{
    const float dt2 = dt * dt;
    int c, j;
    for (c = 0; c < ch; ++c) {
        float e0 = 0.0f, e1 = 0.0f, e2 = 0.0f;
        for (j = 0; j < n_taps; ++j) {
            e0 += taps[c * TU_TAPS_MAX + j] * rows[0][j];
            e1 += taps[c * TU_TAPS_MAX + j] * rows[1][j];
            e2 += taps[c * TU_TAPS_MAX + j] * rows[2][j];
        }
        x[c] = e0;
        xdot[c] = e1 / dt;
        xddot[c] = e2 / dt2;
    }
}

void tu_savgol_estimate_rows(const tu_config *cfg, const float rows[3][TU_TAPS_MAX], const float *taps, float dt,
                             float *x, float *xdot, float *xddot)
{
    if (cfg->ch == TU_CH_MAX && cfg->taps == TU_TAPS_MAX) {  /* the build's largest sizes: constant bounds */
        tu_estimate(TU_CH_MAX, TU_TAPS_MAX, rows, taps, dt, x, xdot, xddot);
    } else {
        tu_estimate(cfg->ch, cfg->taps, rows, taps, dt, x, xdot, xddot);
    }
}

void tu_savgol_misfit(const tu_config *cfg, const float *taps, float *misfit, float *rms)
{
    tu_savgol_misfit_with(cfg, cfg->model->sg_projection, taps, misfit, rms);
}

TU_KERNEL void tu_misfit(int ch, int n_taps, const float projection[TU_TAPS_MAX][TU_TAPS_MAX], const float *taps,
                         float *misfit, float *rms)
{
    int c, i, j;
    for (c = 0; c < ch; ++c) {
        float sq = 0.0f, power = 0.0f;
        for (i = 0; i < n_taps; ++i) {
            float r = 0.0f;
            for (j = 0; j < n_taps; ++j) {
                r += taps[c * TU_TAPS_MAX + j] * projection[i][j];
            }
            sq += r * r;
            power += taps[c * TU_TAPS_MAX + i] * taps[c * TU_TAPS_MAX + i];
        }
        misfit[c] = sqrtf(sq);
        rms[c] = sqrtf(power / (float)n_taps);
    }
}

void tu_savgol_misfit_with(const tu_config *cfg, const float projection[TU_TAPS_MAX][TU_TAPS_MAX], const float *taps,
                           float *misfit, float *rms)
{
    if (cfg->ch == TU_CH_MAX && cfg->taps == TU_TAPS_MAX) {  /* the build's largest sizes: constant bounds */
        tu_misfit(TU_CH_MAX, TU_TAPS_MAX, projection, taps, misfit, rms);
    } else {
        tu_misfit(cfg->ch, cfg->taps, projection, taps, misfit, rms);
    }
}

float tu_savgol_centre_residual(const tu_config *cfg, const float *taps)
{
    float s = 0.0f;
    int j;
    for (j = 0; j < cfg->taps; ++j) {
        s += taps[j] * cfg->model->sg_rows[0][j];
    }
    return taps[cfg->half_width] - s;
}

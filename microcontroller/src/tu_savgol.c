/* Savitzky-Golay estimates, misfit and centre residual (Eq. 20-23, 27), float32. */
#include "tu_fp.h" /* first: no fused multiply-add in the library */

#include <math.h>

#include "tu_savgol.h"

void tu_savgol_estimate(const tu_model *model, const float *taps, float dt, float x[TU_CH], float xdot[TU_CH],
                        float xddot[TU_CH])
{
    tu_savgol_estimate_rows(model->sg_rows, taps, dt, x, xdot, xddot);
}

void tu_savgol_estimate_rows(const float rows[3][TU_TAPS], const float *taps, float dt, float x[TU_CH],
                             float xdot[TU_CH], float xddot[TU_CH])
{
    const float dt2 = dt * dt;
    int c, j;
    for (c = 0; c < TU_CH; ++c) {
        float e0 = 0.0f, e1 = 0.0f, e2 = 0.0f;
        for (j = 0; j < TU_TAPS; ++j) {
            e0 += taps[c * TU_TAPS + j] * rows[0][j];
            e1 += taps[c * TU_TAPS + j] * rows[1][j];
            e2 += taps[c * TU_TAPS + j] * rows[2][j];
        }
        x[c] = e0;
        xdot[c] = e1 / dt;
        xddot[c] = e2 / dt2;
    }
}

void tu_savgol_misfit(const tu_model *model, const float *taps, float misfit[TU_CH], float rms[TU_CH])
{
    tu_savgol_misfit_with(model->sg_projection, taps, misfit, rms);
}

void tu_savgol_misfit_with(const float projection[TU_TAPS][TU_TAPS], const float *taps, float misfit[TU_CH],
                           float rms[TU_CH])
{
    int c, i, j;
    for (c = 0; c < TU_CH; ++c) {
        float sq = 0.0f, power = 0.0f;
        for (i = 0; i < TU_TAPS; ++i) {
            float r = 0.0f;
            for (j = 0; j < TU_TAPS; ++j) {
                r += taps[c * TU_TAPS + j] * projection[i][j];
            }
            sq += r * r;
            power += taps[c * TU_TAPS + i] * taps[c * TU_TAPS + i];
        }
        misfit[c] = sqrtf(sq);
        rms[c] = sqrtf(power / (float)TU_TAPS);
    }
}

float tu_savgol_centre_residual(const tu_model *model, const float taps[TU_TAPS])
{
    float s = 0.0f;
    int j;
    for (j = 0; j < TU_TAPS; ++j) {
        s += taps[j] * model->sg_rows[0][j];
    }
    return taps[TU_HALF_WIDTH] - s;
}

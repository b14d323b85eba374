/* Savitzky-Golay estimates of a window of taps per channel (Eq. 20-22), its polynomial misfit
 * ||R y|| (Eq. 27) and the centre residual of the noise estimator (Eq. 23), float32. Mirrors
 * torch_ude/savgol.py; the rows and R come from the configuration's generated tables. A window
 * holds cfg->ch rows of cfg->taps values (oldest tap first), rows TU_TAPS_MAX floats apart. */
#ifndef TU_SAVGOL_H
#define TU_SAVGOL_H

#include "tu_config.h"
#include "tu_model.h"

/** State, first and second derivative at the window centre (ch values each); dt is the tap
 * spacing in s. */
void tu_savgol_estimate(const tu_config *cfg, const float *taps, float dt, float *x, float *xdot, float *xddot);

/** tu_savgol_estimate with the given rows D0..D2 (the box-averaged ones of tu_model). */
void tu_savgol_estimate_rows(const tu_config *cfg, const float rows[3][TU_TAPS_MAX], const float *taps, float dt,
                             float *x, float *xdot, float *xddot);

/** tu_savgol_misfit with the given projection R. */
void tu_savgol_misfit_with(const tu_config *cfg, const float projection[TU_TAPS_MAX][TU_TAPS_MAX], const float *taps,
                           float *misfit, float *rms);

/** ||R y||_2 and the RMS of the taps, per channel (ch values each). */
void tu_savgol_misfit(const tu_config *cfg, const float *taps, float *misfit, float *rms);

/** e = y_mu - D0 . y of one channel's taps (Eq. 23). */
float tu_savgol_centre_residual(const tu_config *cfg, const float *taps);

#endif /* TU_SAVGOL_H */

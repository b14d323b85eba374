/* Savitzky-Golay estimates of a window of TU_TAPS taps per channel (Eq. 20-22), its polynomial
 * misfit ||R y|| (Eq. 27) and the centre residual of the noise estimator (Eq. 23), float32.
 * Mirrors torch_ude/savgol.py; the rows and R come from the generated model tables. */
#ifndef TU_SAVGOL_H
#define TU_SAVGOL_H

#include "tu_config.h"
#include "tu_model.h"

/** State, first and second derivative at the window centre; taps holds TU_CH rows of TU_TAPS
 * values (oldest tap first), dt is the tap spacing in s. */
void tu_savgol_estimate(const tu_model *model, const float *taps, float dt, float x[TU_CH], float xdot[TU_CH],
                        float xddot[TU_CH]);

/** tu_savgol_estimate with the given rows D0..D2 (the box-averaged ones of tu_model). */
void tu_savgol_estimate_rows(const float rows[3][TU_TAPS], const float *taps, float dt, float x[TU_CH],
                             float xdot[TU_CH], float xddot[TU_CH]);

/** tu_savgol_misfit with the given projection R. */
void tu_savgol_misfit_with(const float projection[TU_TAPS][TU_TAPS], const float *taps, float misfit[TU_CH],
                           float rms[TU_CH]);

/** ||R y||_2 and the RMS of the taps (TU_CH rows of TU_TAPS), per channel. */
void tu_savgol_misfit(const tu_model *model, const float *taps, float misfit[TU_CH], float rms[TU_CH]);

/** e = y_mu - D0 . y of one channel's taps (Eq. 23). */
float tu_savgol_centre_residual(const tu_model *model, const float taps[TU_TAPS]);

#endif /* TU_SAVGOL_H */

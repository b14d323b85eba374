/* The calibration phase of Algorithm 1 (lines 3-4), mirroring torch_ude/calibration.py:
 * the outlier screen, sigma_hat of Eq. (23), the scales x_rms, s1, s2 with the noise share
 * removed, the adaptive tap spacing m of Eq. (24) (a fixed point over the scales), the SNR gate
 * of Eq. (25)-(26) and the noise-adaptive weight decay. Float32.
 *
 * The record lives in the trainer's reservoir memory, which is empty until calibration ends. */
#ifndef TU_CALIBRATION_H
#define TU_CALIBRATION_H

#include <stdint.h>

#include "tu_config.h"
#include "tu_model.h"
#include "tu_status.h"

#define TU_FLAG_KEY 0x3FFFu      /* segment key, modulo 2^14 (a record holds < 2^14 breaks) */
#define TU_FLAG_OUTLIER 0x4000u  /* flagged by the outlier screen */
#define TU_FLAG_BRIDGED 0x8000u  /* filled by gap bridging */

/** The calibration record: cal_len samples with their flags, and a scratch column (sized by the
 * build's largest configuration). */
typedef struct {
    float y[TU_CAL_LEN_MAX][TU_CH_MAX];  /**< states, then inputs */
    uint16_t flags[TU_CAL_LEN_MAX];
    float scratch[TU_CAL_LEN_MAX];
} tu_cal_record;

/** The outcome of a calibration (units of the state, per second, ...). The per-channel values cover
 * the TU_CH channels (states, then inputs: an input's x_rms is the network's input scale); sigma_rel,
 * omega_c, m, snr2 and lambda2 come from the TU_N state channels only (torch_ude.calibration's
 * n_states). */
typedef struct {
    float x_rms[TU_CH_MAX];   /**< state RMS per channel */
    float s1[TU_CH_MAX];      /**< first-derivative RMS */
    float s2[TU_CH_MAX];      /**< second-derivative RMS */
    float sigma[TU_CH_MAX];   /**< noise standard deviation (Eq. 23) */
    float sigma_rel;     /**< mean_i sigma_i / x_rms_i */
    float omega_c;       /**< max_i s2_i / s1_i, rad/s */
    float dt_eff;        /**< m / fs, s */
    float snr2;          /**< Eq. (25); +inf without noise */
    float lambda2;       /**< after the gate of Eq. (26) */
    float weight_decay;  /**< TU_WEIGHT_DECAY min(1, (sigma_rel / TU_WEIGHT_DECAY_FULL_AT)^2) */
    int m;               /**< tap spacing in samples */
} tu_calibration;

/** Calibrate on the full record (cfg->cal_len samples) with the configuration's settings. The outlier bits of record->flags and
 * record->scratch are overwritten. Returns, as torch_ude.calibration.calibrate raises:
 * TU_ERR_CAL_NO_WINDOW when the record holds no TU_TAPS consecutive valid samples (the noise
 * estimate), TU_ERR_CAL_NO_SPAN when it holds no complete window at the tap spacing m (out->m
 * is that m), TU_ERR_CAL_ZERO_SCALE when a scale is zero or not finite; out is otherwise
 * unspecified then. */
tu_status tu_calibrate(tu_cal_record *record, const tu_config *cfg, tu_calibration *out);

#endif /* TU_CALIBRATION_H */

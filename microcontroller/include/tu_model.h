/* The constant tables of one generated model: Savitzky-Golay rows and projection, initial
 * weights and scales (the plant's fields are generated code: tu_plant.h). They are generated from a torch-ude run or config
 * (python -m microcontroller.generate) into tu_model_data.h and live in flash (const). */
#ifndef TU_MODEL_H
#define TU_MODEL_H

#include "tu_config.h"

/** Read-only model tables (float32, as the device runs them). */
typedef struct {
    float sg_rows[3][TU_TAPS];              /**< D0, D1, D2 of Eq. (19), per tap-unit^d, oldest tap first */
    float sg_row_norm[3];                   /**< ||D_d||_2 */
    float sg_projection[TU_TAPS][TU_TAPS];  /**< R = I - A A^+ (Eq. 27) */
    float box_rows[TU_BOX_TABLES][3][TU_TAPS];              /**< box-averaged taps of width m: D0..D2 at [m - 1] */
    float box_row2_norm[TU_BOX_TABLES];                     /**< ||D2|| of the box rows at [m - 1] */
    float box_projection[TU_BOX_TABLES][TU_TAPS][TU_TAPS];  /**< R of the box taps at [m - 1] */
    float sg_noise_gain;                    /**< 1 - 2 [D0]_mu + ||D0||^2 (Eq. 23) */
    float init_params[TU_NUM_PARAMS];       /**< initial weights W1, b1, ..., WL, bL (row-major W[out][in]) */
    float in_scale[TU_CH];                  /**< pretrained network input scales, states then inputs (used when
                                                 TU_PRETRAINED) */
    float out_scale[TU_N];                  /**< pretrained output scales (used when TU_PRETRAINED) */
} tu_model;

/** The generated tables of this build. */
const tu_model *tu_model_tables(void);

#endif /* TU_MODEL_H */

/* Status codes returned by every torch-ude C function that can fail. */
#ifndef TU_STATUS_H
#define TU_STATUS_H

/** Result of a library call: TU_OK (0), a positive notice, or a negative error.
 *
 * A calibration that fails stops the trainer, as it stops the Python trainer
 * (torch_ude.calibration.calibrate raises): the push that completed the record and every later
 * push and update return its status until tu_trainer_init starts afresh. */
typedef enum {
    TU_OK = 0,                  /**< success */
    TU_SKIPPED = 1,             /**< an update was skipped: its loss or gradient was not finite */
    TU_ERR_NULL = -1,           /**< a required pointer argument was NULL */
    TU_ERR_UNINITIALIZED = -2,  /**< the instance was not set up by its init function */
    TU_ERR_CHANNELS = -3,       /**< a sample did not have the configuration's ch channels */
    TU_ERR_CAL_NO_WINDOW = -4,  /**< calibration failed: no TU_TAPS consecutive valid samples in the record */
    TU_ERR_NOT_READY = -5,      /**< an update was asked for before calibration or with too few samples */
    TU_ERR_ARGUMENT = -6,       /**< an argument was out of range */
    TU_ERR_CAL_NO_SPAN = -7,    /**< calibration failed: no complete window at the tap spacing m */
    TU_ERR_CAL_ZERO_SCALE = -8, /**< calibration failed: a zero or non-finite scale (the record shows no motion) */
    TU_ERR_CORRUPT = -9,        /**< the instance's bytes are inconsistent (a damaged checkpoint): init it again */
    TU_ERR_CONFIG = -10         /**< the configuration is not one this build can run, its tables belong to another
                                     configuration (settings hash), or a checkpoint was saved with another one */
} tu_status;

/** 1 if `status` is one of the calibration failures (TU_ERR_CAL_*), else 0. */
int tu_status_is_calibration(tu_status status);

/** A one-line English description of a status, for logs. Never NULL. */
const char *tu_status_string(tu_status status);

#endif /* TU_STATUS_H */

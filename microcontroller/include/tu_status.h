/* Status codes returned by every torch-ude C function that can fail. */
#ifndef TU_STATUS_H
#define TU_STATUS_H

/** Result of a library call: TU_OK (0), a positive notice, or a negative error. */
typedef enum {
    TU_OK = 0,                  /**< success */
    TU_SKIPPED = 1,             /**< an update was skipped: its loss or gradient was not finite */
    TU_ERR_NULL = -1,           /**< a required pointer argument was NULL */
    TU_ERR_UNINITIALIZED = -2,  /**< the instance was not set up by its init function */
    TU_ERR_CHANNELS = -3,       /**< a sample did not have TU_N channels */
    TU_ERR_CALIBRATION = -4,    /**< calibration failed (no valid window, or a zero scale); it restarts */
    TU_ERR_NOT_READY = -5,      /**< an update was asked for before calibration or with too few samples */
    TU_ERR_ARGUMENT = -6        /**< an argument was out of range */
} tu_status;

/** A one-line English description of a status, for logs. Never NULL. */
const char *tu_status_string(tu_status status);

#endif /* TU_STATUS_H */

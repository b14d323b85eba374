/* Human-readable status strings. */
#define TU_LIBRARY 1 /* the library reads its configuration from a tu_config, no single-configuration macro */
#include "tu_fp.h" /* first: no fused multiply-add in the library */

#include "tu_status.h"

int tu_status_is_calibration(tu_status status)
{
    return status == TU_ERR_CAL_NO_WINDOW || status == TU_ERR_CAL_NO_SPAN || status == TU_ERR_CAL_ZERO_SCALE;
}

const char *tu_status_string(tu_status status)
{
    switch (status) {
    case TU_OK:
        return "ok";
    case TU_SKIPPED:
        return "update skipped: the loss or the gradient was not finite";
    case TU_ERR_NULL:
        return "a required pointer argument was NULL";
    case TU_ERR_UNINITIALIZED:
        return "the trainer was not initialized: call tu_trainer_init first";
    case TU_ERR_CHANNELS:
        return "the sample does not have the configuration's channel count";
    case TU_ERR_CAL_NO_WINDOW:
        return "calibration failed: the record holds no TU_TAPS consecutive valid samples; the trainer stopped "
               "(check the sensor, then tu_trainer_init)";
    case TU_ERR_NOT_READY:
        return "not ready to update: calibration unfinished or fewer samples than one minibatch";
    case TU_ERR_ARGUMENT:
        return "an argument was out of range";
    case TU_ERR_CAL_NO_SPAN:
        return "calibration failed: the record holds no complete window at the tap spacing m; the trainer stopped "
               "(lengthen the calibration phase, then tu_trainer_init)";
    case TU_ERR_CAL_ZERO_SCALE:
        return "calibration failed: a zero or non-finite scale, the record shows no motion; the trainer stopped "
               "(excite the plant, then tu_trainer_init)";
    case TU_ERR_CORRUPT:
        return "the trainer's state is inconsistent (a damaged checkpoint); call tu_trainer_init";
    case TU_ERR_CONFIG:
        return "the configuration does not fit this build or its tables belong to another configuration (settings "
               "hash), or the checkpoint was saved with another configuration";
    }
    return "unknown status";
}

/* Human-readable status strings. */
#include "tu_status.h"

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
        return "the sample does not have TU_N channels";
    case TU_ERR_CALIBRATION:
        return "calibration failed (no complete valid window or a zero scale); it restarts on the next samples";
    case TU_ERR_NOT_READY:
        return "not ready to update: calibration unfinished or fewer samples than one minibatch";
    case TU_ERR_ARGUMENT:
        return "an argument was out of range";
    }
    return "unknown status";
}

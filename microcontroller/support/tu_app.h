/* The on-device training application shared by every firmware (QEMU Cortex-M4, ESP32): the
 * trainer learns from the firmware's own simulated pendulum (RK4 of the true plant, noise from
 * PCG32), as in the paper's ESP32 experiment, and reports every 1000 updates over stdout. */
#ifndef TU_APP_H
#define TU_APP_H

#include <stdint.h>

#include "tu_trainer.h"

#if TU_SIM_PENDULUM

/** A monotonic counter of the platform (microseconds, timer ticks, ...), and its unit. */
typedef struct {
    uint64_t (*now)(void); /**< the counter now */
    const char *unit;      /**< printed after the counts: what they are, e.g. "us" */
} tu_clock;

/** Train `trainer` (initialized) on `seconds` of the simulated pendulum (noise TU_SIM_NOISE, seed
 * TU_DEFAULT_SEED); from `change_at` seconds on (if >= 0) the plant's damping is `damping_after`.
 * Then replay the reservoir to TU_MAX_STEPS updates. Every `report_every` updates one line: the
 * update count, the stream time, the status of the last update, the loss, c_hat and the clock
 * counts per update since the previous line. Returns the final c_hat. */
float tu_app_simulate(tu_trainer *trainer, float seconds, float damping_after, float change_at, tu_clock clock,
                      int32_t report_every);

#endif

#endif /* TU_APP_H */

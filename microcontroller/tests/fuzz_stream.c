/* libFuzzer target: arbitrary bytes as a sensor stream (values, ticks, segments) and update
 * requests to the trainer API. A run fails on a crash, a sanitizer report, a non-finite
 * weight or inconsistent counters. Built with a small generated configuration (calibration of
 * a few dozen samples, a reservoir of a few slots) so that short inputs reach training. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tu_trainer.h"

static tu_trainer trainer;

static int finite_all(const float *v, int n)
{
    int i;
    for (i = 0; i < n; ++i) {
        if (!(v[i] - v[i] == 0.0f)) {
            return 0;
        }
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const size_t record = 1u + 4u * TU_N;
    float w[TU_NUM_PARAMS];
    uint64_t tick = 0u; /* unsigned: the harness's own arithmetic wraps instead of overflowing */
    int32_t segment = 0;
    tu_report rep;
    size_t pos = 0;
    tu_trainer_init(&trainer, size);
    while (pos + record <= size) {
        const uint8_t op = data[pos];
        float y[TU_N];
        memcpy(y, data + pos + 1, sizeof y);
        pos += record;
        switch (op & 3u) { /* tick step: repeat (out of order), next, a short gap, a long gap */
        case 0:
            break;
        case 1:
            tick += 1;
            break;
        case 2:
            tick += 1 + (op >> 5);
            break;
        default:
            tick += 50 + (op >> 2);
            break;
        }
        if (op & 4u) {
            tick -= 3u; /* out of order */
        }
        if ((op & 0x18u) == 0x18u) {
            ++segment;
        }
        if (op == 0xFFu && pos + 8u <= size) { /* an arbitrary tick */
            memcpy(&tick, data + pos, sizeof tick);
            pos += 8u;
        }
        tu_trainer_push(&trainer, (int64_t)tick, segment, y, TU_N);
        if ((op & 0xE0u) == 0xE0u) {
            tu_trainer_step(&trainer);
        }
    }
    tu_trainer_steps(&trainer, 3, NULL);
    if (tu_trainer_report(&trainer, &rep) != TU_OK) {
        abort();
    }
    if (rep.counters.windows != rep.counters.nonfinite + rep.counters.boundary + rep.counters.misfit
                                    + rep.counters.accepted) {
        abort();
    }
    if (tu_trainer_weights(&trainer, 0, w, TU_NUM_PARAMS) != TU_OK || !finite_all(w, TU_NUM_PARAMS)) {
        abort();
    }
    if (tu_trainer_weights(&trainer, 1, w, TU_NUM_PARAMS) != TU_OK || !finite_all(w, TU_NUM_PARAMS)) {
        abort();
    }
    return 0;
}

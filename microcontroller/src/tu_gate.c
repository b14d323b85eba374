/* Running-median misfit gate (Eq. 27). */
#include "tu_fp.h" /* first: no fused multiply-add in the library */

#include "tu_gate.h"
#include "tu_select.h"

void tu_gate_reset(tu_gate *self)
{
    self->head = 0;
    self->count = 0;
}

void tu_gate_record(tu_gate *self, const float misfit[TU_CH])
{
    int c;
    for (c = 0; c < TU_CH; ++c) {
        self->history[self->head][c] = misfit[c];
    }
    self->head = (self->head + 1) % TU_GATE_HISTORY;
    if (self->count < TU_GATE_HISTORY) {
        ++self->count;
    }
}

int tu_gate_check(tu_gate *self, const float misfit[TU_CH], const float rms[TU_CH])
{
    int accept = 1, c, k;
    if (TU_QUALITY_GATE && self->count > 0) {
        float scratch[TU_GATE_HISTORY];
        for (c = 0; c < TU_CH && accept; ++c) {
            float median, threshold;
            for (k = 0; k < self->count; ++k) {
                scratch[k] = self->history[k][c];
            }
            median = tu_lower_median(scratch, self->count);
            threshold = TU_GATE_FACTOR * median + TU_GATE_FLOOR * rms[c];
            if (misfit[c] > threshold) {
                accept = 0;
            }
        }
    }
    tu_gate_record(self, misfit);
    return accept;
}

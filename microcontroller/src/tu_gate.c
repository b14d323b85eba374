/* Running-median misfit gate (Eq. 27). */
#define TU_LIBRARY 1 /* the library reads its configuration from a tu_config, no single-configuration macro */
#include "tu_fp.h" /* first: no fused multiply-add in the library */

#include "tu_gate.h"
#include "tu_select.h"

void tu_gate_reset(tu_gate *self)
{
    self->head = 0;
    self->count = 0;
}

void tu_gate_record(tu_gate *self, const tu_config *cfg, const float *misfit)
{
    int c;
    for (c = 0; c < cfg->ch; ++c) {
        self->history[self->head][c] = misfit[c];
    }
    self->head = (self->head + 1) % cfg->gate_history;
    if (self->count < cfg->gate_history) {
        ++self->count;
    }
}

int tu_gate_check(tu_gate *self, const tu_config *cfg, const float *misfit, const float *rms)
{
    int accept = 1, c, k;
    if (cfg->quality_gate && self->count > 0) {
        float scratch[TU_GATE_HISTORY_MAX];
        for (c = 0; c < cfg->ch && accept; ++c) {
            float median, threshold;
            for (k = 0; k < self->count; ++k) {
                scratch[k] = self->history[k][c];
            }
            median = tu_lower_median(scratch, self->count);
            threshold = cfg->gate_factor * median + cfg->gate_floor * rms[c];
            if (misfit[c] > threshold) {
                accept = 0;
            }
        }
    }
    tu_gate_record(self, cfg, misfit);
    return accept;
}

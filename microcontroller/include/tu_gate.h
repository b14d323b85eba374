/* The polynomial-misfit quality gate of Eq. (27) with its running median (mirrors
 * torch_ude/gate.py): a window is rejected when, in any channel,
 * ||R y|| > gate_factor * median + gate_floor * RMS(y), the median (the lower one for an
 * even count) running over the misfits of the gate_history windows before it (the
 * configuration's settings, tu_model.h). */
#ifndef TU_GATE_H
#define TU_GATE_H

#include "tu_config.h"
#include "tu_model.h"

/** The misfit history (a ring of the most recent windows). */
typedef struct {
    float history[TU_GATE_HISTORY_MAX][TU_CH_MAX];
    int head;   /**< next slot to write */
    int count;  /**< filled slots, <= gate_history */
} tu_gate;

/** Empty the history (every window passes until one is recorded). */
void tu_gate_reset(tu_gate *self);

/** Append a window's misfits (ch values) to the history without judging it (warm-up). */
void tu_gate_record(tu_gate *self, const tu_config *cfg, const float *misfit);

/** Judge a window against the history, then record it; 1 = accept. With quality_gate 0
 * every window is accepted (and still recorded). */
int tu_gate_check(tu_gate *self, const tu_config *cfg, const float *misfit, const float *rms);

#endif /* TU_GATE_H */

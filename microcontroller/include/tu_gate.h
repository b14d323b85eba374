/* The polynomial-misfit quality gate of Eq. (27) with its running median (mirrors
 * torch_ude/gate.py): a window is rejected when, in any channel,
 * ||R y|| > TU_GATE_FACTOR * median + TU_GATE_FLOOR * RMS(y), the median (the lower one for an
 * even count) running over the misfits of the TU_GATE_HISTORY windows before it. */
#ifndef TU_GATE_H
#define TU_GATE_H

#include "tu_config.h"

/** The misfit history (a ring of the most recent windows). */
typedef struct {
    float history[TU_GATE_HISTORY][TU_CH];
    int head;   /**< next slot to write */
    int count;  /**< filled slots, <= TU_GATE_HISTORY */
} tu_gate;

/** Empty the history (every window passes until one is recorded). */
void tu_gate_reset(tu_gate *self);

/** Append a window's misfits to the history without judging it (warm-up). */
void tu_gate_record(tu_gate *self, const float misfit[TU_CH]);

/** Judge a window against the history, then record it; 1 = accept. With TU_QUALITY_GATE 0
 * every window is accepted (and still recorded). */
int tu_gate_check(tu_gate *self, const float misfit[TU_CH], const float rms[TU_CH]);

#endif /* TU_GATE_H */

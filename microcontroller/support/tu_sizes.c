/* Prints the static memory of one tu_trainer, array by array, as JSON (sizeof in this build). */
#include <stdio.h>

#include "tu_trainer.h"

#define TU_SIZE(member) (unsigned long)sizeof(((tu_trainer *)0)->member)

int main(void)
{
    const unsigned long parts[] = {
        TU_SIZE(mem), TU_SIZE(params), TU_SIZE(grad), TU_SIZE(exp_avg), TU_SIZE(exp_avg_sq), TU_SIZE(ema),
        TU_SIZE(ring), TU_SIZE(gate),
    };
    unsigned long listed = 0;
    size_t i;
    for (i = 0; i < sizeof parts / sizeof parts[0]; ++i) {
        listed += parts[i];
    }
    printf("{\"total\": %lu, \"reservoir\": %lu, \"calibration_record\": %lu, \"weights\": %lu, \"gradient\": %lu, "
           "\"adam_exp_avg\": %lu, \"adam_exp_avg_sq\": %lu, \"ema\": %lu, \"ring\": %lu, \"gate_history\": %lu, "
           "\"calibration\": %lu, \"counters\": %lu, \"prng\": %lu, \"other\": %lu, \"capacity\": %d, \"n\": %d, "
           "\"params\": %d, \"m_max\": %d, \"gate_history_windows\": %d}\n",
           (unsigned long)sizeof(tu_trainer), TU_SIZE(mem.reservoir), TU_SIZE(TU_RECORD_MEMBER), parts[1], parts[2],
           parts[3], parts[4], parts[5], parts[6], parts[7], TU_SIZE(cal), TU_SIZE(counters),
           TU_SIZE(reservoir_rng) + TU_SIZE(batch_rng),
           (unsigned long)sizeof(tu_trainer) - listed - TU_SIZE(cal) - TU_SIZE(counters) - TU_SIZE(reservoir_rng)
               - TU_SIZE(batch_rng),
           TU_CAPACITY, TU_N, TU_NUM_PARAMS, TU_M_MAX, TU_GATE_HISTORY);
    return 0;
}

/* On-device training on the simulated pendulum (see tu_app.h). */
#include "tu_fp.h" /* first: no fused multiply-add in the library */

#include <stdio.h>

#include "tu_app.h"
#include "tu_eval.h"

#if TU_SIM_PENDULUM

typedef struct {
    tu_clock clock;
    uint64_t last;
    int64_t reported;
    int64_t every;
    int64_t tick;
} tu_progress;

static void tu_report_line(const tu_trainer *trainer, tu_status status, tu_progress *p)
{
    const uint64_t now = p->clock.now();
    tu_report r;
    tu_trainer_report(trainer, &r);
    if (r.updates - p->reported < p->every) {
        return;
    }
    printf("update %lld (t %.2f s): %s, loss %.5g, c_hat %.4f, %llu %s per update\n", (long long)r.updates,
           (double)((float)p->tick / TU_FS), tu_status_string(status), (double)r.loss,
           (double)tu_pendulum_damping(trainer),
           (unsigned long long)((now - p->last) / (uint64_t)(r.updates - p->reported)), p->clock.unit);
    p->reported = r.updates;
    p->last = p->clock.now();
}

float tu_app_simulate(tu_trainer *trainer, float seconds, float damping_after, float change_at, tu_clock clock,
                      int32_t report_every)
{
    static tu_pendulum_sim sim;
    static int64_t ticks[TU_TRAIN_EVERY];
    static int32_t segments[TU_TRAIN_EVERY];
    static float y[TU_TRAIN_EVERY][TU_CH];
    const int64_t total = (int64_t)(seconds * TU_FS);
    const int64_t change = change_at >= 0.0f ? (int64_t)(change_at * TU_FS) : -1;
    tu_progress p = {{NULL, NULL}, 0u, 0, 0, 0};
    tu_status st = TU_OK;
    tu_report r;
    int64_t tick = 0;
    int i, due;
    p.clock = clock;
    p.last = clock.now();
    p.reported = 0;
    p.every = report_every > 0 ? report_every : 1000;
    tu_pendulum_sim_init(&sim, TU_DEFAULT_SEED, TU_SIM_NOISE, seconds < 60.0f ? seconds : 60.0f);
    while (tick < total) {
        for (i = 0; i < TU_TRAIN_EVERY; ++i, ++tick) {
            if (tick == change) {
                sim.added_damping = damping_after - TU_SIM_DAMPING;
                printf("tick %lld: the plant's damping becomes %.3f\n", (long long)tick, (double)damping_after);
            }
            ticks[i] = tick;
            segments[i] = tu_pendulum_sim_next(&sim, y[i]);
        }
        p.tick = tick;
        st = tu_trainer_push_chunk(trainer, TU_TRAIN_EVERY, ticks, segments, &y[0][0], TU_CH, &due);
        if (st < 0) {
            printf("tick %lld: %s\n", (long long)tick, tu_status_string(st));
            if (tu_trainer_ready(trainer) < 0) {
                return tu_pendulum_damping(trainer); /* stopped (a failed calibration): nothing will train */
            }
        }
        while (due-- > 0) {
            st = tu_trainer_step(trainer);
            tu_report_line(trainer, st, &p);
        }
    }
    tu_trainer_report(trainer, &r);
    while (r.updates < TU_MAX_STEPS && (st = tu_trainer_step(trainer)) >= 0) {
        tu_report_line(trainer, st, &p);
        tu_trainer_report(trainer, &r);
    }
    return tu_pendulum_damping(trainer);
}

#endif

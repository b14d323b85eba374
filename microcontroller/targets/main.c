/* torch-ude firmware for an MCU core under QEMU (semihosting for files and stdout), shared by
 * every target in targets/ (Cortex-M4F on mps2-an386, rv32imafc and rv32imac on virt); a target
 * supplies the startup, the fault handling and the timer of tu_target.h.
 *
 *   app.elf [--icount] replay STREAM_FILE RESULT_FILE   train on a recorded stream (TU_PUSH_CH channels a sample:
 *                                              the states or positions, then the inputs), write the weights
 *   app.elf [--icount] simulate RESULT_FILE SECONDS [DAMPING_AFTER CHANGE_AT_SECONDS [REPORT_EVERY]]
 *                                              train on the firmware's own simulated pendulum
 *   app.elf --icount measure STREAM_FILE [UPDATES]   instructions per update (early and steady state) and
 *                                              per chunk of stream, over a run of UPDATES (default TU_MAX_STEPS)
 *   app.elf multi STREAM_0 RESULT_0 ... STREAM_K RESULT_K   one trainer per configuration of the image
 *                                              (k = 0 .. TU_CONFIG_COUNT - 1, each with its seed and
 *                                              max_steps), trained on its stream chunk by chunk in turn
 *   app.elf fault                              a deliberate bus fault (the handlers end the run)
 *
 * Every 1000 updates it prints the update count, the last loss, c_hat (single pendulum) and the
 * time since the previous line read from the target's timer. `--icount` says that QEMU runs with
 * -icount shift=0 (microcontroller.target.run_firmware passes it): the timer then counts
 * instructions (tu_target_instructions_per_tick each tick), and the lines give instructions;
 * without it the timer follows the host's clock, the lines say "host-time timer ticks", and
 * `measure` refuses to run. Exit status: 0 done, 1 the trainer failed, 2 a file is missing or bad
 * (or a usage error), 3 a fault. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tu_app.h"
#include "tu_eval.h"
#include "tu_replay.h"
#include "tu_select.h"
#include "tu_stream_file.h"
#include "tu_target.h"
#include "tu_trainer.h"

static tu_trainer trainer;
#if TU_CONFIG_COUNT > 1
static tu_trainer others[TU_CONFIG_COUNT - 1]; /* configurations 1 .. of a multi-configuration image */
#endif
static int icount; /* QEMU runs with -icount shift=0: timer ticks count instructions */

static void print_report(const char *what)
{
    tu_report r;
    tu_trainer_report(&trainer, &r);
    printf("%s: updates %lld, m %d, lambda2 %.3g, sigma %.5g %.5g, loss %.5g\n", what, (long long)r.updates,
           r.calibration.m, (double)r.calibration.lambda2, (double)r.calibration.sigma[0],
           (double)r.calibration.sigma[1], (double)r.loss);
    printf("counters: samples %llu, nonfinite_samples %llu, out_of_order %llu, gaps %llu, long_gaps %llu, "
           "bridged %llu, windows %llu, nonfinite %llu, boundary %llu, misfit %llu, accepted %llu, "
           "calibration_failures %llu, skipped_updates %llu\n",
           (unsigned long long)r.counters.samples, (unsigned long long)r.counters.nonfinite_samples,
           (unsigned long long)r.counters.out_of_order, (unsigned long long)r.counters.gaps,
           (unsigned long long)r.counters.long_gaps, (unsigned long long)r.counters.bridged,
           (unsigned long long)r.counters.windows, (unsigned long long)r.counters.nonfinite,
           (unsigned long long)r.counters.boundary, (unsigned long long)r.counters.misfit,
           (unsigned long long)r.counters.accepted, (unsigned long long)r.counters.calibration_failures,
           (unsigned long long)r.counters.skipped_updates);
}

/* The timer's count since timer_start as instructions (under -icount) or as host-time ticks. */
static uint64_t elapsed(void)
{
    return tu_target_timer_now() * (icount ? tu_target_instructions_per_tick : 1u);
}

static const char *elapsed_unit(void)
{
    return icount ? "instructions" : "host-time timer ticks";
}

static void progress(const tu_trainer *t, void *context)
{
    uint64_t *last = context;
    const uint64_t now = elapsed();
    tu_report r;
    tu_trainer_report(t, &r);
#if TU_SIM_PENDULUM
    printf("update %lld: loss %.5g, c_hat %.4f, %llu %s\n", (long long)r.updates, (double)r.loss,
           (double)tu_pendulum_damping(t), (unsigned long long)(now - *last), elapsed_unit());
#else
    printf("update %lld: loss %.5g, %llu %s\n", (long long)r.updates, (double)r.loss,
           (unsigned long long)(now - *last), elapsed_unit());
#endif
    *last = elapsed();
}

#if TU_PHYSICAL
/* The end-of-run refit of a physics-alone run (the configuration's refit_evaluations > 0, where the Python trainer
 * refits), its cost printed in the timer's unit: 1 refitted, 0 no refit, -1 an error. */
static int refit_physics(tu_refit_report *refit)
{
    const int evaluations = tu_trainer_config(&trainer)->refit_evaluations;
    uint64_t start;
    tu_status st;
    if (tu_trainer_config(&trainer)->num_physical == 0 || evaluations == 0) {
        return 0;
    }
    start = elapsed();
    st = tu_trainer_refit(&trainer, evaluations, refit);
    printf("refit: %s, %d evaluations, converged %d, |r|^2 per jet %.6g -> %.6g, %llu %s\n", tu_status_string(st),
           (int)refit->evaluations, (int)refit->converged, (double)refit->loss_before, (double)refit->loss_after,
           (unsigned long long)(elapsed() - start), elapsed_unit());
    return st == TU_OK ? 1 : -1;
}
#endif

static int finish(const char *result_path)
{
#if TU_PHYSICAL
    tu_refit_report refit;
    const int refitted = refit_physics(&refit);
    if (refitted < 0) {
        return 2;
    }
#endif
    print_report("done");
#if TU_SIM_PENDULUM
    printf("c_hat %.4f\n", (double)tu_pendulum_damping(&trainer));
#endif
    if (tu_result_file_write(result_path, &trainer) != 0) {
        printf("error: could not write the result file %s\n", result_path);
        return 2;
    }
#if TU_PHYSICAL  /* the standard errors (and the refit's report) after the weights */
    if (tu_trainer_config(&trainer)->num_physical > 0
        && tu_result_file_append_physical(result_path, &trainer, refitted ? &refit : NULL) != 0) {
        printf("error: could not append the physical parameters to %s\n", result_path);
        return 2;
    }
#endif
    printf("wrote %s\n", result_path);
    return 0;
}

static int replay(const char *stream, const char *result)
{
    uint64_t last = 0;
    tu_replay_result r;
    int ready;
    tu_target_timer_start();
    tu_replay(&trainer, stream, TU_MAX_STEPS, &r, progress, 1000, &last);
    if (r.file != TU_FILE_END) {
        printf("error: %s: %s after %lu records\n", stream, tu_file_status_string(r.file), (unsigned long)r.records);
        print_report("stopped");
        return 2;
    }
    ready = tu_trainer_ready(&trainer);
    if (ready < 0) {
        printf("error: %s: %s\n", stream, tu_status_string((tu_status)ready));
        print_report("stopped");
        return 1;
    }
    printf("replayed %lu records: %d updates live, %d on the reservoir\n", (unsigned long)r.records, (int)r.live_updates,
           (int)r.replay_updates);
    return finish(result);
}

#if TU_SIM_PENDULUM
static int simulate(const char *result, float seconds, float damping_after, float change_at, int report_every)
{
    tu_clock clock;
    int ready;
    clock.now = elapsed;
    clock.unit = elapsed_unit();
    tu_target_timer_start();
    tu_app_simulate(&trainer, seconds, damping_after, change_at, clock, report_every);
    ready = tu_trainer_ready(&trainer);
    if (ready < 0) {
        printf("error: %s\n", tu_status_string((tu_status)ready));
        print_report("stopped");
        return 1;
    }
    return finish(result);
}
#endif

/* The steady-state window of `measure`: the last updates of the run, at most this many. */
#define TU_STEADY_WINDOW 1000

/* What `measure` counts, in timer ticks. */
typedef struct {
    uint64_t chunk_sum, update_sum; /* the early window's chunks and updates */
    int chunks, early;
    float tail[20];                 /* the latest chunks after the calibration, a ring */
    int tail_count;
    int32_t updates;                /* updates made (skipped ones not counted) */
    int32_t first, last;            /* the steady-state window: updates first..last, the run's last */
    float steady[TU_STEADY_WINDOW]; /* their ticks */
} tu_measure;

/* Whether the next chunk and update fall into the early window: updates 51-70, the reservoir full. */
static int early_window(const tu_measure *m)
{
    return m->updates >= 50 && m->early < 20;
}

/* One update, timed; returns its status. */
static tu_status timed_update(tu_measure *m)
{
    const int early = early_window(m);
    const uint64_t t0 = tu_target_timer_now();
    const tu_status st = tu_trainer_step(&trainer);
    const uint64_t ticks = tu_target_timer_now() - t0;
    if (st == TU_OK) {
        if (early) {
            m->update_sum += ticks;
            ++m->early;
        }
        if (++m->updates >= m->first && m->updates <= m->last) {
            m->steady[m->updates - m->first] = (float)ticks;
        }
    }
    return st;
}

/* One chunk of stream pushed (timed) and its due updates made. */
static void timed_chunk(tu_measure *m, int count, const int64_t *ticks, const int32_t *segments, const float *y)
{
    int due = 0;
    const int early = early_window(m);
    tu_report r;
    const uint64_t t0 = tu_target_timer_now();
    uint64_t ticks_used;
    tu_trainer_push_chunk(&trainer, count, ticks, segments, y, TU_PUSH_CH, &due);
    ticks_used = tu_target_timer_now() - t0;
    if (early) {
        m->chunk_sum += ticks_used;
        ++m->chunks;
    }
    tu_trainer_report(&trainer, &r);
    if (r.calibrated == 1) {
        m->tail[m->tail_count++ % 20] = (float)ticks_used;
    }
    while (due-- > 0) {
        (void)timed_update(m);
    }
}

/* Instructions of one update and of the stream work of one chunk (one training tick, TU_PUSH_CH channels
 * a sample: the states, then the recorded inputs) over a run of `updates` updates. The stream is
 * driven as `replay` drives it (chunks of one training tick, the due updates after each, then updates
 * on the reservoir) with the timer read around every push and update, until `updates` updates are
 * made. Early figures: the means over updates 51-70 (the reservoir full) and the chunks before them
 * (a stream that ends before update 50, its reservoir not full: the last 20 chunks after the
 * calibration); steady state: the median over the last min(TU_STEADY_WINDOW, updates / 2) updates of the run. Its
 * counts live on the stack: they are not part of the firmware's static memory. */
static int measure(const char *stream, int32_t updates)
{
    tu_measure m;
    tu_stream_file file;
    int64_t ticks[TU_TRAIN_EVERY], tick = 0, block = 0;
    int32_t segments[TU_TRAIN_EVERY], segment = 0, attempts;
    float y[TU_TRAIN_EVERY][TU_PUSH_CH], v[TU_PUSH_CH];
    int count = 0, tail, i;
    tu_file_status fs;
    if (!icount) {
        printf("error: measure counts instructions, which the timer gives only under QEMU's -icount shift=0: "
               "run it with `python -m microcontroller.target --icount ... measure STREAM`\n");
        return 2;
    }
    if (updates < 140) {
        printf("error: measure needs a run of at least 140 updates (early window 51-70, steady state the last "
               "half); got %ld\n", (long)updates);
        return 2;
    }
    fs = tu_stream_file_open(&file, stream, TU_PUSH_CH);
    if (fs != TU_FILE_OK) {
        printf("error: %s: %s\n", stream, tu_file_status_string(fs));
        return 2;
    }
    memset(&m, 0, sizeof m);
    m.last = updates;
    m.first = updates - (updates / 2 < TU_STEADY_WINDOW ? updates / 2 : TU_STEADY_WINDOW) + 1;
    tu_target_timer_start();
    while (m.updates < m.last) {
        fs = tu_stream_file_next(&file, &tick, &segment, v);
        if (count > 0 && (fs != TU_FILE_OK || tick / TU_TRAIN_EVERY != block || count == TU_TRAIN_EVERY)) {
            timed_chunk(&m, count, ticks, segments, &y[0][0]);
            count = 0;
        }
        if (fs != TU_FILE_OK) {
            break;
        }
        block = tick / TU_TRAIN_EVERY;
        ticks[count] = tick;
        segments[count] = segment;
        memcpy(y[count++], v, sizeof v);
    }
    tu_stream_file_close(&file);
    if (fs != TU_FILE_END && fs != TU_FILE_OK) {
        printf("error: %s: %s\n", stream, tu_file_status_string(fs));
        return 2;
    }
    for (attempts = 0; m.updates < m.last && attempts < 2 * m.last; ++attempts) {
        if (timed_update(&m) < 0) {
            break; /* too few jets, a failed calibration: the check below reports it */
        }
    }
    if (m.early < 20 || m.tail_count == 0 || m.updates < m.last) {
        printf("error: %ld updates of %ld made: the stream did not fill the reservoir and reach 70 updates, or the "
               "reservoir replay stopped\n", (long)m.updates, (long)m.last);
        return 1;
    }
    tail = m.chunks == 0;
    if (tail) { /* the reservoir filled after the stream: its last chunks */
        m.chunks = m.tail_count < 20 ? m.tail_count : 20;
        for (i = 0; i < m.chunks; ++i) {
            m.chunk_sum += (uint64_t)m.tail[i];
        }
    }
    printf("measure: %lu instructions per update, %lu per chunk of %d samples (%d updates, %d chunks%s); "
           "steady state: %lu instructions per update (median of updates %ld-%ld)\n",
           (unsigned long)(m.update_sum * tu_target_instructions_per_tick / (uint64_t)m.early),
           (unsigned long)(m.chunk_sum * tu_target_instructions_per_tick / (uint64_t)m.chunks), TU_TRAIN_EVERY, m.early,
           m.chunks, tail ? " at the stream's end" : "",
           (unsigned long)((uint64_t)tu_lower_median(m.steady, m.last - m.first + 1) * tu_target_instructions_per_tick),
           (long)m.first, (long)m.last);
    return 0;
}

/* One trainer per configuration, trained interleaved (tu_replay_many), each result written. */
static int multi(int count, char **files)
{
    tu_trainer *trainers[TU_REPLAY_MAX];
    const char *paths[TU_REPLAY_MAX];
    int32_t max_updates[TU_REPLAY_MAX];
    tu_replay_result results[TU_REPLAY_MAX];
    int k, status = 0;
    if (count != TU_CONFIG_COUNT) {
        printf("error: multi needs a stream and a result file for each of the image's %d configurations\n",
               TU_CONFIG_COUNT);
        return 2;
    }
    for (k = 0; k < count; ++k) {
        const tu_config *cfg = tu_config_get(k);
#if TU_CONFIG_COUNT > 1
        trainers[k] = k == 0 ? &trainer : &others[k - 1];
#else
        trainers[k] = &trainer;
#endif
        if (tu_trainer_init(trainers[k], cfg, cfg->default_seed) != TU_OK) {
            printf("error: configuration %d refused\n", k);
            return 1;
        }
        paths[k] = files[2 * k];
        max_updates[k] = (int32_t)cfg->max_steps;
    }
    tu_target_timer_start();
    (void)tu_replay_many(trainers, paths, count, max_updates, results, NULL, 0, NULL);
    for (k = 0; k < count; ++k) {
        tu_report r;
        tu_trainer_report(trainers[k], &r);
        printf("trainer %d (config %s): %s, %lu records, %d updates live, %d on the reservoir, loss %.5g\n", k,
               tu_config_get(k)->hash, tu_file_status_string(results[k].file), (unsigned long)results[k].records,
               (int)results[k].live_updates, (int)results[k].replay_updates, (double)r.loss);
        if (results[k].file != TU_FILE_END) {
            status = 2;
        } else if (tu_trainer_ready(trainers[k]) < 0) {
            status = status ? status : 1;
        } else if (tu_result_file_write(files[2 * k + 1], trainers[k]) != 0) {
            printf("error: could not write the result file %s\n", files[2 * k + 1]);
            status = 2;
        }
    }
    return status;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "--icount") == 0) {
        icount = 1;
        argv[1] = argv[0];
        --argc;
        ++argv;
    }
    tu_trainer_init(&trainer, TU_DEFAULT_CONFIG, TU_DEFAULT_SEED);
    printf("torch-ude firmware, config %s, tu_trainer %lu bytes\n", TU_CONFIG_HASH, (unsigned long)sizeof trainer);
    if (argc == 4 && strcmp(argv[1], "replay") == 0) {
        return replay(argv[2], argv[3]);
    }
    if ((argc == 3 || argc == 4) && strcmp(argv[1], "measure") == 0) {
        return measure(argv[2], argc == 4 ? (int32_t)atol(argv[3]) : TU_MAX_STEPS);
    }
    if (argc >= 4 && argc % 2 == 0 && strcmp(argv[1], "multi") == 0) {
        return multi((argc - 2) / 2, argv + 2);
    }
    if (argc == 2 && strcmp(argv[1], "fault") == 0) {
        return (int)*(volatile uint32_t *)0xFFFFFFF0u; /* no memory there: a bus fault (Arm), an access fault (RISC-V) */
    }
#if TU_SIM_PENDULUM
    if ((argc == 4 || argc == 6 || argc == 7) && strcmp(argv[1], "simulate") == 0) {
        return simulate(argv[2], (float)atof(argv[3]), argc >= 6 ? (float)atof(argv[4]) : 0.0f,
                        argc >= 6 ? (float)atof(argv[5]) : -1.0f, argc == 7 ? atoi(argv[6]) : 1000);
    }
#endif
    printf("usage: app.elf [--icount] (replay STREAM RESULT | measure STREAM [UPDATES] | simulate RESULT SECONDS [DAMPING AT "
           "[EVERY]] | multi STREAM_0 RESULT_0 ... | fault)\n");
    return 2;
}

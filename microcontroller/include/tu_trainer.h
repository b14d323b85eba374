/* The streaming jet-matching trainer (Algorithm 1) in static memory: the public API.
 *
 * One caller-owned `tu_trainer` instance holds everything (no malloc, no globals); it is set up
 * with a configuration (`tu_config`, tu_model.h: sizes, settings, the plant's generated fields and
 * the constant tables, in flash), so one image can hold several trainers of different plants and
 * sizes. Its size is fixed at compile time by the generated tu_config.h's maxima over the build's
 * configurations (TU_*_MAX). Float32 throughout (the reservoir optionally float16, below). Below,
 * TU_N, TU_CAL_LEN, ... name the
 * configuration's settings (its fields n, cal_len, ...; the macros of a single-configuration build). The Python trainer
 * (torch_ude.stream.StreamEstimator and torch_ude.training.JetMatchingModule) is the
 * reference: the same stream semantics, defaults and update.
 *
 * Stream semantics (per sample):
 *  - a tick that does not increase is dropped and counted (out_of_order);
 *  - a gap of at most TU_MAX_BRIDGE missing ticks in one segment is filled by linear
 *    interpolation (bridged); a longer one (long_gaps) or a change of the segment id starts a
 *    new segment, and no window straddles two;
 *  - the first TU_CAL_LEN samples calibrate (scales, noise, m, lambda2, weight decay);
 *  - then, at every tick divisible by the stride s, the window of TU_TAPS taps m apart ending
 *    there is formed; windows with a non-finite tap (nonfinite), across a segment boundary
 *    (boundary) or failing the misfit gate (misfit) are rejected; accepted ones (accepted)
 *    are offered to the reservoir (TU_CAPACITY jets, reservoir sampling with its own PRNG). A jet
 *    is (x_hat, xdot_hat, xddot_hat), or (x_hat, xdot_hat) when the configuration has no
 *    second-order term (TU_JET_ROWS 2: lambda2^0 = 0), which saves a third of the reservoir.
 *    With TU_FORGET_WINDOW W > 0 the replacement probability stops falling at B / W, so the
 *    reservoir holds roughly the last W windows (for a plant that changes).
 *    Storage (the build's TU_RESERVOIR_HALF, model.stream.reservoir_precision): float32 (4 bytes a
 *    value, in the channel's units), or float16: each value divided by its channel's calibrated RMS
 *    x_rms (the network's input scale unless pretrained; fixed at the one calibration, before the
 *    reservoir fills) and kept as the IEEE binary16 pattern nearest to it (tu_half.h; 2 bytes, a
 *    relative error of about 2^-11 at most, or 2^-25 x_rms absolute below 2^-14 x_rms), read back as the
 *    half's value times x_rms. A window whose jet overflows binary16 (|value| >= 65520 x_rms)
 *    counts as nonfinite and is not offered.
 *
 * Updates (tu_trainer_step): a minibatch of TU_BATCH jets drawn uniformly from the reservoir,
 * the exact jet gradient (Eq. 14-16; with inputs of F(x, u) and G = J_x F F + J_u F udot), gradient-norm clipping, AdamW with the cosine schedule
 * over TU_MAX_STEPS and the noise-adaptive weight decay, and the EMA of the weights. An update
 * whose loss or gradient is not finite is skipped (the weights never become non-finite). After
 * TU_MAX_STEPS updates the rate stays at its last value (TU_LR_MIN): a device may keep training
 * on the live stream past the schedule, which the Python trainer does not (it stops there).
 *
 * Velocities from positions (TU_VELOCITY, a configuration with positions p > 0: an encoder and no tachometer):
 * a pushed sample holds the p positions, then the inputs (TU_PUSH_CH_OF(cfg) = ch - p channels). Pushed samples
 * form runs: a tick that does not increase is dropped and counted (out_of_order), any other tick than the last
 * plus one, or a change of the segment id, starts a new run. Once a run holds 2M + 2 samples, each sample of it
 * with M samples on both sides gets the velocities fs D1 . q of its centred window (the row velocity_row) and
 * goes on to the stream above as (q, qdot, u) with its own tick, the run's index as its segment id: a run's first
 * and last M samples never reach the stream, a run shorter than 2M + 2 gives nothing
 * (torch_ude.position_only.with_velocities on the run; samples reach the stream M ticks late, the first two of a
 * run together).
 *
 * Calibration replay (TU_CAL_REPLAY, a configuration with calibration_replay 1, torch_ude.stream's
 * calibration_replay): once the record calibrates, the ring restarts empty and the record's samples stream through it
 * in order, with their ticks and segment breaks: every window that ends at a tick divisible by the stride, TU_TAPS
 * taps after the record's first sample or later, is counted, judged by the gate and offered to the reservoir as a
 * live window is, so a recorded log's first calibration_s seconds train too.
 *
 * For a device that runs for months: every count and tick is 64-bit (no wrap), the due count of
 * push_chunk is bounded, a failed calibration stops the trainer with its cause, and a restored
 * checkpoint is checked before use. */
#ifndef TU_TRAINER_H
#define TU_TRAINER_H

#include <stddef.h>
#include <stdint.h>

#include "tu_calibration.h"
#include "tu_config.h"
#include "tu_gate.h"
#include "tu_jet.h"
#include "tu_model.h"
#include "tu_prng.h"
#include "tu_status.h"

#define TU_STREAM_RESERVOIR 1u  /* PCG32 stream of the reservoir's replacement draws */
#define TU_STREAM_BATCH 2u      /* PCG32 stream of the minibatch indices */

#if defined(TU_RESERVOIR_HALF) && TU_RESERVOIR_HALF
typedef uint16_t tu_jet_value; /**< a stored jet value: the binary16 pattern of value / x_rms (float16 storage) */
#else
typedef float tu_jet_value;    /**< a stored jet value, in its channel's units (float32 storage) */
#endif

/** Event counts, as in torch_ude.stream (plus the C-only calibration failures). 64-bit: at
 * 1 kHz a 32-bit count would wrap after 49.7 days; these never do. */
typedef struct {
    uint64_t samples;              /**< samples that arrived (in order) */
    uint64_t nonfinite_samples;    /**< of which some channel was NaN/Inf */
    uint64_t out_of_order;         /**< dropped: tick not increasing */
    uint64_t gaps;                 /**< ticks that skipped ahead */
    uint64_t long_gaps;            /**< of which too long to bridge */
    uint64_t bridged;              /**< samples filled by interpolation */
    uint64_t windows;              /**< windows formed after calibration */
    uint64_t nonfinite;            /**< rejected: a non-finite tap */
    uint64_t boundary;             /**< rejected: across a segment boundary */
    uint64_t misfit;               /**< rejected by the misfit gate */
    uint64_t accepted;             /**< offered to the reservoir */
    uint64_t calibration_failures; /**< calibrations that failed (0 or 1: a failure stops the trainer) */
    uint64_t skipped_updates;      /**< updates skipped for a non-finite loss or gradient */
} tu_counters;

/* The trust envelope's span (torch_ude.envelope, torch_ude.reservoir.SampleBuffer.span): tu_config.h defines
 * TU_ENVELOPE 1 only when a configuration of the build exports a field with an envelope; the instance then
 * keeps the smallest and largest value of each channel over the value row of every jet offered to the
 * reservoir (2 TU_CH_MAX floats), and without it the trainer has neither the members nor the code. */
#ifndef TU_ENVELOPE
#define TU_ENVELOPE 0
#endif

/** A snapshot for logs and the Python binding. */
typedef struct {
    tu_counters counters;
    tu_calibration calibration;  /**< valid when calibrated is 1 */
    int32_t calibrated;          /**< 1 once calibration succeeded, 0 before, or the TU_ERR_CAL_* status of
                                      the failed calibration that stopped the trainer */
    int32_t fill;                /**< reservoir slots in use */
    int64_t updates;             /**< updates made */
    uint64_t seen;               /**< jets offered to the reservoir */
    float loss, loss_r1, loss_r2;  /**< of the last update (loss_r2 NaN when not evaluated) */
    float grad_norm, lr;           /**< of the last update, before clipping / the rate used */
    float in_scale[TU_CH_MAX], out_scale[TU_N_MAX];  /**< network input scales (states, then inputs), output scales
                                                         (the configuration's ch and n of them) */
} tu_report;

/** The trainer instance (caller-owned; e.g. `static tu_trainer trainer;`). Its one pointer is its
 * configuration (const, in flash); its other bytes are a complete checkpoint: save them, and bring
 * them back with tu_trainer_restore and the same configuration, which checks every index and size
 * in them and the configuration's digest. The 8-byte members come first (the pointer in 8 bytes
 * on every core), so the struct has no padding inside. */
typedef struct {
    uint32_t magic;
    int32_t calibrated;      /**< 0 calibrating, 1 calibrated, or the TU_ERR_CAL_* status that stopped it */
    union {
        const tu_config *config; /**< the configuration it was set up with */
        uint64_t bits;           /**< (8 bytes on 32- and 64-bit cores alike) */
    } config;
    tu_prng reservoir_rng;   /**< reservoir replacement slots (seed, stream TU_STREAM_RESERVOIR) */
    tu_prng batch_rng;       /**< minibatch indices (seed, stream TU_STREAM_BATCH) */
    int64_t last_tick;       /**< the newest arrived sample is the newest record or ring entry */
    uint64_t seen;           /**< jets offered to the reservoir */
    int64_t adam_step;       /**< updates made (the schedule's step) */
    tu_counters counters;
#if TU_CAL_REPLAY
    int64_t cal_ticks[TU_CAL_LEN_MAX]; /**< the ticks of the calibration record's samples (its windows' phase) */
#endif
#if TU_VELOCITY
    int64_t vel_tick;        /**< the newest pushed tick (of a configuration that derives its velocities) */
#endif
    /* stream */
    int32_t have_last;
    int32_t last_segment;
    uint32_t key;            /**< segment key: count of segment breaks (only its low 14 bits are used) */
    int32_t cal_fill;        /**< samples in the calibration record (< TU_CAL_LEN while calibrating) */
    tu_calibration cal;
    float ring[TU_RING_LEN_MAX][TU_CH_MAX];
    int32_t ring_head;       /**< slot of the next sample */
    uint32_t run;            /**< samples since the last segment break, the newest included (capped) */
    tu_gate gate;
    union {
        /** (x_hat, xdot_hat[, xddot_hat]) per slot, states then inputs (float32, or float16 in units of x_rms) */
        tu_jet_value reservoir[TU_CAPACITY_MAX][TU_JET_ROWS_MAX][TU_CH_MAX];
#if !TU_CAL_REPLAY
        tu_cal_record record;                   /**< the calibration record, before the reservoir fills */
#endif
    } mem;
#if TU_CAL_REPLAY
    tu_cal_record cal_record; /**< the calibration record in its own memory: streamed again once calibrated */
#endif
    /* network and optimizer */
    float params[TU_WEIGHTS_MAX];  /**< the network's weights, then theta of trained physical parameters */
    float grad[TU_WEIGHTS_MAX];
    float exp_avg[TU_WEIGHTS_MAX];
    float exp_avg_sq[TU_WEIGHTS_MAX];
    float ema[TU_WEIGHTS_MAX];
    float in_scale[TU_CH_MAX];   /**< network input scales: the states' RMS, then the inputs' */
    float out_scale[TU_N_MAX];
    float last_loss, last_loss_r1, last_loss_r2, last_grad_norm;
#if TU_ENVELOPE
    float span_low[TU_CH_MAX];   /**< per channel, the smallest x_hat offered to the reservoir (+Inf before any) */
    float span_high[TU_CH_MAX];  /**< the largest (-Inf before any); columns ch .. TU_CH_MAX - 1 stay +-Inf */
#endif
#if TU_VELOCITY
    /* The velocity derivative (a configuration with positions > 0): the pushed samples of the current run of
     * consecutive ticks of one segment id, the newest TU_VEL_RING_MAX of them (2M + 2 used) */
    float vel_ring[TU_VEL_RING_MAX][TU_CH_MAX];
    int32_t vel_head;        /**< slot of the next pushed sample */
    int32_t vel_count;       /**< samples of the current run, capped at 2M + 3 (0: none pushed yet) */
    int32_t vel_segment;     /**< the pushed segment id of the current run */
    uint32_t vel_runs;       /**< runs started: the segment id of the derived samples (its low 31 bits) */
#endif
    uint32_t config_digest;  /**< tu_config_digest of the configuration's state_hash (checked by restore) */
} tu_trainer;

/* The instance's calibration record (its own member where the build replays it, TU_CAL_REPLAY). */
#if TU_CAL_REPLAY
#define TU_RECORD_MEMBER cal_record
#else
#define TU_RECORD_MEMBER mem.record
#endif

#if defined(TU_RAM_BUDGET) && TU_RAM_BUDGET > 0
/* the generator refused a configuration whose instance exceeds the target's RAM budget; this
 * repeats the check for the compiler (a negative array size: C99 has no _Static_assert) */
typedef char tu_trainer_fits_the_ram_budget[sizeof(tu_trainer) <= (size_t)TU_RAM_BUDGET ? 1 : -1];
#endif

/** Bytes of one instance (for callers that allocate it themselves, e.g. Python). */
size_t tu_trainer_size(void);

/** Bytes of a tu_report (lets a binding check its copy of the layout). */
size_t tu_report_size(void);

/** Set up an instance for `config` (e.g. tu_config_get(0), TU_DEFAULT_CONFIG): initial weights and
 * scales from its tables, empty stream, PRNGs seeded from `seed`. TU_ERR_CONFIG (self left
 * uninitialized) when tu_config_check refuses the configuration: not one this build can run, or
 * tables generated for another configuration (their settings hash differs). */
tu_status tu_trainer_init(tu_trainer *self, const tu_config *config, uint64_t seed);

/** Restore an instance from `size` bytes saved from one of the same build (a checkpoint) with
 * the configuration it was trained with: TU_ERR_ARGUMENT unless size == tu_trainer_size();
 * TU_ERR_CONFIG when tu_config_check refuses `config` or the checkpoint was saved with another
 * configuration (the digest of its state_hash: the settings but the schedule's length, which may grow); TU_ERR_CORRUPT when the bytes are not a trainer of this build or hold
 * an index, a count, a status or a tap spacing out of range, or a weight, moment or scale that is
 * not finite (or a negative second moment). On an error self is left uninitialized. `bytes` may be
 * unaligned; it must not overlap self. */
tu_status tu_trainer_restore(tu_trainer *self, const tu_config *config, const void *bytes, size_t size);

/** The configuration of an initialized instance (NULL for NULL or an uninitialized one). */
const tu_config *tu_trainer_config(const tu_trainer *self);

/** Ingest one sample: its tick (sample index at TU_FS), segment id (0 if the sensor has none;
 * a change starts a new segment) and n_channels == TU_CH values: the TU_N states, then the TU_NU
 * recorded inputs (TU_CH == TU_N without inputs); with TU_VELOCITY, n_channels == TU_PUSH_CH values: the
 * positions, then the inputs (the file comment); another count is TU_ERR_CHANNELS. Returns TU_OK (also for a
 * dropped or rejected sample, which is counted) or an error. The push that completes the
 * calibration record returns TU_ERR_CAL_* if the calibration fails; the trainer then stops
 * (see tu_status.h): later pushes return the same status and ingest nothing. */
tu_status tu_trainer_push(tu_trainer *self, int64_t tick, int32_t segment, const float *y, int n_channels);

/** Ingest `count` samples (y row-major, count x n_channels) and report in *due how many updates
 * the training rate asks for now: the number of multiples of TU_TRAIN_EVERY ticks crossed
 * since the chunk began, once the reservoir is full (0 before), as torch_ude.update.due_updates
 * counts them, except that a gap between two samples counts at most TU_DUE_SPAN ticks (one
 * second of stream, at least one training tick): a sensor that was silent, or a tick that
 * jumped ahead, asks for at most one second's updates, never billions. Returns the first
 * error. */
tu_status tu_trainer_push_chunk(tu_trainer *self, int count, const int64_t *ticks, const int32_t *segments,
                                const float *y, int n_channels, int *due);

/** 1 once the reservoir is full (the live stream trains from then on), 0 before, or a
 * negative status: TU_ERR_NULL, TU_ERR_UNINITIALIZED, TU_ERR_CORRUPT, or the TU_ERR_CAL_*
 * status of a failed calibration. Test it with `> 0`. */
int tu_trainer_ready(const tu_trainer *self);

/** One update (see the file comment). TU_ERR_NOT_READY before calibration or with fewer than
 * TU_BATCH jets; the TU_ERR_CAL_* status after a failed calibration; TU_SKIPPED for a
 * non-finite loss or gradient. */
tu_status tu_trainer_step(tu_trainer *self);

/** Run `count` >= 0 updates; stops at the first error (TU_ERR_ARGUMENT for count < 0, and the
 * instance's errors even for count 0). *done (may be NULL) receives the number of updates
 * applied (skipped ones are counted in counters.skipped_updates, not here). */
tu_status tu_trainer_steps(tu_trainer *self, int count, int *done);

/** Copy n = TU_NUM_PARAMS + TU_NUM_PHYSICAL weights into out (the network's, then theta of the trained physical
 * parameters, p = p0 + s theta: none without TU_PHYSICAL): which = 0 the raw weights, 1 the EMA (the raw weights
 * before the first update or without TU_EMA). */
tu_status tu_trainer_weights(const tu_trainer *self, int which, float *out, int n);

/** Fill a report. */
tu_status tu_trainer_report(const tu_trainer *self, tu_report *out);

/** The trust envelope's span: copy the smallest and largest value of each of the n == ch channels (states,
 * then inputs, in their units) over the value row x_hat of every jet offered to the reservoir, as the
 * reservoir holds it (float16 storage: the stored half times x_rms), into low and high: +Inf and -Inf
 * before the first jet (torch_ude.reservoir.SampleBuffer.span). TU_ERR_ARGUMENT for another n;
 * TU_ERR_CONFIG in a build without TU_ENVELOPE (it records no span). */
tu_status tu_trainer_span(const tu_trainer *self, float *low, float *high, int n);

#if TU_PHYSICAL
/** What tu_trainer_refit did: |r|^2 per jet of the scaled jet residuals (the jet loss summed over the reservoir's
 * jets, over their count) before and after, the passes over the reservoir and whether it stopped converged. */
typedef struct {
    float loss_before, loss_after;
    int32_t evaluations;
    int32_t converged;  /**< 1: a relative decrease below 1e-6, a step below 1e-6, or no lower |r|^2 found */
} tu_refit_report;

/** The end-of-run refit of the trained physical parameters (torch_ude.physical.refit_physical_parameters): theta of
 * the exported weights (the EMA; the raw weights before the first update or without TU_EMA) is moved, within its
 * bounds, to the minimum of the jet loss over all the reservoir's jets, the network held at its weights (zero in a
 * physics-alone run, physics_first 1: the case the Python trainer refits), by a projected Levenberg-Marquardt
 * iteration on J^T J, J^T r (at most max_evaluations >= 1 passes over the reservoir, the first at the start; a
 * configuration's refit_evaluations is the generator's choice). Float32 throughout. The update's gradient buffer is
 * its scratch, so call it after the run's last update. TU_ERR_CONFIG for a configuration without physical
 * parameters, TU_ERR_NOT_READY before calibration or with an empty reservoir, TU_ERR_ARGUMENT for max_evaluations <
 * 1, TU_SKIPPED (theta left at the last finite point) for a non-finite loss. */
tu_status tu_trainer_refit(tu_trainer *self, int max_evaluations, tu_refit_report *out);

/** The Gauss-Newton standard errors of theta (torch_ude.physical.physical_report, in theta's units: times the span
 * s of each parameter for its own units) at the exported weights, over all the reservoir's jets: se[k] = sqrt(s^2
 * (J^T J)^-1_kk), s^2 = |r|^2 / (R - P), R the residual rows (jets times n, times 2 with the second-order term);
 * NaN where J^T J is not positive definite in float32. Conditional on the network, as in Python. Errors as
 * tu_trainer_refit's, and TU_ERR_ARGUMENT unless n == num_physical. The gradient buffer is its scratch. */
tu_status tu_trainer_standard_errors(tu_trainer *self, float *se, int n);
#endif

#endif /* TU_TRAINER_H */

/* The streaming jet-matching trainer (Algorithm 1) in static memory: the public API.
 *
 * One caller-owned `tu_trainer` instance holds everything (no malloc, no globals); its size is
 * fixed at compile time by the generated tu_config.h. Float32 throughout. The Python trainer
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
 *
 * Updates (tu_trainer_step): a minibatch of TU_BATCH jets drawn uniformly from the reservoir,
 * the exact jet gradient (Eq. 14-16), gradient-norm clipping, AdamW with the cosine schedule
 * over TU_MAX_STEPS and the noise-adaptive weight decay, and the EMA of the weights. An update
 * whose loss or gradient is not finite is skipped (the weights never become non-finite). */
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

#define TU_RING_LEN ((TU_TAPS - 1) * TU_M_MAX + 1)  /* the newest sample and the span before it */
#define TU_STREAM_RESERVOIR 1u  /* PCG32 stream of the reservoir's replacement draws */
#define TU_STREAM_BATCH 2u      /* PCG32 stream of the minibatch indices */

/** Event counts, as in torch_ude.stream (plus the C-only calibration restarts). */
typedef struct {
    uint32_t samples;              /**< samples that arrived (in order) */
    uint32_t nonfinite_samples;    /**< of which some channel was NaN/Inf */
    uint32_t out_of_order;         /**< dropped: tick not increasing */
    uint32_t gaps;                 /**< ticks that skipped ahead */
    uint32_t long_gaps;            /**< of which too long to bridge */
    uint32_t bridged;              /**< samples filled by interpolation */
    uint32_t windows;              /**< windows formed after calibration */
    uint32_t nonfinite;            /**< rejected: a non-finite tap */
    uint32_t boundary;             /**< rejected: across a segment boundary */
    uint32_t misfit;               /**< rejected by the misfit gate */
    uint32_t accepted;             /**< offered to the reservoir */
    uint32_t calibration_failures; /**< calibrations that failed and restarted */
    uint32_t skipped_updates;      /**< updates skipped for a non-finite loss or gradient */
} tu_counters;

/** A snapshot for logs and the Python binding. */
typedef struct {
    tu_counters counters;
    tu_calibration calibration;  /**< valid when calibrated */
    int32_t calibrated;          /**< 1 once calibration succeeded */
    int32_t updates;             /**< updates made */
    int32_t fill;                /**< reservoir slots in use */
    uint32_t seen;               /**< jets offered to the reservoir */
    float loss, loss_r1, loss_r2;  /**< of the last update (loss_r2 NaN when not evaluated) */
    float grad_norm, lr;           /**< of the last update, before clipping / the rate used */
    float in_scale[TU_N], out_scale[TU_N];
} tu_report;

/** The trainer instance (caller-owned; e.g. `static tu_trainer trainer;`). It holds no pointers,
 * so its bytes are a complete checkpoint (tu_model_tables() are read where needed). */
typedef struct {
    uint32_t magic;
    tu_prng reservoir_rng;  /**< reservoir replacement slots (seed, stream TU_STREAM_RESERVOIR) */
    tu_prng batch_rng;      /**< minibatch indices (seed, stream TU_STREAM_BATCH) */
    /* stream */
    int32_t have_last;
    int32_t last_segment;
    int64_t last_tick;       /* the newest arrived sample is the newest record or ring entry */
    uint32_t key;            /**< segment key: count of segment breaks */
    int32_t calibrated;
    int32_t cal_fill;
    tu_calibration cal;
    float ring[TU_RING_LEN][TU_N];
    int32_t ring_head;       /**< slot of the next sample */
    uint32_t run;            /**< samples since the last segment break, the newest included */
    tu_gate gate;
    uint32_t seen;           /**< jets offered to the reservoir */
    union {
        float reservoir[TU_CAPACITY][TU_JET_ROWS][TU_N]; /**< (x_hat, xdot_hat[, xddot_hat]) per slot */
        tu_cal_record record;                   /**< the calibration record, before the reservoir fills */
    } mem;
    /* network and optimizer */
    float params[TU_NUM_PARAMS];
    float grad[TU_NUM_PARAMS];
    float exp_avg[TU_NUM_PARAMS];
    float exp_avg_sq[TU_NUM_PARAMS];
    float ema[TU_NUM_PARAMS];
    float in_scale[TU_N];
    float out_scale[TU_N];
    int32_t adam_step;       /**< updates made (the schedule's step) */
    float last_loss, last_loss_r1, last_loss_r2, last_grad_norm;
    tu_counters counters;
} tu_trainer;

/** Bytes of one instance (for callers that allocate it themselves, e.g. Python). */
size_t tu_trainer_size(void);

/** Bytes of a tu_report (lets a binding check its copy of the layout). */
size_t tu_report_size(void);

/** Set up an instance: initial weights and scales from the generated tables, empty stream,
 * PRNGs seeded from `seed`. */
tu_status tu_trainer_init(tu_trainer *self, uint64_t seed);

/** Ingest one sample: its tick (sample index at TU_FS), segment id (0 if the sensor has none;
 * a change starts a new segment) and n_channels == TU_N values. Returns TU_OK (also for a
 * dropped or rejected sample, which is counted) or an error (TU_ERR_CALIBRATION when the
 * calibration it completed failed; it then restarts). */
tu_status tu_trainer_push(tu_trainer *self, int64_t tick, int32_t segment, const float *y, int n_channels);

/** Ingest `count` samples (y row-major, count x n_channels) and report in *due how many updates
 * the training rate asks for now: the number of multiples of TU_TRAIN_EVERY ticks crossed
 * since the chunk began, once the reservoir is full (0 before). Returns the first error. */
tu_status tu_trainer_push_chunk(tu_trainer *self, int count, const int64_t *ticks, const int32_t *segments,
                                const float *y, int n_channels, int *due);

/** 1 once the reservoir is full (the live stream trains from then on). */
int tu_trainer_ready(const tu_trainer *self);

/** One update (see the file comment). TU_ERR_NOT_READY before calibration or with fewer than
 * TU_BATCH jets; TU_SKIPPED for a non-finite loss or gradient. */
tu_status tu_trainer_step(tu_trainer *self);

/** Run `count` updates; stops at the first error. *done (may be NULL) receives the number of
 * updates applied (skipped ones are counted in counters.skipped_updates, not here). */
tu_status tu_trainer_steps(tu_trainer *self, int count, int *done);

/** Copy TU_NUM_PARAMS weights into out: which = 0 the raw weights, 1 the EMA (the raw weights
 * before the first update or without TU_EMA). */
tu_status tu_trainer_weights(const tu_trainer *self, int which, float *out, int n);

/** Fill a report. */
tu_status tu_trainer_report(const tu_trainer *self, tu_report *out);

#endif /* TU_TRAINER_H */

/* libFuzzer target over the trainer's whole public API: arbitrary bytes as a program of calls
 * (push, push_chunk with the due updates run as a driver runs them, step, steps with any count,
 * restore from the instance's bytes with some of them changed, ready / report / weights,
 * init, and calls the API must refuse) on a sensor stream of arbitrary values, ticks and segments. Built with a small
 * generated configuration (calibration of 60 samples, the adaptive tap spacing searched up to
 * m = 4, a reservoir of 16 jets, an update every 2 ticks) so that short inputs reach every
 * stage. A run fails on a crash, a sanitizer report, a status the API does not promise, a due
 * count beyond its bound, a non-finite weight or inconsistent counters (the last two unless a
 * restore accepted changed bytes: those are the caller's data).
 *
 * Input: a sequence of operations, each an opcode byte and its operands (see the cases). A
 * sample record is a control byte and TU_CH values: bits 0-1 the tick step (repeat, next, a
 * short gap of bits 2-4, a long gap), bit 5 three ticks back, bit 6 a new segment, bit 7 raw
 * float32 values (else int16 / 4096, which keeps mutated streams smooth enough to calibrate). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tu_trainer.h"

#define TU_FUZZ_CHUNK 32
#define TU_FUZZ_EDITS 8

typedef struct {
    const uint8_t *data;
    size_t size, pos;
} tu_input;

static tu_trainer trainer;
static unsigned char saved[sizeof(tu_trainer)];
static unsigned char edited[sizeof(tu_trainer)];

static void fail(void)
{
    abort();
}

static int take(tu_input *in, void *out, size_t n)
{
    if (in->pos + n > in->size) {
        return 0;
    }
    memcpy(out, in->data + in->pos, n);
    in->pos += n;
    return 1;
}

static int all_finite(const float *v, int n)
{
    int i;
    for (i = 0; i < n; ++i) {
        if (!(v[i] - v[i] == 0.0f)) {
            return 0;
        }
    }
    return 1;
}

/* One sample record: advances *tick and *segment; 0 at the end of the input. */
static int sample(tu_input *in, uint64_t *tick, int32_t *segment, float y[TU_CH])
{
    uint8_t ctrl;
    int c;
    if (!take(in, &ctrl, 1)) {
        return 0;
    }
    switch (ctrl & 3u) {
    case 0:
        break;
    case 1:
        *tick += 1u;
        break;
    case 2:
        *tick += 2u + ((ctrl >> 2) & 7u); /* bridged */
        break;
    default:
        *tick += 7u + 13u * ((ctrl >> 2) & 7u); /* too long to bridge */
        break;
    }
    if (ctrl & 0x20u) {
        *tick -= 3u;
    }
    if (ctrl & 0x40u) {
        ++*segment;
    }
    for (c = 0; c < TU_CH; ++c) {
        if (ctrl & 0x80u) {
            if (!take(in, &y[c], sizeof y[c])) {
                return 0;
            }
        } else {
            int16_t q;
            if (!take(in, &q, sizeof q)) {
                return 0;
            }
            y[c] = (float)q / 4096.0f;
        }
    }
    return 1;
}

static int is_status(tu_status st)
{
    return st >= TU_ERR_CORRUPT && st <= TU_SKIPPED;
}

/* The updates a chunk of `count` samples may ask for: one second's at most per gap. */
static int due_bound(int count)
{
    return count * (int)(TU_DUE_SPAN / TU_TRAIN_EVERY + 1);
}

/* Run `due` updates as a driver does (at most a few per chunk here, to keep inputs fast). */
static void drive(int due)
{
    int i;
    for (i = 0; i < due && i < 3; ++i) {
        const tu_status st = tu_trainer_step(&trainer);
        if (st != TU_OK && st != TU_SKIPPED && st != TU_ERR_NOT_READY && !tu_status_is_calibration(st)) {
            fail();
        }
    }
}

/* Calls the API must refuse, each with its status, leaving the instance as it was. */
static void misuse(void)
{
    static tu_trainer blank; /* zeroed: never initialized */
    static const float y[TU_CH] = {0.0f};
    static float w[TU_NUM_PARAMS];
    const int64_t t = 0;
    int due;
    tu_report rep;
    if (tu_trainer_size() != sizeof(tu_trainer) || tu_report_size() != sizeof(tu_report)
        || tu_trainer_init(NULL, TU_DEFAULT_CONFIG, 0u) != TU_ERR_NULL || tu_trainer_push(NULL, 0, 0, y, TU_CH) != TU_ERR_NULL
        || tu_trainer_push(&blank, 0, 0, y, TU_CH) != TU_ERR_UNINITIALIZED
        || tu_trainer_push(&trainer, 0, 0, NULL, TU_CH) != TU_ERR_NULL
        || tu_trainer_push(&trainer, 0, 0, y, TU_CH + 1) != TU_ERR_CHANNELS
        || tu_trainer_push_chunk(&blank, 1, &t, NULL, y, TU_CH, &due) != TU_ERR_UNINITIALIZED
        || tu_trainer_push_chunk(&trainer, 1, &t, NULL, y, TU_CH, NULL) != TU_ERR_NULL
        || tu_trainer_push_chunk(&trainer, 1, NULL, NULL, y, TU_CH, &due) != TU_ERR_NULL
        || tu_trainer_push_chunk(&trainer, 1, &t, NULL, y, TU_CH - 1, &due) != TU_ERR_CHANNELS
        || tu_trainer_push_chunk(&trainer, -1, &t, NULL, y, TU_CH, &due) != TU_ERR_ARGUMENT
        || tu_trainer_step(NULL) != TU_ERR_NULL || tu_trainer_steps(&blank, 1, NULL) != TU_ERR_UNINITIALIZED
        || tu_trainer_ready(NULL) != TU_ERR_NULL || tu_trainer_ready(&blank) != TU_ERR_UNINITIALIZED
        || tu_trainer_weights(&blank, 0, w, TU_NUM_PARAMS) != TU_ERR_UNINITIALIZED
        || tu_trainer_weights(&trainer, 0, NULL, TU_NUM_PARAMS) != TU_ERR_NULL
        || tu_trainer_weights(&trainer, 0, w, TU_NUM_PARAMS - 1) != TU_ERR_ARGUMENT
        || tu_trainer_report(&blank, &rep) != TU_ERR_UNINITIALIZED
        || tu_trainer_restore(NULL, TU_DEFAULT_CONFIG, &blank, sizeof blank) != TU_ERR_NULL
        || tu_trainer_restore(&blank, TU_DEFAULT_CONFIG, NULL, sizeof blank) != TU_ERR_NULL
        || tu_trainer_restore(&blank, TU_DEFAULT_CONFIG, &trainer, sizeof trainer - 1) != TU_ERR_ARGUMENT
        || tu_trainer_restore(&blank, TU_DEFAULT_CONFIG, edited, 0) != TU_ERR_ARGUMENT
        || tu_trainer_restore(&blank, NULL, &trainer, sizeof trainer) != TU_ERR_NULL
        || tu_trainer_init(&blank, NULL, 0u) != TU_ERR_NULL || blank.magic != 0u) {
        fail();
    }
    memset(edited, 0, sizeof edited); /* bytes of no trainer */
    if (tu_trainer_restore(&blank, TU_DEFAULT_CONFIG, edited, sizeof edited) != TU_ERR_CORRUPT || blank.magic != 0u) {
        fail();
    }
}

static void query(int trusted)
{
    static float w[TU_NUM_PARAMS];
    tu_report rep;
    const int ready = tu_trainer_ready(&trainer);
    if (tu_trainer_report(&trainer, &rep) != TU_OK || tu_trainer_report(&trainer, NULL) != TU_ERR_NULL) {
        fail();
    }
    if ((ready > 0) != (rep.calibrated == 1 && rep.fill == TU_CAPACITY) || (ready < 0 && ready != rep.calibrated)) {
        fail();
    }
    if (trusted && rep.counters.windows != rep.counters.nonfinite + rep.counters.boundary + rep.counters.misfit
                                               + rep.counters.accepted) {
        fail();
    }
    if (tu_trainer_weights(&trainer, 0, w, TU_NUM_PARAMS) != TU_OK || (trusted && !all_finite(w, TU_NUM_PARAMS))) {
        fail();
    }
    if (tu_trainer_weights(&trainer, 1, w, TU_NUM_PARAMS) != TU_OK || (trusted && !all_finite(w, TU_NUM_PARAMS))) {
        fail();
    }
    if (tu_trainer_weights(&trainer, 2, w, TU_NUM_PARAMS) != TU_ERR_ARGUMENT) {
        fail();
    }
}

/* Restore the instance from its own bytes with up to TU_FUZZ_EDITS bytes changed; 1 if it took
 * changed bytes. A refused restore leaves it uninitialized: the saved bytes come back. */
static int restore(tu_input *in)
{
    uint8_t n = 0;
    int k, changed = 0;
    tu_status st;
    memcpy(saved, &trainer, sizeof saved);
    memcpy(edited, saved, sizeof edited);
    (void)take(in, &n, 1);
    for (k = 0; k < (int)(n % (TU_FUZZ_EDITS + 1)); ++k) {
        uint8_t edit[3];
        size_t at;
        if (!take(in, edit, sizeof edit)) {
            break;
        }
        at = (((size_t)edit[0] << 8 | edit[1]) * sizeof edited) >> 16;
        changed = changed || edit[2] != 0u;
        edited[at] ^= edit[2];
    }
    st = tu_trainer_restore(&trainer, TU_DEFAULT_CONFIG, edited, sizeof edited);
    if (st == TU_OK) {
        return changed;
    }
    if (!changed || (st != TU_ERR_CORRUPT && st != TU_ERR_CONFIG) || tu_trainer_step(&trainer) != TU_ERR_UNINITIALIZED) {
        fail(); /* the instance's own bytes must restore; changed ones may only be refused as corrupt (or, a
                   changed configuration digest, as saved with another configuration) */
    }
    if (tu_trainer_restore(&trainer, TU_DEFAULT_CONFIG, saved, sizeof saved) != TU_OK) {
        fail();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int64_t ticks[TU_FUZZ_CHUNK];
    static int32_t segments[TU_FUZZ_CHUNK];
    static float ys[TU_FUZZ_CHUNK][TU_CH];
    tu_input in;
    uint64_t tick = 0u; /* unsigned: the harness's own arithmetic wraps instead of overflowing */
    int32_t segment = 0;
    int trusted = 1, due;
    uint8_t op;
    in.data = data;
    in.size = size;
    in.pos = 0;
    tu_trainer_init(&trainer, TU_DEFAULT_CONFIG, size);
    while (take(&in, &op, 1)) {
        tu_status st = TU_OK;
        switch (op & 7u) {
        case 0: /* push one sample */
            if (!sample(&in, &tick, &segment, ys[0])) {
                break;
            }
            st = tu_trainer_push(&trainer, (int64_t)tick, segment, ys[0], TU_CH);
            break;
        case 1: { /* push_chunk, then its due updates */
            const int count = 1 + (op >> 3);
            int k = 0;
            while (k < count && sample(&in, &tick, &segment, ys[k])) {
                ticks[k] = (int64_t)tick;
                segments[k] = segment;
                ++k;
            }
            due = -1;
            st = tu_trainer_push_chunk(&trainer, k, ticks, segments, &ys[0][0], TU_CH, &due);
            if (due < 0 || due > due_bound(k)) {
                fail();
            }
            drive(due);
            break;
        }
        case 2: { /* steps with any count, negative ones included */
            int done = -1;
            const int count = (int)(op >> 3) - 8;
            st = tu_trainer_steps(&trainer, count, &done);
            if ((count < 0) != (st == TU_ERR_ARGUMENT) || done < 0 || done > (count > 0 ? count : 0)) {
                fail();
            }
            break;
        }
        case 3:
            st = tu_trainer_step(&trainer);
            break;
        case 4:
            trusted = trusted && !restore(&in);
            break;
        case 5: { /* a sample at an arbitrary tick (a clock that jumped): one chunk, its due bounded */
            int64_t far;
            if (!take(&in, &far, sizeof far) || !sample(&in, &tick, &segment, ys[0])) {
                break;
            }
            tick = (uint64_t)far;
            due = -1;
            st = tu_trainer_push_chunk(&trainer, 1, &far, NULL, ys[0], TU_CH, &due);
            if (due < 0 || due > due_bound(1)) {
                fail();
            }
            drive(due);
            break;
        }
        case 6:
            if (op & 8u) {
                misuse();
            }
            query(trusted);
            break;
        default: /* start afresh */
            st = tu_trainer_init(&trainer, TU_DEFAULT_CONFIG, op);
            trusted = 1;
            break;
        }
        if (!is_status(st)) {
            fail();
        }
    }
    if (tu_trainer_steps(&trainer, 3, NULL) == TU_ERR_ARGUMENT) {
        fail();
    }
    query(trusted);
    return 0;
}

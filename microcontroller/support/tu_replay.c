/* Replay of stream files (see tu_replay.h). */
#include <string.h>

#include "tu_replay.h"

#define TU_CHUNK_MAX (4 * TU_TRAIN_EVERY_MAX)

typedef struct {
    int64_t ticks[TU_CHUNK_MAX];
    int32_t segments[TU_CHUNK_MAX];
    float y[TU_CHUNK_MAX * TU_CH_MAX]; /**< the samples back to back, the configuration's pushed channels each */
    int count;
} tu_chunk;

/* One trainer's replay: its file, the chunk being filled and the training tick it belongs to. */
typedef struct {
    tu_trainer *trainer;
    tu_replay_result *result;
    tu_stream_file file;
    tu_chunk chunk;
    int64_t block;
    int live;
} tu_replay_state;

/* Make `count` updates, reporting progress every `every` updates; returns the first error (or TU_OK). */
static tu_status tu_updates(tu_trainer *t, int count, tu_replay_result *r, int32_t *made,
                            tu_replay_progress progress, int32_t every, void *context)
{
    int i;
    for (i = 0; i < count; ++i) {
        const tu_status st = tu_trainer_step(t);
        if (st == TU_OK) {
            ++*made;
            if (progress != NULL && every > 0 && (r->live_updates + r->replay_updates) % every == 0) {
                progress(t, context);
            }
        } else if (st < 0) {
            r->last_error = st;
            return st;
        }
    }
    return TU_OK;
}

static void tu_flush(tu_trainer *t, tu_chunk *c, tu_replay_result *r, tu_replay_progress progress, int32_t every,
                     void *context)
{
    int due = 0;
    const tu_status st = tu_trainer_push_chunk(t, c->count, c->ticks, c->segments, c->y,
                                               TU_PUSH_CH_OF(tu_trainer_config(t)), &due);
    if (st < 0) {
        r->last_error = st;
    }
    (void)tu_updates(t, due, r, &r->live_updates, progress, every, context);
    c->count = 0;
}

/* Read records up to and including the one that completes a chunk, and push that chunk (or, at the
 * end of the file, the last one); the record that starts the next chunk stays in it. */
static void tu_replay_chunk(tu_replay_state *s, tu_replay_progress progress, int32_t every, void *context)
{
    const tu_config *cfg = tu_trainer_config(s->trainer);
    const int64_t train_every = cfg->train_every;
    const int limit = 4 * cfg->train_every;
    int64_t tick;
    int32_t segment;
    float y[TU_CH_MAX];
    int flushed = 0;
    while (!flushed) {
        s->result->file = tu_stream_file_next(&s->file, &tick, &segment, y);
        if (s->chunk.count > 0 && (s->result->file != TU_FILE_OK || tick / train_every != s->block
                                   || s->chunk.count == limit)) {
            tu_flush(s->trainer, &s->chunk, s->result, progress, every, context);
            flushed = 1;
        }
        if (s->result->file != TU_FILE_OK) {
            s->live = 0;
            return;
        }
        s->block = tick / train_every;
        s->chunk.ticks[s->chunk.count] = tick;
        s->chunk.segments[s->chunk.count] = segment;
        memcpy(s->chunk.y + s->chunk.count++ * TU_PUSH_CH_OF(cfg), y, (size_t)TU_PUSH_CH_OF(cfg) * sizeof(float));
    }
}

/* The reservoir replay after the stream, to max_updates updates. */
static void tu_replay_reservoir(tu_trainer *trainer, int32_t max_updates, tu_replay_result *result,
                               tu_replay_progress progress, int32_t every, void *context)
{
    tu_report rep;
    tu_trainer_report(trainer, &rep);
    while (rep.updates < max_updates) {
        /* stop at an error: too few jets, a failed calibration (the trainer stopped), ... */
        if (tu_updates(trainer, (int)(max_updates - rep.updates), result, &result->replay_updates, progress, every,
                       context) != TU_OK) {
            break;
        }
        tu_trainer_report(trainer, &rep);
        if (rep.counters.skipped_updates > (uint64_t)max_updates) {
            break; /* every update is skipped: nothing will change */
        }
    }
}

tu_file_status tu_replay_many(tu_trainer *const *trainers, const char *const *paths, int count,
                              const int32_t *max_updates, tu_replay_result *results, tu_replay_progress progress,
                              int32_t every, void *context)
{
    static tu_replay_state states[TU_REPLAY_MAX]; /* static: chunks are too large for a small stack */
    tu_file_status first = TU_FILE_END;
    int k, live = 0;
    if (count < 1 || count > TU_REPLAY_MAX) {
        return TU_FILE_MISSING;
    }
    for (k = 0; k < count; ++k) {
        tu_replay_state *s = &states[k];
        memset(&results[k], 0, sizeof results[k]);
        s->trainer = trainers[k];
        s->result = &results[k];
        s->chunk.count = 0;
        s->block = 0;
        s->live = 0;
        s->file.file = NULL;
        s->file.records = 0;
        results[k].file =
            tu_trainer_config(trainers[k]) == NULL
                ? TU_FILE_MISSING
                : tu_stream_file_open(&s->file, paths[k], TU_PUSH_CH_OF(tu_trainer_config(trainers[k])));
        s->live = results[k].file == TU_FILE_OK;
        live += s->live;
    }
    while (live > 0) {  /* one chunk of each live stream in turn */
        live = 0;
        for (k = 0; k < count; ++k) {
            if (states[k].live) {
                tu_replay_chunk(&states[k], progress, every, context);
                live += states[k].live;
            }
        }
    }
    for (k = 0; k < count; ++k) {
        tu_replay_state *s = &states[k];
        results[k].records = s->file.records;
        tu_stream_file_close(&s->file);
        if (results[k].file == TU_FILE_END) {
            tu_replay_reservoir(s->trainer, max_updates[k], &results[k], progress, every, context);
        } else if (first == TU_FILE_END) {
            first = results[k].file;
        }
    }
    return first;
}

tu_file_status tu_replay(tu_trainer *trainer, const char *path, int32_t max_updates, tu_replay_result *result,
                         tu_replay_progress progress, int32_t every, void *context)
{
    tu_trainer *const trainers[1] = {trainer};
    const char *const paths[1] = {path};
    (void)tu_replay_many(trainers, paths, 1, &max_updates, result, progress, every, context);
    return result->file;
}

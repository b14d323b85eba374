/* Replay of a stream file (see tu_replay.h). */
#include <string.h>

#include "tu_replay.h"

#define TU_CHUNK_MAX (4 * TU_TRAIN_EVERY)

typedef struct {
    int64_t ticks[TU_CHUNK_MAX];
    int32_t segments[TU_CHUNK_MAX];
    float y[TU_CHUNK_MAX][TU_CH];
    int count;
} tu_chunk;

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
    const tu_status st = tu_trainer_push_chunk(t, c->count, c->ticks, c->segments, &c->y[0][0], TU_CH, &due);
    if (st < 0) {
        r->last_error = st;
    }
    (void)tu_updates(t, due, r, &r->live_updates, progress, every, context);
    c->count = 0;
}

tu_file_status tu_replay(tu_trainer *trainer, const char *path, int32_t max_updates, tu_replay_result *result,
                         tu_replay_progress progress, int32_t every, void *context)
{
    static tu_chunk chunk; /* static: a chunk is too large for a small stack */
    tu_stream_file file;
    int64_t tick, block = 0;
    int32_t segment;
    float y[TU_CH];
    tu_report rep;
    memset(result, 0, sizeof *result);
    chunk.count = 0;
    result->file = tu_stream_file_open(&file, path);
    if (result->file != TU_FILE_OK) {
        return result->file;
    }
    for (;;) {
        result->file = tu_stream_file_next(&file, &tick, &segment, y);
        if (chunk.count > 0 && (result->file != TU_FILE_OK || tick / TU_TRAIN_EVERY != block
                                || chunk.count == TU_CHUNK_MAX)) {
            tu_flush(trainer, &chunk, result, progress, every, context);
        }
        if (result->file != TU_FILE_OK) {
            break;
        }
        block = tick / TU_TRAIN_EVERY;
        chunk.ticks[chunk.count] = tick;
        chunk.segments[chunk.count] = segment;
        memcpy(chunk.y[chunk.count++], y, sizeof y);
    }
    result->records = file.records;
    tu_stream_file_close(&file);
    if (result->file != TU_FILE_END) {
        return result->file;
    }
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
    return result->file;
}

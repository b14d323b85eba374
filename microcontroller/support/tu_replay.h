/* Train on a recorded stream file as the live trainer would (host tests, firmware replay).
 *
 * Samples are pushed in chunks of one training tick (the samples whose tick // TU_TRAIN_EVERY
 * is equal), the due updates are made after each chunk, and after the end of the stream the
 * reservoir is replayed until `max_updates` updates (Algorithm 1, line 19). The Python drivers
 * (microcontroller.golden.reference_run, the C backend module) chunk the same way. */
#ifndef TU_REPLAY_H
#define TU_REPLAY_H

#include "tu_stream_file.h"
#include "tu_trainer.h"

/** What a replay did. */
typedef struct {
    tu_file_status file;      /**< TU_FILE_END after a complete file, else why reading stopped */
    uint32_t records;         /**< records read */
    int32_t live_updates;     /**< updates made while the stream was live */
    int32_t replay_updates;   /**< updates made on the reservoir after it */
    tu_status last_error;     /**< the last error a push or an update returned (TU_OK if none) */
} tu_replay_result;

/** Called after every `every` updates (may be NULL). */
typedef void (*tu_replay_progress)(const tu_trainer *trainer, void *context);

/** Replay the stream file at `path` into an initialized trainer, then update on the reservoir
 * until `max_updates` updates in all. A file that cannot be read completely stops the replay
 * (result->file says why; no reservoir replay then). Returns result->file. */
tu_file_status tu_replay(tu_trainer *trainer, const char *path, int32_t max_updates, tu_replay_result *result,
                         tu_replay_progress progress, int32_t every, void *context);

#endif /* TU_REPLAY_H */

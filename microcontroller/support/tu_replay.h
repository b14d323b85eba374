/* Train on recorded stream files as the live trainer would (host tests, firmware replay).
 *
 * Samples are pushed in chunks of one training tick (the samples whose tick // train_every is
 * equal, train_every of the trainer's configuration), the due updates are made after each chunk,
 * and after the end of the stream the reservoir is replayed until `max_updates` updates
 * (Algorithm 1, line 19). The Python drivers (microcontroller.golden.reference_run, the C backend
 * module) chunk the same way. tu_replay_many drives several trainers (of one image, each with its
 * own configuration and file) chunk by chunk in turn, as a firmware with a trainer per axis would. */
#ifndef TU_REPLAY_H
#define TU_REPLAY_H

#include "tu_stream_file.h"
#include "tu_trainer.h"

/** The most trainers tu_replay_many drives at once: one per configuration of the build (its static
 * replay states are sized by it, so a one-configuration firmware keeps one). */
#define TU_REPLAY_MAX TU_CONFIG_COUNT

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

/** tu_replay for `count` (1 .. TU_REPLAY_MAX) initialized trainers, trainer k on the file paths[k]
 * (of its configuration's channel count): one chunk of each live stream in turn, then each
 * trainer's reservoir replay to max_updates[k]. Each trainer's pushes and updates are those of
 * tu_replay on its own. Returns TU_FILE_END if every file was read completely, else the first
 * other status (results[k].file says which); TU_FILE_MISSING for a count out of range. */
tu_file_status tu_replay_many(tu_trainer *const *trainers, const char *const *paths, int count,
                              const int32_t *max_updates, tu_replay_result *results, tu_replay_progress progress,
                              int32_t every, void *context);

#endif /* TU_REPLAY_H */

/* Reading recorded sensor streams and writing training results (host and firmware, stdio).
 * Formats: microcontroller/files.py. Not part of the trainer library, which does no I/O. */
#ifndef TU_STREAM_FILE_H
#define TU_STREAM_FILE_H

#include <stdint.h>
#include <stdio.h>

#include "tu_trainer.h"

/** Why reading stopped. */
typedef enum {
    TU_FILE_OK = 0,         /**< a record was read */
    TU_FILE_END = 1,        /**< clean end of file */
    TU_FILE_MISSING = -1,   /**< the file could not be opened */
    TU_FILE_BAD_MAGIC = -2, /**< not a stream file */
    TU_FILE_CHANNELS = -3,  /**< its channel count is not the one asked for */
    TU_FILE_TRUNCATED = -4  /**< the file ends inside a record */
} tu_file_status;

/** An open stream file. */
typedef struct {
    FILE *file;
    uint32_t records;  /**< records read so far */
    int channels;      /**< values a record */
} tu_stream_file;

/** One-line description of a file status. */
const char *tu_file_status_string(tu_file_status status);

/** Open and check the header: records of `channels` values (1 .. TU_CH_MAX; a trainer's configuration's ch). */
tu_file_status tu_stream_file_open(tu_stream_file *self, const char *path, int channels);

/** Read the next record (channels values into y). */
tu_file_status tu_stream_file_next(tu_stream_file *self, int64_t *tick, int32_t *segment, float *y);

/** Close (safe to call twice). */
void tu_stream_file_close(tu_stream_file *self);

/** Write the EMA and raw weights (its configuration's num_params, then theta of trained physical parameters) and
 * the report of a trainer; 0 on success. */
int tu_result_file_write(const char *path, const tu_trainer *trainer);

#if TU_PHYSICAL
/** Append to a result file the trained physical parameters' block (microcontroller/files.py read_physical): "PHYS",
 * uint32 P, float32 standard errors[P] (tu_trainer_standard_errors, theta's units, at the exported weights), then the
 * end-of-run refit's float32 |r|^2 per jet before and after and int32 evaluations and converged (`refit` NULL: no
 * refit, NaN, NaN, 0, 0); 0 on success. The trainer's gradient buffer is the errors' scratch. */
int tu_result_file_append_physical(const char *path, tu_trainer *trainer, const tu_refit_report *refit);
#endif

#endif /* TU_STREAM_FILE_H */

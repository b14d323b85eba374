/* Named arrays of a golden file (microcontroller/files.py write_golden), for the host tests. */
#ifndef TU_GOLDEN_H
#define TU_GOLDEN_H

#include <stdint.h>

/** One array: float32 values in f or int64 values in q (the other is NULL). */
typedef struct {
    const char *name;
    uint32_t count;
    const float *f;
    const int64_t *q;
} tu_golden_array;

/** Load a golden file (kept in memory until the process ends); 0 on success. */
int tu_golden_load(const char *path);

/** The array named `name`; aborts the test run with a message when it is missing. */
tu_golden_array tu_golden(const char *name);

#endif /* TU_GOLDEN_H */

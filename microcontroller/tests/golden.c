/* Golden-file reader for the host tests (uses malloc: it is not part of the library). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden.h"

#define TU_GOLDEN_MAX 256

static tu_golden_array arrays[TU_GOLDEN_MAX];
static int n_arrays;

static uint32_t u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int tu_golden_load(const char *path)
{
    FILE *f = fopen(path, "rb");
    unsigned char *data;
    long size, pos = 8;
    if (f == NULL) {
        return -1;
    }
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fseek(f, 0, SEEK_SET);
    data = malloc((size_t)size);
    if (data == NULL || fread(data, 1, (size_t)size, f) != (size_t)size || size < 8 || memcmp(data, "TUGOLD01", 8)) {
        fclose(f);
        return -1;
    }
    fclose(f);
    while (pos < size && n_arrays < TU_GOLDEN_MAX) {
        const uint32_t len = u32(data + pos);
        char *name = malloc(len + 1u);
        tu_golden_array *a = &arrays[n_arrays++];
        unsigned char kind;
        memcpy(name, data + pos + 4, len);
        name[len] = '\0';
        kind = data[pos + 4 + (long)len];
        a->name = name;
        a->count = u32(data + pos + 5 + (long)len);
        pos += 9 + (long)len;
        {   /* a copy of its own, aligned for its type */
            const size_t bytes = (size_t)a->count * (kind == 'f' ? 4u : 8u);
            void *copy = malloc(bytes > 0 ? bytes : 1u);
            memcpy(copy, data + pos, bytes);
            a->f = kind == 'f' ? (const float *)copy : NULL;
            a->q = kind == 'q' ? (const int64_t *)copy : NULL;
            pos += (long)bytes;
        }
    }
    free(data);
    return 0;
}

tu_golden_array tu_golden(const char *name)
{
    int i;
    for (i = 0; i < n_arrays; ++i) {
        if (strcmp(arrays[i].name, name) == 0) {
            return arrays[i];
        }
    }
    fprintf(stderr, "golden array %s is missing\n", name);
    exit(2);
}

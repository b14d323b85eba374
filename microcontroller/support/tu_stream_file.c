/* Stream and result files (see tu_stream_file.h). */
#include <math.h>
#include <string.h>

#include "tu_stream_file.h"

static int tu_read_exact(FILE *f, void *buf, size_t n, size_t *got)
{
    *got = fread(buf, 1, n, f);
    return *got == n;
}

const char *tu_file_status_string(tu_file_status status)
{
    switch (status) {
    case TU_FILE_OK:
        return "ok";
    case TU_FILE_END:
        return "end of file";
    case TU_FILE_MISSING:
        return "the stream file could not be opened";
    case TU_FILE_BAD_MAGIC:
        return "not a torch-ude stream file (bad magic)";
    case TU_FILE_CHANNELS:
        return "the stream file's channel count differs from TU_CH (the channels of the trainer's configuration)";
    case TU_FILE_TRUNCATED:
        return "the stream file ends inside a record (truncated)";
    }
    return "unknown file status";
}

tu_file_status tu_stream_file_open(tu_stream_file *self, const char *path, int channels)
{
    unsigned char header[16];
    size_t got;
    uint32_t n;
    self->records = 0;
    self->channels = channels;
    if (channels < 1 || channels > TU_CH_MAX) {
        self->file = NULL;
        return TU_FILE_CHANNELS;
    }
    self->file = fopen(path, "rb");
    if (self->file == NULL) {
        return TU_FILE_MISSING;
    }
    if (!tu_read_exact(self->file, header, sizeof header, &got) || memcmp(header, "TUSTRM01", 8) != 0) {
        tu_stream_file_close(self);
        return TU_FILE_BAD_MAGIC;
    }
    n = (uint32_t)header[8] | (uint32_t)header[9] << 8 | (uint32_t)header[10] << 16 | (uint32_t)header[11] << 24;
    if (n != (uint32_t)channels) {
        tu_stream_file_close(self);
        return TU_FILE_CHANNELS;
    }
    return TU_FILE_OK;
}

tu_file_status tu_stream_file_next(tu_stream_file *self, int64_t *tick, int32_t *segment, float *y)
{
    unsigned char rec[12 + 4 * TU_CH_MAX];
    const size_t size = 12 + 4 * (size_t)self->channels;
    size_t got;
    uint64_t t = 0;
    uint32_t s = 0, bits;
    int i, c;
    if (self->file == NULL) {
        return TU_FILE_END;
    }
    if (!tu_read_exact(self->file, rec, size, &got)) {
        return got == 0 ? TU_FILE_END : TU_FILE_TRUNCATED;
    }
    for (i = 7; i >= 0; --i) {
        t = t << 8 | rec[i];
    }
    for (i = 11; i >= 8; --i) {
        s = s << 8 | rec[i];
    }
    *tick = (int64_t)t;
    *segment = (int32_t)s;
    for (c = 0; c < self->channels; ++c) {
        const unsigned char *b = rec + 12 + 4 * c;
        bits = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
        memcpy(&y[c], &bits, sizeof bits);
    }
    ++self->records;
    return TU_FILE_OK;
}

void tu_stream_file_close(tu_stream_file *self)
{
    if (self->file != NULL) {
        fclose(self->file);
        self->file = NULL;
    }
}

int tu_result_file_write(const char *path, const tu_trainer *trainer)
{
    static const char magic[8] = {'T', 'U', 'R', 'S', 'L', 'T', '0', '1'};
    const tu_config *cfg = tu_trainer_config(trainer);
    const int n = cfg != NULL ? cfg->num_params + TU_NUM_PHYSICAL_OF(cfg) : 0;  /* the network's, then theta */
    const uint32_t sizes[2] = {(uint32_t)n, (uint32_t)sizeof(tu_report)};
    float weights[TU_WEIGHTS_MAX];
    tu_report report;
    FILE *f;
    int ok;
    if (tu_trainer_report(trainer, &report) != TU_OK) {
        return -1;
    }
    f = fopen(path, "wb");
    if (f == NULL) {
        return -1;
    }
    ok = fwrite(magic, 1, sizeof magic, f) == sizeof magic && fwrite(sizes, sizeof sizes[0], 2, f) == 2;
    ok = ok && tu_trainer_weights(trainer, 1, weights, n) == TU_OK
         && fwrite(weights, sizeof(float), (size_t)n, f) == (size_t)n;
    ok = ok && tu_trainer_weights(trainer, 0, weights, n) == TU_OK
         && fwrite(weights, sizeof(float), (size_t)n, f) == (size_t)n;
    ok = ok && fwrite(&report, sizeof report, 1, f) == 1;
#if TU_ENVELOPE
    {  /* the envelope's span: its channel count, then low and high */
        const uint32_t ch = (uint32_t)cfg->ch;
        float low[TU_CH_MAX], high[TU_CH_MAX];
        ok = ok && tu_trainer_span(trainer, low, high, cfg->ch) == TU_OK && fwrite(&ch, sizeof ch, 1, f) == 1
             && fwrite(low, sizeof(float), ch, f) == ch && fwrite(high, sizeof(float), ch, f) == ch;
    }
#endif
    return fclose(f) == 0 && ok ? 0 : -1;
}

#if TU_PHYSICAL
int tu_result_file_append_physical(const char *path, tu_trainer *trainer, const tu_refit_report *refit)
{
    static const char tag[4] = {'P', 'H', 'Y', 'S'};
    const tu_config *cfg = tu_trainer_config(trainer);
    const tu_refit_report none = {NAN, NAN, 0, 0};
    const tu_refit_report *r = refit != NULL ? refit : &none;
    const uint32_t p = cfg != NULL ? (uint32_t)cfg->num_physical : 0u;
    float se[TU_PHYSICAL_MAX];
    FILE *f;
    int ok;
    if (p == 0u || tu_trainer_standard_errors(trainer, se, (int)p) != TU_OK) {
        return -1;
    }
    f = fopen(path, "ab");
    if (f == NULL) {
        return -1;
    }
    ok = fwrite(tag, 1, sizeof tag, f) == sizeof tag && fwrite(&p, sizeof p, 1, f) == 1
         && fwrite(se, sizeof(float), p, f) == p && fwrite(&r->loss_before, sizeof(float), 1, f) == 1
         && fwrite(&r->loss_after, sizeof(float), 1, f) == 1 && fwrite(&r->evaluations, sizeof(int32_t), 1, f) == 1
         && fwrite(&r->converged, sizeof(int32_t), 1, f) == 1;
    return fclose(f) == 0 && ok ? 0 : -1;
}
#endif

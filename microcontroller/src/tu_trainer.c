/* The streaming trainer of Algorithm 1: stream ingestion, calibration hand-off, windows,
 * reservoir, updates. Float32 (the reservoir float32 or float16), static memory; see tu_trainer.h. */
#define TU_LIBRARY 1 /* the library reads its configuration from a tu_config, no single-configuration macro */
#include "tu_fp.h" /* first: no fused multiply-add in the library */

#include <float.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "tu_half.h"
#include "tu_math.h"
#include "tu_mlp.h"
#include "tu_optim.h"
#include "tu_savgol.h"
#include "tu_trainer.h"

#define TU_MAGIC 0x54554445u  /* "TUDE" */
#define TU_CFG(self) ((self)->config.config)

/* A stopped trainer's state: 0 calibrating, 1 calibrated, or the failed calibration's status. */
static int tu_calibration_state_valid(int32_t calibrated)
{
    return calibrated == 0 || calibrated == 1 || tu_status_is_calibration((tu_status)calibrated);
}

/* Every index, count, state and tap spacing of an instance in range: what a damaged checkpoint
 * could otherwise turn into an access out of bounds, a division by zero or an overflow. */
static int tu_indices_valid(const tu_trainer *self)
{
    const tu_config *cfg = TU_CFG(self);
    const int m = self->cal.m;
    return tu_calibration_state_valid(self->calibrated) && (self->have_last == 0 || self->have_last == 1)
           && self->cal_fill >= 0 && self->cal_fill <= cfg->cal_len
           && (self->calibrated != 0 || self->cal_fill < cfg->cal_len) && self->ring_head >= 0
           && self->ring_head < cfg->ring_len && self->gate.head >= 0 && self->gate.head < cfg->gate_history
           && self->gate.count >= 0 && self->gate.count <= cfg->gate_history && self->adam_step >= 0
           && (self->calibrated != 1 || (m >= 1 && m <= cfg->m_max && (cfg->m_fixed == 0 || m == cfg->m_fixed)));
}

#if TU_VELOCITY
/* The velocity derivative's ring index and count in range (a configuration without one keeps them 0). */
static int tu_velocity_valid(const tu_trainer *self)
{
    const tu_config *cfg = TU_CFG(self);
    const int len = cfg->positions > 0 ? 2 * cfg->velocity_half_width + 2 : 1;
    return self->vel_head >= 0 && self->vel_head < len && self->vel_count >= 0
           && self->vel_count <= (cfg->positions > 0 ? len + 1 : 0);
}
#define TU_VELOCITY_VALID(self) tu_velocity_valid(self)
#else
#define TU_VELOCITY_VALID(self) 1
#endif

static tu_status tu_check(const tu_trainer *self)
{
    if (self == NULL) {
        return TU_ERR_NULL;
    }
    if (self->magic != TU_MAGIC || TU_CFG(self) == NULL) {
        return TU_ERR_UNINITIALIZED;
    }
    return tu_indices_valid(self) ? TU_OK : TU_ERR_CORRUPT;
}

/* All n values finite (and >= low: 0 for second moments, the smallest positive float for scales). */
static int tu_all_finite(const float *v, int n, float low)
{
    int i;
    for (i = 0; i < n; ++i) {
        if (!tu_finite(v[i]) || v[i] < low) {
            return 0;
        }
    }
    return 1;
}

/* The values a restored instance computes with: weights, moments, scales and, once calibrated,
 * the calibration's scales, tap interval, lambda2 and weight decay. */
static int tu_values_valid(const tu_trainer *self)
{
    const tu_config *cfg = TU_CFG(self);
    const tu_calibration *cal = &self->cal;
    const int ch = cfg->ch, p = cfg->num_params + TU_NUM_PHYSICAL_OF(cfg);
    const int calibration = self->calibrated != 1
                            || (tu_all_finite(cal->s1, ch, FLT_MIN) && tu_all_finite(cal->s2, ch, FLT_MIN)
                                && tu_all_finite(cal->x_rms, ch, FLT_MIN)
                                && tu_all_finite(&cal->dt_eff, 1, FLT_MIN) && tu_all_finite(&cal->lambda2, 1, 0.0f)
                                && tu_all_finite(&cal->weight_decay, 1, 0.0f));
#if TU_ENVELOPE
    int c;
    for (c = 0; c < TU_CH_MAX; ++c) {  /* +-Inf before the first jet and in the padding columns, else low <= high */
        const int empty = self->seen == 0u || c >= ch;
        if (empty ? self->span_low[c] != INFINITY || self->span_high[c] != -INFINITY
                  : !tu_finite(self->span_low[c]) || !tu_finite(self->span_high[c])
                        || !(self->span_low[c] <= self->span_high[c])) {
            return 0;
        }
    }
#endif
#if TU_PHYSICAL
    int k;
    for (k = 0; k < cfg->num_physical; ++k) {  /* theta inside its bounds (NaN fails too) */
        const float t = self->params[cfg->num_params + k];
        if (!(t >= cfg->theta_low[k] && t <= cfg->theta_high[k])) {
            return 0;
        }
    }
#endif
    return calibration && tu_all_finite(self->params, p, -INFINITY) && tu_all_finite(self->ema, p, -INFINITY)
           && tu_all_finite(self->exp_avg, p, -INFINITY) && tu_all_finite(self->exp_avg_sq, p, 0.0f)
           && tu_all_finite(self->in_scale, ch, FLT_MIN) && tu_all_finite(self->out_scale, cfg->n, FLT_MIN);
}

static int tu_stride(const tu_trainer *self)
{
    return TU_CFG(self)->stride > 0 ? TU_CFG(self)->stride : self->cal.m;
}

static int tu_fill(const tu_trainer *self)
{
    const int capacity = TU_CFG(self)->capacity;
    return self->seen < (uint64_t)capacity ? (int)self->seen : capacity;
}

/* n / d and n % d for a divisor 1 <= d <= TU_DIVISOR_MAX (tick spacings: the configuration's
 * train_every and window stride), by long division in 16-bit digits: four 32-bit divisions, where a
 * 64-bit division would be a library call on a 32-bit core (a single-configuration build used to
 * divide by compile-time constants, which needs neither). */
static uint64_t tu_udiv_small(uint64_t n, uint32_t d, uint32_t *rem)
{
    uint64_t q = 0u;
    uint32_t r = 0u;
    int shift;
    for (shift = 48; shift >= 0; shift -= 16) {
        const uint32_t cur = r << 16 | (uint32_t)(n >> shift & 0xFFFFu);  /* r < d <= 2^16: no overflow */
        q = q << 16 | (uint64_t)(cur / d);
        r = cur % d;
    }
    *rem = r;
    return q;
}

/* floor(a / b) for 1 <= b <= TU_DIVISOR_MAX, for every int64_t a. */
static int64_t tu_floor_div(int64_t a, int64_t b)
{
    uint32_t r;
    uint64_t q;
    if (a >= 0 && a <= (int64_t)UINT32_MAX) {  /* a tick of the first 49 days at 1 kHz: one 32-bit division */
        return (int64_t)((uint32_t)a / (uint32_t)b);
    }
    if (a >= 0) {
        return (int64_t)tu_udiv_small((uint64_t)a, (uint32_t)b, &r);
    }
    q = tu_udiv_small(0u - (uint64_t)a, (uint32_t)b, &r);  /* |a|, also for INT64_MIN */
    return q == 0u ? -1 : -(int64_t)(q - 1u) - 1 - (r != 0u);
}

/* a % b == 0 for 1 <= b <= TU_DIVISOR_MAX, for every int64_t a. */
static int tu_divides(int64_t a, int b)
{
    uint32_t r;
    if (a >= 0 && a <= (int64_t)UINT32_MAX) {
        return (uint32_t)a % (uint32_t)b == 0u;
    }
    (void)tu_udiv_small(a >= 0 ? (uint64_t)a : 0u - (uint64_t)a, (uint32_t)b, &r);
    return r == 0u;
}

/* The learning rate of the update after `step` updates (cosine over TU_MAX_STEPS, then its last
 * rate; or constant). */
static float tu_trainer_lr(const tu_config *cfg, int64_t step)
{
    return cfg->schedule_cosine ? tu_cosine_lr(step, cfg->max_steps, cfg->lr, cfg->lr_min) : cfg->lr;
}

size_t tu_trainer_size(void)
{
    return sizeof(tu_trainer);
}

size_t tu_report_size(void)
{
    return sizeof(tu_report);
}

tu_status tu_trainer_init(tu_trainer *self, const tu_config *config, uint64_t seed)
{
    tu_status st;
    int c;
    if (self == NULL) {
        return TU_ERR_NULL;
    }
    memset(self, 0, sizeof *self);
    st = tu_config_check(config);
    if (st != TU_OK) {  /* self stays uninitialized (magic 0) */
        return st;
    }
    self->config.config = config;
    self->config_digest = tu_config_digest(config->state_hash);
    tu_prng_seed(&self->reservoir_rng, seed, TU_STREAM_RESERVOIR);
    tu_prng_seed(&self->batch_rng, seed, TU_STREAM_BATCH);
    memcpy(self->params, config->model->init_params, sizeof config->model->init_params); /* theta: 0 */
    memcpy(self->ema, self->params, sizeof self->ema);
    for (c = 0; c < config->ch; ++c) {
        self->in_scale[c] = config->pretrained ? config->model->in_scale[c] : 1.0f;
    }
    for (c = 0; c < config->n; ++c) {
        self->out_scale[c] = config->pretrained ? config->model->out_scale[c] : 1.0f;
    }
    self->last_loss = self->last_loss_r1 = self->last_loss_r2 = self->last_grad_norm = NAN;
#if TU_ENVELOPE
    for (c = 0; c < TU_CH_MAX; ++c) {
        self->span_low[c] = INFINITY;
        self->span_high[c] = -INFINITY;
    }
#endif
    tu_gate_reset(&self->gate);
    self->magic = TU_MAGIC;
    return TU_OK;
}

tu_status tu_trainer_restore(tu_trainer *self, const tu_config *config, const void *bytes, size_t size)
{
    tu_status st;
    if (self == NULL || bytes == NULL || config == NULL) {
        return TU_ERR_NULL;
    }
    if (size != sizeof *self) {
        return TU_ERR_ARGUMENT;
    }
    st = tu_config_check(config);
    if (st != TU_OK) {
        self->magic = 0u;
        return st;
    }
    memcpy(self, bytes, sizeof *self);
    self->config.bits = 0u;
    self->config.config = config;  /* the pointer of the image that saved it means nothing here */
    if (self->magic == TU_MAGIC && self->config_digest != tu_config_digest(config->state_hash)) {
        self->magic = 0u;  /* a checkpoint of another configuration */
        return TU_ERR_CONFIG;
    }
    if (self->magic != TU_MAGIC || !tu_indices_valid(self) || !TU_VELOCITY_VALID(self) || !tu_values_valid(self)) {
        self->magic = 0u;  /* every call now returns TU_ERR_UNINITIALIZED until init */
        return TU_ERR_CORRUPT;
    }
    return TU_OK;
}

const tu_config *tu_trainer_config(const tu_trainer *self)
{
    return self != NULL && self->magic == TU_MAGIC ? TU_CFG(self) : NULL;
}

/* The newest sample in the record or the ring: the last arrived one (bridged samples precede it). */
static const float *tu_newest(const tu_trainer *self)
{
    if (!self->calibrated) {
        return self->TU_RECORD_MEMBER.y[self->cal_fill > 0 ? self->cal_fill - 1 : TU_CFG(self)->cal_len - 1];
    }
    return self->ring[(self->ring_head + TU_CFG(self)->ring_len - 1) % TU_CFG(self)->ring_len];
}

static void tu_ring_push(tu_trainer *self, const float *y, int brk)
{
    const int len = TU_CFG(self)->ring_len;
    if (TU_CFG(self)->ch == TU_CH_MAX) {  /* a constant size: inlined */
        memcpy(self->ring[self->ring_head], y, sizeof self->ring[0]);
    } else {
        memcpy(self->ring[self->ring_head], y, (size_t)TU_CFG(self)->ch * sizeof(float));
    }
    self->ring_head = (self->ring_head + 1) % len;
    self->run = brk ? 1u : (self->run < (uint32_t)len ? self->run + 1u : self->run);
}

/* Samples averaged per tap: m for box-averaged taps, else 1. */
static int tu_bin(const tu_trainer *self)
{
    return TU_CFG(self)->tap_average ? self->cal.m : 1;
}

/* The SG rows and projection of the stream's windows (torch_ude.stream._windows_estimator). */
static const float (*tu_window_rows(const tu_trainer *self))[TU_TAPS_MAX]
{
    const tu_config *cfg = TU_CFG(self);
    const int b = tu_bin(self);
    return b > 1 ? cfg->model->box_rows[(b < cfg->box_tables ? b : cfg->box_tables) - 1] : cfg->model->sg_rows;
}

static const float (*tu_window_projection(const tu_trainer *self))[TU_TAPS_MAX]
{
    const tu_config *cfg = TU_CFG(self);
    const int b = tu_bin(self);
    return b > 1 ? cfg->model->box_projection[(b < cfg->box_tables ? b : cfg->box_tables) - 1]
                 : cfg->model->sg_projection;
}

#if TU_CAL_REPLAY
static void tu_window(tu_trainer *self);
#endif

/* Gate warm-up, ring and loss set-up once the record is calibrated (torch_ude.stream); with calibration_replay
 * the record's windows then (tu_trainer.h). */
static void tu_start_streaming(tu_trainer *self)
{
    const tu_config *cfg = TU_CFG(self);
    const tu_cal_record *rec = &self->TU_RECORD_MEMBER;
    const int len = cfg->cal_len, ch = cfg->ch, n_taps = cfg->taps;
    const int m = self->cal.m, b = tu_bin(self), span = (n_taps - 1) * m + b - 1, s = tu_stride(self);
    const unsigned last_key = rec->flags[len - 1] & TU_FLAG_KEY;
    int start, k, c, j, i;
    /* warm the running median on the record's windows; the last gate_history remain */
    tu_gate_reset(&self->gate);
    for (start = 0; start + span < len; start += s) {
        float taps[TU_CH_MAX][TU_TAPS_MAX], misfit[TU_CH_MAX], rms[TU_CH_MAX];
        int ok = (rec->flags[start] & TU_FLAG_KEY) == (rec->flags[start + span] & TU_FLAG_KEY);
        for (j = 0; j < n_taps && ok; ++j) {
            for (c = 0; c < ch; ++c) {  /* a box tap: the mean of the b samples from start + j m on */
                float sum = rec->y[start + j * m][c];
                for (i = 1; i < b; ++i) {
                    sum += rec->y[start + j * m + i][c];
                }
                taps[c][j] = b > 1 ? sum / (float)b : sum;
                ok = ok && tu_finite(taps[c][j]);
            }
        }
        if (ok) {
            tu_savgol_misfit_with(cfg, tu_window_projection(self), &taps[0][0], misfit, rms);
            tu_gate_record(&self->gate, cfg, misfit);
        }
    }
    /* the ring starts with the record's last span samples */
    self->ring_head = 0;
    self->run = 0;
    for (k = len - 1; k >= 0 && (rec->flags[k] & TU_FLAG_KEY) == last_key; --k) {
        ++self->run;
    }
    for (k = len - span; k < len; ++k) {  /* (span includes a box tap's b - 1 older samples) */
        memcpy(self->ring[self->ring_head], rec->y[k], sizeof self->ring[0]);
        self->ring_head = (self->ring_head + 1) % cfg->ring_len;
    }
    for (c = 0; c < ch && !cfg->pretrained; ++c) {  /* the inputs' x_rms is the network's input scale */
        self->in_scale[c] = self->cal.x_rms[c];
    }
    for (c = 0; c < cfg->n && !cfg->pretrained; ++c) {
        self->out_scale[c] = self->cal.s1[c];
    }
    self->seen = 0;  /* the record's memory becomes the reservoir */
    self->calibrated = 1;
#if TU_CAL_REPLAY
    if (cfg->calibration_replay) {  /* the record streams again from an empty ring (torch_ude.stream._stream) */
        self->ring_head = 0;
        self->run = 0;
        for (k = 0; k < len; ++k) {
            const int brk = k == 0 || (rec->flags[k] & TU_FLAG_KEY) != (rec->flags[k - 1] & TU_FLAG_KEY);
            tu_ring_push(self, rec->y[k], brk);
            if (k >= span && tu_divides(self->cal_ticks[k], s)) {
                tu_window(self);
            }
        }
    }
#endif
}

/* The stored form of a jet (float32 storage: the jet itself). Float16 storage: each value divided by
 * its channel's x_rms and rounded to binary16 into `out` (torch_ude.reservoir.stored_jets); *finite
 * becomes 0 when one overflows binary16 (the window then counts as nonfinite). Columns ch ..
 * TU_CH_MAX - 1 are zero. */
static const tu_jet_value *tu_reservoir_form(const tu_trainer *self, const float jet[3][TU_CH_MAX],
                                             tu_jet_value out[TU_JET_ROWS_MAX][TU_CH_MAX], int *finite)
{
#if TU_RESERVOIR_HALF
    const int ch = TU_CFG(self)->ch;
    int r, c;
    for (r = 0; r < 3; ++r) {  /* every row, as the reference checks them, though a 2-row jet keeps two */
        for (c = 0; c < ch; ++c) {
            const uint16_t half = tu_half_from_float(jet[r][c] / self->cal.x_rms[c]);
            *finite = *finite && (half & 0x7C00u) != 0x7C00u;
            if (r < TU_JET_ROWS_MAX) {
                out[r][c] = half;
            }
        }
        for (c = ch; c < TU_CH_MAX && r < TU_JET_ROWS_MAX; ++c) {
            out[r][c] = 0u;
        }
    }
    return &out[0][0];
#else
    (void)self, (void)out, (void)finite;
    return &jet[0][0];
#endif
}

/* Slot k's jet as floats (float16 storage: each half's value times its channel's x_rms, `scale`, which
 * the update copies once; a stored half is never NaN or Inf, tu_reservoir_form), rows TU_CH_MAX apart; the
 * pointer is into the reservoir (float32 storage) or into `buffer`. With TU_CH_MAX even, every row starts
 * 4-byte aligned (the reservoir shares a union with floats), and two columns decode at once. */
static const float *tu_reservoir_load(const tu_trainer *self, uint32_t k, const float scale[TU_CH_MAX],
                                      float buffer[TU_JET_ROWS_MAX][TU_CH_MAX])
{
#if TU_RESERVOIR_HALF
    const uint16_t(*slot)[TU_CH_MAX] = self->mem.reservoir[k];
    int c;
#if TU_CH_MAX % 2 == 0
    for (c = 0; c < TU_CH_MAX; c += 2) {  /* two columns a word (padding columns hold zeros: 0 times any scale is 0) */
        const float scale0 = scale[c], scale1 = scale[c + 1];
        float first, second;
        tu_half_pair_to_float_number(&slot[0][c], &first, &second);  /* (rows unrolled: TU_JET_ROWS_MAX is 2 or 3) */
        buffer[0][c] = first * scale0;
        buffer[0][c + 1] = second * scale1;
        tu_half_pair_to_float_number(&slot[1][c], &first, &second);
        buffer[1][c] = first * scale0;
        buffer[1][c + 1] = second * scale1;
#if TU_JET_ROWS_MAX == 3
        tu_half_pair_to_float_number(&slot[2][c], &first, &second);
        buffer[2][c] = first * scale0;
        buffer[2][c + 1] = second * scale1;
#endif
    }
#else
    for (c = 0; c < TU_CH_MAX; ++c) {  /* (padding columns hold zeros: 0 times any scale is 0) */
        buffer[0][c] = tu_half_to_float_number(slot[0][c]) * scale[c];  /* (rows unrolled: TU_JET_ROWS_MAX 2 or 3) */
        buffer[1][c] = tu_half_to_float_number(slot[1][c]) * scale[c];
#if TU_JET_ROWS_MAX == 3
        buffer[2][c] = tu_half_to_float_number(slot[2][c]) * scale[c];
#endif
    }
#endif
    return &buffer[0][0];
#else
    (void)scale, (void)buffer;
    return &self->mem.reservoir[k][0][0];
#endif
}

#if TU_ENVELOPE
/* Widen the span by the value row of a jet offered to the reservoir, in its stored form (float16: each half
 * times its channel's x_rms, the values tu_reservoir_load gives), as torch_ude.reservoir.SampleBuffer.add. */
static void tu_span_widen(tu_trainer *self, const tu_jet_value *jet)
{
    const int ch = TU_CFG(self)->ch;
    int c;
    for (c = 0; c < ch; ++c) {
#if TU_RESERVOIR_HALF
        const float value = tu_half_to_float_number(jet[c]) * self->cal.x_rms[c];
#else
        const float value = jet[c];
#endif
        self->span_low[c] = value < self->span_low[c] ? value : self->span_low[c];
        self->span_high[c] = value > self->span_high[c] ? value : self->span_high[c];
    }
}
#endif

static void tu_reservoir_offer(tu_trainer *self, const tu_jet_value *jet)
{
    const tu_config *cfg = TU_CFG(self);
    const int capacity = cfg->capacity;
    uint32_t slot;
    if (cfg->buffer_reservoir && self->seen >= (uint64_t)capacity) {
        /* Vitter's algorithm R; with a forgetting window W the bound stops growing at W, and
         * without one at 2^32 - 1 (PCG32 draws 32 bits; a jet is then kept with p < 1e-6 anyway) */
        const uint64_t cap = cfg->forget_window > 0 ? (uint64_t)cfg->forget_window - 1u : (uint64_t)UINT32_MAX - 1u;
        const uint32_t bound = (uint32_t)(self->seen < cap ? self->seen : cap) + 1u;
        slot = tu_prng_below(&self->reservoir_rng, bound);
    } else {
        /* filling, or FIFO (a 32-bit remainder while the count fits in 32 bits) */
        slot = self->seen <= UINT32_MAX ? (uint32_t)self->seen % (uint32_t)capacity
                                        : (uint32_t)(self->seen % (uint64_t)capacity);
    }
    if (slot < (uint32_t)capacity) {
        memcpy(self->mem.reservoir[slot], jet, sizeof self->mem.reservoir[0]);
    }
    ++self->seen;  /* 64-bit: does not wrap */
}

/* The point taps (one sample each) of the window m apart ending at the newest sample; 1 if all are finite. */
TU_KERNEL int tu_point_taps(const tu_trainer *self, int ch, int n_taps, int m, int len,
                            float taps[TU_CH_MAX][TU_TAPS_MAX])
{
    int finite = 1, c, j;
    for (j = 0; j < n_taps; ++j) {
        const int slot = ((self->ring_head - 1 - (n_taps - 1 - j) * m) % len + len) % len;
        for (c = 0; c < ch; ++c) {
            taps[c][j] = self->ring[slot][c];
            finite = finite && tu_finite(taps[c][j]);
        }
    }
    return finite;
}

/* The window of taps m apart ending at the newest sample. */
static void tu_window(tu_trainer *self)
{
    const tu_config *cfg = TU_CFG(self);
    const int m = self->cal.m, b = tu_bin(self), ch = cfg->ch, n_taps = cfg->taps, len = cfg->ring_len;
    float taps[TU_CH_MAX][TU_TAPS_MAX], misfit[TU_CH_MAX], rms[TU_CH_MAX], jet[3][TU_CH_MAX];
    tu_jet_value stored[TU_JET_ROWS_MAX][TU_CH_MAX];
    const tu_jet_value *offered;
    int finite = 1, c, j, i;
    if (ch < TU_CH_MAX) {  /* the reservoir keeps a jet's TU_CH_MAX columns: no indeterminate bytes in a checkpoint */
        memset(jet, 0, sizeof jet);
    }
    if (b == 1 && ch == TU_CH_MAX && n_taps == TU_TAPS_MAX) {  /* point taps at the build's sizes: constant bounds */
        finite = tu_point_taps(self, TU_CH_MAX, TU_TAPS_MAX, m, len, taps);
    } else if (b == 1) {
        finite = tu_point_taps(self, ch, n_taps, m, len, taps);
    } else {
        for (j = 0; j < n_taps; ++j) {
            const int back = (n_taps - 1 - j) * m;
            for (c = 0; c < ch; ++c) {  /* a box tap: the mean of the b samples ending at it, newest first */
                float sum = 0.0f;
                for (i = 0; i < b; ++i) {  /* (i = 0 first: 0 + y is y, bit for bit, but for the sign of a zero) */
                    const int slot = ((self->ring_head - 1 - back - i) % len + len) % len;
                    sum = i == 0 ? self->ring[slot][c] : sum + self->ring[slot][c];
                }
                taps[c][j] = sum / (float)b;
                finite = finite && tu_finite(taps[c][j]);
            }
        }
    }
    ++self->counters.windows;
    if (!finite) {
        ++self->counters.nonfinite;
        return;
    }
    if (self->run < (uint32_t)((n_taps - 1) * m + b)) {
        ++self->counters.boundary;
        return;
    }
    tu_savgol_misfit_with(cfg, tu_window_projection(self), &taps[0][0], misfit, rms);
    tu_savgol_estimate_rows(cfg, tu_window_rows(self), &taps[0][0], self->cal.dt_eff, jet[0], jet[1], jet[2]);
    for (c = 0; c < ch; ++c) {  /* overflow of huge finite samples */
        finite = finite && tu_finite(misfit[c]) && tu_finite(rms[c]) && tu_finite(jet[0][c])
                 && tu_finite(jet[1][c]) && tu_finite(jet[2][c]);
    }
    offered = tu_reservoir_form(self, (const float(*)[TU_CH_MAX])jet, stored, &finite);
    if (!finite) {
        ++self->counters.nonfinite;
        return;
    }
    if (!tu_gate_check(&self->gate, cfg, misfit, rms)) {
        ++self->counters.misfit;
        return;
    }
    ++self->counters.accepted;
#if TU_ENVELOPE
    tu_span_widen(self, offered);
#endif
    tu_reservoir_offer(self, offered);
}

/* One sample after bridging: calibration record, or ring and window. */
static tu_status tu_emit(tu_trainer *self, int64_t tick, const float *y, int bridged, int brk)
{
    if (self->calibrated < 0) {  /* a bridged sample before this one failed the calibration */
        return (tu_status)self->calibrated;
    }
    if (brk) {
        ++self->key;
    }
    if (!self->calibrated) {
        tu_cal_record *rec = &self->TU_RECORD_MEMBER;
        tu_status st;
        memcpy(rec->y[self->cal_fill], y, (size_t)TU_CFG(self)->ch * sizeof(float));
#if TU_CAL_REPLAY
        self->cal_ticks[self->cal_fill] = tick;
#endif
        rec->flags[self->cal_fill] = (uint16_t)((self->key & TU_FLAG_KEY) | (bridged ? TU_FLAG_BRIDGED : 0u));
        if (++self->cal_fill < TU_CFG(self)->cal_len) {
            return TU_OK;
        }
        st = tu_calibrate(rec, TU_CFG(self), &self->cal);
        if (st != TU_OK) {  /* the trainer stops, as the Python trainer does (tu_status.h) */
            ++self->counters.calibration_failures;
            self->cal_fill = 0;
            self->calibrated = (int32_t)st;
            return st;
        }
        tu_start_streaming(self);
        return TU_OK;
    }
    tu_ring_push(self, y, brk);
    if (tu_divides(tick, tu_stride(self))) {
        tu_window(self);
    }
    return TU_OK;
}

/* One sample into a checked instance (tu_trainer_push; push_chunk checks once per chunk). */
static tu_status tu_push(tu_trainer *self, int64_t tick, int32_t segment, const float *y)
{
    const int ch = TU_CFG(self)->ch;
    tu_status st, first = TU_OK;
    int finite = 1, c;
    if (self->calibrated < 0) {
        return (tu_status)self->calibrated;
    }
    if (self->have_last && tick <= self->last_tick) {
        ++self->counters.out_of_order;
        return TU_OK;
    }
    ++self->counters.samples;
    for (c = 0; c < ch; ++c) {
        finite = finite && tu_finite(y[c]);
    }
    if (!finite) {
        ++self->counters.nonfinite_samples;
    }
    if (!self->have_last) {
        first = tu_emit(self, tick, y, 0, 0);
    } else {
        const uint64_t step = (uint64_t)tick - (uint64_t)self->last_tick;
        const int same = segment == self->last_segment;
        const int gap = step > 1u;
        const int too_long = gap && same && step - 1u > (uint64_t)TU_CFG(self)->max_bridge;
        if (gap) {
            ++self->counters.gaps;
        }
        if (too_long) {
            ++self->counters.long_gaps;
        }
        if (gap && same && !too_long) {
            const int missing = (int)step - 1;
            float last[TU_CH_MAX];
            int j;
            memcpy(last, tu_newest(self), (size_t)ch * sizeof(float));
            for (j = 1; j <= missing; ++j) {
                const float frac = (float)j / (float)step;
                float v[TU_CH_MAX];
                for (c = 0; c < ch; ++c) {
                    v[c] = last[c] + (y[c] - last[c]) * frac;
                }
                ++self->counters.bridged;
                st = tu_emit(self, self->last_tick + j, v, 1, 0);
                first = first != TU_OK ? first : st;
            }
        }
        st = tu_emit(self, tick, y, 0, !same || too_long);
        first = first != TU_OK ? first : st;
    }
    self->have_last = 1;
    self->last_tick = tick;
    self->last_segment = segment;
    return first;
}

#if TU_VELOCITY
/* The stream sample of the run's sample `back` samples before the newest pushed one, whose centred window of 2M + 1
 * samples is in the ring: its positions, their velocities fs D1 . q (summed oldest first), its inputs. */
static void tu_velocity_sample(const tu_trainer *self, int back, float *out)
{
    const tu_config *cfg = TU_CFG(self);
    const int m = cfg->velocity_half_width, p = cfg->positions, len = 2 * m + 2, pushed = TU_PUSH_CH_OF(cfg);
    const int centre = (self->vel_head + 2 * len - 1 - back) % len, first = (centre + len - m) % len;
    int c, j;
    for (c = 0; c < p; ++c) {
        float acc = 0.0f;
        for (j = 0; j <= 2 * m; ++j) {
            acc += cfg->velocity_row[j] * self->vel_ring[(first + j) % len][c];
        }
        out[c] = self->vel_ring[centre][c];
        out[p + c] = acc;
    }
    for (c = p; c < pushed; ++c) {
        out[p + c] = self->vel_ring[centre][c];
    }
}

/* One pushed sample of a configuration that derives its velocities (tu_trainer.h): into the run's ring, and the
 * samples whose window it completes into the stream (tu_push), M ticks late. */
static tu_status tu_velocity_push(tu_trainer *self, int64_t tick, int32_t segment, const float *y)
{
    const tu_config *cfg = TU_CFG(self);
    const int m = cfg->velocity_half_width, len = 2 * m + 2;
    float out[TU_CH_MAX];
    tu_status first = TU_OK;
    int32_t run;
    if (self->calibrated < 0) {
        return (tu_status)self->calibrated;
    }
    if (self->vel_count > 0 && tick <= self->vel_tick) {
        ++self->counters.out_of_order;
        return TU_OK;
    }
    if (self->vel_count == 0 || segment != self->vel_segment || tick != self->vel_tick + 1) {  /* a new run */
        ++self->vel_runs;
        self->vel_count = 0;
        self->vel_segment = segment;
    }
    memcpy(self->vel_ring[self->vel_head], y, (size_t)TU_PUSH_CH_OF(cfg) * sizeof(float));
    self->vel_head = (self->vel_head + 1) % len;
    self->vel_tick = tick;
    self->vel_count += self->vel_count <= len;
    run = (int32_t)(self->vel_runs & 0x7FFFFFFFu);
    if (self->vel_count < len) {  /* a run of 2M + 1 samples or fewer gives nothing (yet) */
        return TU_OK;
    }
    if (self->vel_count == len) {  /* the run is long enough: its first sample with a centred window too */
        tu_velocity_sample(self, m + 1, out);
        first = tu_push(self, tick - m - 1, run, out);
    }
    tu_velocity_sample(self, m, out);
    {
        const tu_status st = tu_push(self, tick - m, run, out);
        return first != TU_OK ? first : st;
    }
}

/* One pushed sample into a checked instance: through the velocity derivative where the configuration has one. */
static tu_status tu_ingest(tu_trainer *self, int64_t tick, int32_t segment, const float *y)
{
    return TU_CFG(self)->positions > 0 ? tu_velocity_push(self, tick, segment, y) : tu_push(self, tick, segment, y);
}
#else
#define tu_ingest tu_push /* every state is pushed */
#endif

tu_status tu_trainer_push(tu_trainer *self, int64_t tick, int32_t segment, const float *y, int n_channels)
{
    const tu_status st = tu_check(self);
    if (st != TU_OK) {
        return st;
    }
    if (y == NULL) {
        return TU_ERR_NULL;
    }
    if (n_channels != TU_PUSH_CH_OF(TU_CFG(self))) {
        return TU_ERR_CHANNELS;
    }
    return tu_ingest(self, tick, segment, y);
}

int tu_trainer_ready(const tu_trainer *self)
{
    const tu_status st = tu_check(self);
    if (st != TU_OK) {
        return st;
    }
    if (self->calibrated < 0) {
        return self->calibrated;
    }
    return self->calibrated == 1 && self->seen >= (uint64_t)TU_CFG(self)->capacity;
}

/* Multiples of train_every in (lo, hi]: the training ticks crossed (negative for hi < lo). */
static int64_t tu_crossed(int64_t every, int64_t lo, int64_t hi)
{
    return tu_floor_div(hi, every) - tu_floor_div(lo, every);
}

tu_status tu_trainer_push_chunk(tu_trainer *self, int count, const int64_t *ticks, const int32_t *segments,
                                const float *y, int n_channels, int *due)
{
    tu_status st = tu_check(self), first = TU_OK;
    int64_t run, n = 0, every, span;
    int i, ch;
    if (st != TU_OK) {
        return st;
    }
    run = self->have_last ? self->last_tick : -1; /* the training ticks after it are still to count */
    every = TU_CFG(self)->train_every;
    span = TU_CFG(self)->due_span;
    ch = TU_PUSH_CH_OF(TU_CFG(self));
    if (due == NULL || (count > 0 && (ticks == NULL || y == NULL))) {
        return TU_ERR_NULL;
    }
    *due = 0;
    if (n_channels != ch) {
        return TU_ERR_CHANNELS;
    }
    if (count < 0) {
        return TU_ERR_ARGUMENT;
    }
    /* due_updates(newest tick before the chunk or -1, newest after it): the crossings telescope
     * between gaps longer than due_span, which count only their last due_span ticks */
    for (i = 0; i < count; ++i) {
        const int64_t before = self->have_last ? self->last_tick : -1;
        st = tu_ingest(self, ticks[i], segments != NULL ? segments[i] : 0, y + (size_t)i * (size_t)ch);
        first = first != TU_OK ? first : st;
        if (self->have_last && self->last_tick > before
            && (uint64_t)self->last_tick - (uint64_t)before > (uint64_t)span) {
            n += tu_crossed(every, run, before) + tu_crossed(every, self->last_tick - span, self->last_tick);
            run = self->last_tick;
        }
    }
    if (tu_trainer_ready(self) > 0) {
        n += tu_crossed(every, run, self->last_tick);
        *due = n < 0 ? 0 : (n > INT_MAX ? INT_MAX : (int)n);
    }
    return first;
}

tu_status tu_trainer_step(tu_trainer *self)
{
    tu_status st = tu_check(self);
    const tu_config *cfg;
    int sizes[TU_MLP_TENSORS_MAX + TU_PHYSICAL];  /* the network's tensors, then theta's */
    int fill, b, k, finite = 1, n, tensors, xddot_row, u_row, batch;
    uint32_t threshold;
    float sq1 = 0.0f, sq2 = 0.0f, lr, loss, norm, scale[TU_CH_MAX];
    tu_field field;
    tu_jet_loss loss_terms;
    tu_adam adam;
    if (st != TU_OK) {
        return st;
    }
    if (self->calibrated < 0) {
        return (tu_status)self->calibrated;
    }
    cfg = TU_CFG(self);
    n = cfg->n;
    fill = tu_fill(self);
    if (self->calibrated != 1 || fill < cfg->batch) {
        return TU_ERR_NOT_READY;
    }
    lr = tu_trainer_lr(cfg, self->adam_step);
    for (k = 0; k < n; ++k) {  /* the loss of Eq. (13) with the calibrated scales */
        loss_terms.s1[k] = self->cal.s1[k];
        loss_terms.s2[k] = self->cal.s2[k];
    }
    loss_terms.lambda1 = cfg->lambda1;
    loss_terms.lambda2 = self->cal.lambda2;
    field.config = cfg;
    field.params = self->params;
    field.in_scale = self->in_scale;
    field.out_scale = self->out_scale;
    memset(self->grad, 0, sizeof self->grad);
    /* rows TU_CH_MAX floats apart; without stored second derivatives lambda2 is 0 and xddot_hat is never
     * read; the inputs' rows 0 and 1 are u and udot */
    xddot_row = cfg->jet_rows == 3 ? 2 * TU_CH_MAX : TU_CH_MAX;
    u_row = cfg->nu > 0 ? n : -1;
    batch = cfg->batch;
    memcpy(scale, self->cal.x_rms, sizeof scale);
    threshold = tu_prng_threshold((uint32_t)fill);
    for (b = 0; b < batch; ++b) {  /* the draws of tu_prng_below(&self->batch_rng, fill) */
        float buffer[TU_JET_ROWS_MAX][TU_CH_MAX];
        const uint32_t slot = tu_prng_below_inline(&self->batch_rng, (uint32_t)fill, threshold);
        const float *jet = tu_reservoir_load(self, slot, scale, buffer);
        tu_jet_accumulate(&field, &loss_terms, batch, jet, jet + TU_CH_MAX, jet + xddot_row,
                          u_row >= 0 ? jet + u_row : NULL, u_row >= 0 ? jet + TU_CH_MAX + u_row : NULL, 0, self->grad,
                          &sq1, &sq2);
    }
    sq1 /= (float)cfg->batch;
    sq2 /= (float)cfg->batch;
    loss = loss_terms.lambda1 * sq1 + (loss_terms.lambda2 > 0.0f ? loss_terms.lambda2 * sq2 : 0.0f);
    tensors = tu_mlp_tensor_count(cfg);
    for (k = 0; k < tensors; ++k) {
        sizes[k] = tu_mlp_tensor_size(cfg, k);
    }
#if TU_PHYSICAL
    if (cfg->num_physical > 0) {
        if (self->adam_step < cfg->physics_updates) {  /* physics first: the network's gradient is zeroed */
            memset(self->grad, 0, (size_t)cfg->num_params * sizeof(float));
        }
        sizes[tensors++] = cfg->num_physical;
    }
#endif
    norm = tu_clip_grad_norm(self->grad, sizes, tensors, cfg->grad_clip);
    self->last_loss = loss;
    self->last_loss_r1 = sq1;
    self->last_loss_r2 = loss_terms.lambda2 > 0.0f ? sq2 : NAN;
    self->last_grad_norm = norm;
    finite = tu_finite(norm) && tu_finite(loss);
    if (!finite) {
        ++self->counters.skipped_updates;
        return TU_SKIPPED;
    }
    adam.exp_avg = self->exp_avg;
    adam.exp_avg_sq = self->exp_avg_sq;
    adam.n = cfg->num_params;
    adam.step = self->adam_step;
    tu_adamw_step(&adam, self->params, self->grad, lr, self->cal.weight_decay);
#if TU_PHYSICAL
    if (cfg->num_physical > 0) {  /* theta: the same Adam step, never decayed, then clamped into its bounds */
        const int np = cfg->num_params;
        adam.exp_avg = self->exp_avg + np;
        adam.exp_avg_sq = self->exp_avg_sq + np;
        adam.n = cfg->num_physical;
        adam.step = self->adam_step;
        tu_adamw_step(&adam, self->params + np, self->grad + np, lr, 0.0f);
        for (k = 0; k < cfg->num_physical; ++k) {
            float *t = &self->params[np + k];
            *t = *t < cfg->theta_low[k] ? cfg->theta_low[k] : *t > cfg->theta_high[k] ? cfg->theta_high[k] : *t;
        }
    }
#endif
    if (cfg->ema) {
        tu_ema_update(self->ema, self->params, cfg->num_params + TU_NUM_PHYSICAL_OF(cfg), cfg->ema_weight,
                      self->adam_step == 0);
    }
    self->adam_step = adam.step;
    return TU_OK;
}

tu_status tu_trainer_steps(tu_trainer *self, int count, int *done)
{
    tu_status st = tu_check(self);
    int i;
    int made = 0;
    if (done != NULL) {
        *done = 0;
    }
    if (st != TU_OK) {
        return st;
    }
    if (count < 0) {
        return TU_ERR_ARGUMENT;
    }
    for (i = 0; i < count; ++i) {
        st = tu_trainer_step(self);
        if (st < 0) {
            break;
        }
        made += st == TU_OK;
    }
    if (done != NULL) {
        *done = made;
    }
    return st;
}

tu_status tu_trainer_weights(const tu_trainer *self, int which, float *out, int n)
{
    tu_status st = tu_check(self);
    if (st != TU_OK) {
        return st;
    }
    if (out == NULL) {
        return TU_ERR_NULL;
    }
    if (n != TU_CFG(self)->num_params + TU_NUM_PHYSICAL_OF(TU_CFG(self)) || (which != 0 && which != 1)) {
        return TU_ERR_ARGUMENT;
    }
    memcpy(out, which == 1 && TU_CFG(self)->ema && self->adam_step > 0 ? self->ema : self->params,
           (size_t)n * sizeof(float));
    return TU_OK;
}

tu_status tu_trainer_report(const tu_trainer *self, tu_report *out)
{
    tu_status st = tu_check(self);
    if (st != TU_OK) {
        return st;
    }
    if (out == NULL) {
        return TU_ERR_NULL;
    }
    memset(out, 0, sizeof *out);
    out->counters = self->counters;
    out->calibration = self->cal;
    out->calibrated = self->calibrated;
    out->updates = self->adam_step;
    out->fill = self->calibrated == 1 ? tu_fill(self) : 0;
    out->seen = self->calibrated == 1 ? self->seen : 0u;
    out->loss = self->last_loss;
    out->loss_r1 = self->last_loss_r1;
    out->loss_r2 = self->last_loss_r2;
    out->grad_norm = self->last_grad_norm;
    out->lr = self->adam_step > 0 ? tu_trainer_lr(TU_CFG(self), self->adam_step - 1) : NAN;
    memcpy(out->in_scale, self->in_scale, sizeof out->in_scale);
    memcpy(out->out_scale, self->out_scale, sizeof out->out_scale);
    return TU_OK;
}

tu_status tu_trainer_span(const tu_trainer *self, float *low, float *high, int n)
{
    tu_status st = tu_check(self);
    if (st != TU_OK) {
        return st;
    }
    if (low == NULL || high == NULL) {
        return TU_ERR_NULL;
    }
    if (n != TU_CFG(self)->ch) {
        return TU_ERR_ARGUMENT;
    }
#if TU_ENVELOPE
    memcpy(low, self->span_low, (size_t)n * sizeof(float));
    memcpy(high, self->span_high, (size_t)n * sizeof(float));
    return TU_OK;
#else
    return TU_ERR_CONFIG;
#endif
}

#if TU_PHYSICAL
/* The end-of-run refit and the standard errors of trained physical parameters (torch_ude/physical.py), on the
 * weights a run exports: the EMA (the raw weights before the first update or without TU_EMA), theta in its tail. */
static float *tu_exported(tu_trainer *self)
{
    return TU_CFG(self)->ema && self->adam_step > 0 ? self->ema : self->params;
}

/* One pass over the reservoir's fill jets at the exported weights with theta = `theta`, written into them: the
 * sum of squares |r|^2 of the scaled residuals r = (sqrt(lambda1) r1, sqrt(lambda2) r2) (*cost), g = J^T r (P)
 * and H = J^T J (P x P, row-major), J = dr/dtheta. |r|^2 and g come from the update's own jet loss and gradient
 * over all jets (tu_jet_accumulate with batch = fill: its theta part is (2 / fill) J^T r; the network's part lands
 * in self->grad, the update's scratch, and is not used), H from tu_jet_physical_rows. Float32 sums. */
static void tu_physical_pass(tu_trainer *self, const float *theta, float *cost, float *g, float *h)
{
    const tu_config *cfg = TU_CFG(self);
    const int n = cfg->n, p = cfg->num_physical, fill = tu_fill(self);
    const int xddot_row = cfg->jet_rows == 3 ? 2 * TU_CH_MAX : TU_CH_MAX, u_row = cfg->nu > 0 ? n : -1;
    float *w = tu_exported(self);
    float sq1 = 0.0f, sq2 = 0.0f, scale[TU_CH_MAX], rows[2 * TU_N_MAX * TU_PHYSICAL_MAX];
    tu_field field;
    tu_jet_loss loss;
    int b, i, j, k;
    memcpy(w + cfg->num_params, theta, (size_t)p * sizeof(float));
    for (k = 0; k < n; ++k) {
        loss.s1[k] = self->cal.s1[k];
        loss.s2[k] = self->cal.s2[k];
    }
    loss.lambda1 = cfg->lambda1;
    loss.lambda2 = self->cal.lambda2;
    field.config = cfg;
    field.params = w;
    field.in_scale = self->in_scale;
    field.out_scale = self->out_scale;
    memcpy(scale, self->cal.x_rms, sizeof scale);
    memset(self->grad, 0, sizeof self->grad);
    memset(h, 0, (size_t)(p * p) * sizeof(float));
    for (b = 0; b < fill; ++b) {
        float buffer[TU_JET_ROWS_MAX][TU_CH_MAX];
        const float *jet = tu_reservoir_load(self, (uint32_t)b, scale, buffer);
        const float *u = u_row >= 0 ? jet + u_row : NULL, *udot = u_row >= 0 ? jet + TU_CH_MAX + u_row : NULL;
        tu_jet_accumulate(&field, &loss, fill, jet, jet + TU_CH_MAX, jet + xddot_row, u, udot, 0, self->grad, &sq1,
                          &sq2);
        tu_jet_physical_rows(&field, &loss, jet, u, udot, rows);
        for (i = 0; i < 2 * n; ++i) {
            for (j = 0; j < p; ++j) {
                for (k = 0; k <= j; ++k) {
                    h[j * p + k] += rows[i * p + j] * rows[i * p + k];
                }
            }
        }
    }
    for (j = 0; j < p; ++j) {
        for (k = 0; k < j; ++k) {
            h[k * p + j] = h[j * p + k];
        }
        g[j] = 0.5f * (float)fill * self->grad[cfg->num_params + j];
    }
    *cost = loss.lambda1 * sq1 + (loss.lambda2 > 0.0f ? loss.lambda2 * sq2 : 0.0f);
}

/* Solve a x = b in place (b becomes x) for the symmetric p x p matrix a, scaled to unit diagonal first (Jacobi:
 * the parameters' units drop out of its condition), by Cholesky; a is overwritten. 0 when a is not positive
 * definite in float32 (a zero or non-finite diagonal, a non-positive pivot). */
static int tu_spd_solve(float *a, float *b, int p)
{
    float d[TU_PHYSICAL_MAX];
    int i, j, k;
    for (i = 0; i < p; ++i) {
        if (!(a[i * p + i] > 0.0f) || !tu_finite(a[i * p + i])) {
            return 0;
        }
        d[i] = 1.0f / sqrtf(a[i * p + i]);
    }
    for (i = 0; i < p; ++i) {
        for (j = 0; j < p; ++j) {
            a[i * p + j] *= d[i] * d[j];
        }
        b[i] *= d[i];
    }
    for (j = 0; j < p; ++j) {  /* a = L L^T, L in the lower triangle */
        float s = a[j * p + j];
        for (k = 0; k < j; ++k) {
            s -= a[j * p + k] * a[j * p + k];
        }
        if (!(s > 0.0f)) {
            return 0;
        }
        a[j * p + j] = sqrtf(s);
        for (i = j + 1; i < p; ++i) {
            float t = a[i * p + j];
            for (k = 0; k < j; ++k) {
                t -= a[i * p + k] * a[j * p + k];
            }
            a[i * p + j] = t / a[j * p + j];
        }
    }
    for (i = 0; i < p; ++i) {  /* L y = b */
        for (k = 0; k < i; ++k) {
            b[i] -= a[i * p + k] * b[k];
        }
        b[i] /= a[i * p + i];
    }
    for (i = p - 1; i >= 0; --i) {  /* L^T x = y */
        for (k = i + 1; k < p; ++k) {
            b[i] -= a[k * p + i] * b[k];
        }
        b[i] /= a[i * p + i];
    }
    for (i = 0; i < p; ++i) {
        b[i] *= d[i];
    }
    return 1;
}

/* The checks the refit and the standard errors share: an instance that trains physical parameters, calibrated,
 * with jets in its reservoir. */
static tu_status tu_physical_ready(const tu_trainer *self)
{
    const tu_status st = tu_check(self);
    if (st != TU_OK) {
        return st;
    }
    if (self->calibrated < 0) {
        return (tu_status)self->calibrated;
    }
    if (TU_CFG(self)->num_physical == 0) {
        return TU_ERR_CONFIG;
    }
    return self->calibrated == 1 && tu_fill(self) > 0 ? TU_OK : TU_ERR_NOT_READY;
}

/* The projected damped Gauss-Newton step d of tu_trainer_refit: (H + mu diag H) d = -g on the free parameters; a
 * parameter at a bound that the descent direction -g pushes out of it is held (d = 0), and one whose step crosses
 * its bound is held at the bound (its displacement moved to the right side) and the others solved again, at most P
 * times: the damped model's minimiser on the face of the box the step ends on. 0 when the damped matrix is not
 * positive definite in float32. */
static int tu_refit_step(const tu_config *cfg, const float *theta, const float *g, const float *h, float mu,
                         float *step)
{
    const int p = cfg->num_physical;
    float a[TU_PHYSICAL_MAX * TU_PHYSICAL_MAX], held[TU_PHYSICAL_MAX] = {0.0f};
    int fixed[TU_PHYSICAL_MAX] = {0}, i, k, round, crossed = 1;
    for (k = 0; k < p; ++k) {
        fixed[k] = (theta[k] <= cfg->theta_low[k] && g[k] > 0.0f) || (theta[k] >= cfg->theta_high[k] && g[k] < 0.0f);
    }
    for (round = 0; round <= p && crossed; ++round) {
        for (i = 0; i < p; ++i) {
            step[i] = fixed[i] ? held[i] : -g[i];
            for (k = 0; k < p; ++k) {
                a[i * p + k] = !fixed[i] && !fixed[k] ? h[i * p + k] * (i == k ? 1.0f + mu : 1.0f) : (float)(i == k);
                step[i] -= !fixed[i] && fixed[k] ? h[i * p + k] * held[k] : 0.0f;
            }
        }
        if (!tu_spd_solve(a, step, p)) {
            return 0;
        }
        crossed = 0;
        for (k = 0; k < p; ++k) {
            const float t = theta[k] + step[k];
            if (!fixed[k] && (t < cfg->theta_low[k] || t > cfg->theta_high[k])) {
                fixed[k] = crossed = 1;
                held[k] = (t < cfg->theta_low[k] ? cfg->theta_low[k] : cfg->theta_high[k]) - theta[k];
            }
        }
    }
    return 1;
}

#define TU_REFIT_RTOL 1e-6f   /* stop when a pass lowers |r|^2 by less than this share (float32: ~8 ulp) */
#define TU_REFIT_PREDICTED 1e-9f /* or the Gauss-Newton model promises less than this share (g and H are accurate far
                                    below the float32 rounding of |r|^2 itself) */
#define TU_REFIT_STEP 1e-6f   /* or the projected step moves theta by less than this (relative, 1 + |theta|) */
#define TU_REFIT_MU_MAX 1e10f /* or the damping grows past this without a lower |r|^2 */

tu_status tu_trainer_refit(tu_trainer *self, int max_evaluations, tu_refit_report *out)
{
    const tu_status st = tu_physical_ready(self);
    const tu_config *cfg;
    float theta[TU_PHYSICAL_MAX], trial[TU_PHYSICAL_MAX], g[TU_PHYSICAL_MAX], g2[TU_PHYSICAL_MAX];
    float h[TU_PHYSICAL_MAX * TU_PHYSICAL_MAX], h2[TU_PHYSICAL_MAX * TU_PHYSICAL_MAX];
    float step[TU_PHYSICAL_MAX];
    float cost, cost2, mu = 1e-3f;
    int p, i, k, evaluations = 1, converged = 0;
    if (st != TU_OK) {
        return st;
    }
    if (out == NULL) {
        return TU_ERR_NULL;
    }
    if (max_evaluations < 1) {
        return TU_ERR_ARGUMENT;
    }
    cfg = TU_CFG(self);
    p = cfg->num_physical;
    for (k = 0; k < p; ++k) {
        const float t = tu_exported(self)[cfg->num_params + k];
        theta[k] = t < cfg->theta_low[k] ? cfg->theta_low[k] : t > cfg->theta_high[k] ? cfg->theta_high[k] : t;
    }
    tu_physical_pass(self, theta, &cost, g, h);
    out->loss_before = cost / (float)tu_fill(self);
    while (evaluations < max_evaluations && tu_finite(cost)) {
        float moved = 0.0f, predicted = 0.0f;
        if (!tu_refit_step(cfg, theta, g, h, mu, step)) {
            mu *= 10.0f;
            if (mu > TU_REFIT_MU_MAX) {
                break;
            }
            continue;
        }
        for (i = 0; i < p; ++i) {  /* the Gauss-Newton model's decrease of |r|^2: -(2 g.d + d.H d) */
            float hd = 0.0f;
            for (k = 0; k < p; ++k) {
                hd += h[i * p + k] * step[k];
            }
            predicted -= step[i] * (2.0f * g[i] + hd);
        }
        if (!(predicted > TU_REFIT_PREDICTED * cost)) {  /* the model promises nothing more */
            converged = 1;
            break;
        }
        for (k = 0; k < p; ++k) {  /* projected onto the bounds */
            const float t = theta[k] + step[k];
            trial[k] = t < cfg->theta_low[k] ? cfg->theta_low[k] : t > cfg->theta_high[k] ? cfg->theta_high[k] : t;
            moved = fmaxf(moved, fabsf(trial[k] - theta[k]) / (1.0f + fabsf(theta[k])));
        }
        if (moved <= TU_REFIT_STEP) {
            converged = 1;
            break;
        }
        tu_physical_pass(self, trial, &cost2, g2, h2);
        ++evaluations;
        if (cost2 < cost) {  /* accepted: less damping */
            const int small = cost - cost2 <= TU_REFIT_RTOL * cost;
            memcpy(theta, trial, sizeof theta);
            memcpy(g, g2, sizeof g);
            memcpy(h, h2, sizeof h);
            cost = cost2;
            mu = fmaxf(mu * 0.1f, 1e-7f);
            if (small) {
                converged = 1;
                break;
            }
        } else {
            mu *= 10.0f;
            if (mu > TU_REFIT_MU_MAX) {
                converged = 1;  /* no step lowers |r|^2 at float32 precision: a minimum within the bounds */
                break;
            }
        }
    }
    memcpy(tu_exported(self) + cfg->num_params, theta, (size_t)p * sizeof(float));
    out->loss_after = cost / (float)tu_fill(self);
    out->evaluations = evaluations;
    out->converged = converged;
    return tu_finite(cost) ? TU_OK : TU_SKIPPED;
}

tu_status tu_trainer_standard_errors(tu_trainer *self, float *se, int n)
{
    const tu_status st = tu_physical_ready(self);
    const tu_config *cfg;
    float theta[TU_PHYSICAL_MAX], g[TU_PHYSICAL_MAX], h[TU_PHYSICAL_MAX * TU_PHYSICAL_MAX];
    float a[TU_PHYSICAL_MAX * TU_PHYSICAL_MAX], cost, s2;
    int64_t rows;
    int k;
    if (st != TU_OK) {
        return st;
    }
    if (se == NULL) {
        return TU_ERR_NULL;
    }
    cfg = TU_CFG(self);
    if (n != cfg->num_physical) {
        return TU_ERR_ARGUMENT;
    }
    memcpy(theta, tu_exported(self) + cfg->num_params, (size_t)n * sizeof(float));
    tu_physical_pass(self, theta, &cost, g, h);
    rows = (int64_t)tu_fill(self) * cfg->n * (self->cal.lambda2 > 0.0f ? 2 : 1);
    s2 = cost / (float)(rows - n > 1 ? rows - n : 1);
    for (k = 0; k < n; ++k) {  /* diag (H^-1): column k of H^-1 by a solve, its k-th entry */
        float e[TU_PHYSICAL_MAX] = {0.0f};
        e[k] = 1.0f;
        memcpy(a, h, sizeof a);
        se[k] = tu_spd_solve(a, e, n) ? sqrtf(fmaxf(e[k], 0.0f) * s2) : NAN;
    }
    return TU_OK;
}
#endif

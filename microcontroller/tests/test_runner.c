/* Host tests of the C trainer against golden vectors of the float32 Python reference
 * (microcontroller/golden.py), plus a finite-difference gradient check, skipped updates, API
 * misuse and what a device that runs for months meets (counters near their limits, a tick far
 * ahead, the end of the schedule, a failed calibration, a damaged checkpoint).
 * Usage: run GOLDEN_FILE STREAM_FILE. Prints one line per test and "N passed, N failed". */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden.h"
#include "tu_gate.h"
#include "tu_half.h"
#include "tu_jet.h"
#include "tu_math.h"
#include "tu_mlp.h"
#include "tu_optim.h"
#include "tu_plant.h"
#include "tu_prng.h"
#include "tu_replay.h"
#include "tu_savgol.h"
#include "tu_stream_file.h"
#include "tu_trainer.h"

#ifndef TU_RUN_ATOL
#define TU_RUN_ATOL 1e-5f /* whole run: largest weight difference to the float32 reference (seen: 2e-7) */
#endif

/* the network's weights, then theta of the trained physical parameters (TU_NUM_PHYSICAL, tu_model.h: 0 without) */
#define TU_NUM_WEIGHTS (TU_NUM_PARAMS + TU_NUM_PHYSICAL)

/* What a pushed sample holds: TU_PUSH_CH channels (tu_model.h: TU_CH, or where the trainer derives the velocities,
 * TU_VELOCITY, the positions and the inputs), of which TU_PUSH_STATES states; TU_RUN_LAG more pushed samples than
 * stream samples make a run's first stream samples (2M with the derivative, else 0), TU_RUN_MAX pushed samples
 * give the stream at least one. */
#define TU_PUSH_STATES (TU_PUSH_CH - TU_NU)
#if TU_VELOCITY
#define TU_RUN_LAG (TU_DEFAULT_CONFIG->positions > 0 ? 2 * TU_DEFAULT_CONFIG->velocity_half_width : 0)
#define TU_RUN_MAX TU_VEL_RING_MAX
#else
#define TU_RUN_LAG 0
#define TU_RUN_MAX 1
#endif

static const char *stream_path;
static tu_trainer trainer;
static tu_trainer trained; /* the trainer after test_whole_run: calibrated, reservoir full */

/* The newest pushed tick and segment id (the velocity derivative's, whose stream runs M ticks behind). */
static int64_t pushed_tick(const tu_trainer *t)
{
#if TU_VELOCITY
    if (TU_DEFAULT_CONFIG->positions > 0) {
        return t->vel_tick;
    }
#endif
    return t->last_tick;
}

static int32_t pushed_segment(const tu_trainer *t)
{
#if TU_VELOCITY
    if (TU_DEFAULT_CONFIG->positions > 0) {
        return t->vel_segment;
    }
#endif
    return t->last_segment;
}

/* Compare arrays: |got - want| <= atol + rtol |want| everywhere; report the worst entry. */
static int near(const char *what, const float *got, const float *want, int n, float rtol, float atol)
{
    int i, worst = -1;
    float excess = 0.0f;
    for (i = 0; i < n; ++i) {
        const float err = fabsf(got[i] - want[i]) - (atol + rtol * fabsf(want[i]));
        if (!(err <= 0.0f) && (worst < 0 || !(err <= excess))) {
            worst = i;
            excess = err;
        }
    }
    if (worst >= 0) {
        printf("  %s[%d]: got %.9g, want %.9g (rtol %g, atol %g)\n", what, worst, (double)got[worst],
               (double)want[worst], (double)rtol, (double)atol);
        return 0;
    }
    return 1;
}

#define EXPECT(cond, ...)              \
    do {                               \
        if (!(cond)) {                 \
            printf("  " __VA_ARGS__);  \
            printf("\n");              \
            return 0;                  \
        }                              \
    } while (0)

static int test_prng(void)
{
    static const uint32_t bounds[6] = {1u, 7u, 1000u, 2147483653u, 4096u, 3u};
    const tu_golden_array next = tu_golden("prng_next"), below = tu_golden("prng_below");
    tu_prng p;
    uint32_t i;
    tu_prng_seed(&p, 42u, 54u);
    for (i = 0; i < next.count; ++i) {
        const uint32_t v = tu_prng_next(&p);
        EXPECT((int64_t)v == next.q[i], "next %u: got %u, want %lld", i, v, (long long)next.q[i]);
    }
    for (i = 0; i < below.count; ++i) {
        const uint32_t v = tu_prng_below(&p, bounds[i]);
        EXPECT((int64_t)v == below.q[i], "below(%u): got %u, want %lld", bounds[i], v, (long long)below.q[i]);
    }
    return 1;
}

/* tu_tanhf against the double-precision tanh on a million points of [-12, 12] and the specials. */
static int test_tanh(void)
{
    const float specials[6] = {0.0f, -0.0f, 1e-30f, 0.55f, 9.1f, -9.2f};
    double worst = 0.0;
    float at = 0.0f;
    int i;
    for (i = 0; i <= 1000000 + 6; ++i) {
        const float x = i <= 1000000 ? -12.0f + 24.0f * (float)i / 1000000.0f : specials[i - 1000001];
        const double want = tanh((double)x);
        const float ulp = nextafterf(fabsf((float)want), INFINITY) - fabsf((float)want);
        const double err = fabs((double)tu_tanhf(x) - want) / (double)(ulp > 0.0f ? ulp : 1e-45f);
        if (err > worst) {
            worst = err;
            at = x;
        }
    }
    EXPECT(worst <= 2.0, "tu_tanhf is %.2f ulp off at %.9g", worst, (double)at);
    EXPECT(isnan(tu_tanhf(NAN)) && tu_tanhf(INFINITY) == 1.0f && tu_tanhf(-INFINITY) == -1.0f, "specials");
    return 1;
}

static int test_savgol(void)
{
    const tu_golden_array win = tu_golden("sg_windows");
    const int w = (int)(win.count / (TU_CH * TU_TAPS));
    const float dt = tu_golden("sg_dt").f[0];
    float x[64][TU_CH], xd[64][TU_CH], xdd[64][TU_CH], mis[64][TU_CH], rms[64][TU_CH], centre[64][TU_CH];
    int k, c;
    for (k = 0; k < w; ++k) {
        const float *taps = win.f + k * TU_CH * TU_TAPS;
        tu_savgol_estimate(TU_DEFAULT_CONFIG, taps, dt, x[k], xd[k], xdd[k]);
        tu_savgol_misfit(TU_DEFAULT_CONFIG, taps, mis[k], rms[k]);
        for (c = 0; c < TU_CH; ++c) {
            centre[k][c] = tu_savgol_centre_residual(TU_DEFAULT_CONFIG, taps + c * TU_TAPS);
        }
    }
    return near("x", &x[0][0], tu_golden("sg_x").f, w * TU_CH, 1e-5f, 1e-5f)
           && near("xdot", &xd[0][0], tu_golden("sg_xdot").f, w * TU_CH, 1e-5f, 1e-4f)
           && near("xddot", &xdd[0][0], tu_golden("sg_xddot").f, w * TU_CH, 1e-5f, 1e-2f)
           && near("misfit", &mis[0][0], tu_golden("sg_misfit").f, w * TU_CH, 1e-5f, 1e-5f)
           && near("rms", &rms[0][0], tu_golden("sg_rms").f, w * TU_CH, 1e-6f, 1e-6f)
           && near("centre", &centre[0][0], tu_golden("sg_centre").f, w * TU_CH, 1e-5f, 1e-5f);
}

/* The generated known field (tu_plant_code.h) and its Jacobians J_x, J_u against the plant's Python field
 * (at states and, with recorded inputs, inputs). */
static int test_plant(void)
{
    const tu_golden_array x = tu_golden("plant_x");
    const float *u = tu_golden("plant_u").f; /* TU_NU per state row (none without inputs) */
    const int b = (int)(x.count / TU_N);
    float f[32][TU_N], g[32][TU_N], jac[32][TU_N][TU_N], ju[32 * TU_N * TU_NU + 1];
    int k;
    EXPECT(b <= 32, "%d golden states, room for 32", b);
    for (k = 0; k < b; ++k) {
        const float *uk = TU_NU > 0 ? u + k * TU_NU : NULL;
#if TU_PHYSICAL /* the known field of theta at the golden theta */
        const float *theta = tu_golden("plant_theta").f;
        TU_DEFAULT_CONFIG->jacobians_p(x.f + k * TU_N, uk, theta, f[k], &jac[k][0][0], ju + k * TU_N * TU_NU);
        TU_DEFAULT_CONFIG->field_p(x.f + k * TU_N, uk, theta, g[k]);
#else
        TU_DEFAULT_CONFIG->jacobians(x.f + k * TU_N, uk, f[k], &jac[k][0][0], ju + k * TU_N * TU_NU);
        TU_DEFAULT_CONFIG->field(x.f + k * TU_N, uk, g[k]);
#endif
    }
    return near("f", &f[0][0], tu_golden("plant_f").f, b * TU_N, 1e-5f, 1e-5f)
           && near("jacobian", &jac[0][0][0], tu_golden("plant_jac").f, b * TU_N * TU_N, 1e-5f, 1e-5f)
           && near("input jacobian", ju, tu_golden("plant_ju").f, b * TU_N * TU_NU, 1e-5f, 1e-5f)
           && near("tu_plant_field", &g[0][0], &f[0][0], b * TU_N, 0.0f, 0.0f);
}

static int test_mlp(void)
{
    const float *params = tu_golden("mlp_params").f;
    const tu_golden_array z = tu_golden("mlp_z");
    const int w = TU_DEFAULT_CONFIG->layer_sizes[0];  /* the network's inputs: TU_CH, or the input map's columns */
    const int b = (int)(z.count / (uint32_t)w);
    static float grad[TU_NUM_PARAMS], grad_t[TU_NUM_PARAMS];
    float out[8][TU_N], jvp[8][TU_N], vjp[8 * TU_NET_IN_MAX];
    int k;
    memset(grad, 0, sizeof grad);
    memset(grad_t, 0, sizeof grad_t);
    for (k = 0; k < b; ++k) {
        tu_mlp_acts acts;
        tu_mlp_tangents tan;
        tu_mlp_forward(TU_DEFAULT_CONFIG, params, z.f + k * w, &acts);
        tu_mlp_jvp(TU_DEFAULT_CONFIG, params, &acts, tu_golden("mlp_zdot").f + k * w, &tan);
        tu_mlp_vjp_input(TU_DEFAULT_CONFIG, params, &acts, tu_golden("mlp_obar").f + k * TU_N, vjp + k * w);
        memcpy(out[k], acts.out, sizeof out[k]);
        memcpy(jvp[k], tan.out, sizeof jvp[k]);
        tu_mlp_backward(TU_DEFAULT_CONFIG, params, &acts, tu_golden("mlp_obar").f + k * TU_N, NULL, NULL, grad);
        tu_mlp_backward(TU_DEFAULT_CONFIG, params, &acts, tu_golden("mlp_obar").f + k * TU_N, &tan, tu_golden("mlp_tbar").f + k * TU_N,
                        grad_t);
    }
    return near("forward", &out[0][0], tu_golden("mlp_out").f, b * TU_N, 1e-5f, 1e-6f)
           && near("jvp", &jvp[0][0], tu_golden("mlp_jvp").f, b * TU_N, 1e-5f, 1e-6f)
           && near("vjp", vjp, tu_golden("mlp_vjp").f, b * w, 1e-5f, 1e-6f)
           && near("grad", grad, tu_golden("mlp_grad").f, TU_NUM_PARAMS, 1e-5f, 1e-6f)
           && near("grad with tangent", grad_t, tu_golden("mlp_grad_tangent").f, TU_NUM_PARAMS, 1e-5f, 1e-6f);
}

/* The loss and gradient of the golden jet minibatch (with its inputs and their rates) at params, with lambda2. */
static float jet_loss(const float *params, float lambda2, float *grad, float *sq1, float *sq2)
{
    const tu_golden_array x = tu_golden("jet_x");
    const int b = (int)(x.count / TU_N);
    tu_field field;
    tu_jet_loss loss;
    int k;
    field.config = TU_DEFAULT_CONFIG;
    field.params = params;
    field.in_scale = tu_golden("jet_in").f;
    field.out_scale = tu_golden("jet_out").f;
    memcpy(loss.s1, tu_golden("jet_s1").f, sizeof loss.s1);
    memcpy(loss.s2, tu_golden("jet_s2").f, sizeof loss.s2);
    loss.lambda1 = 1.0f;
    loss.lambda2 = lambda2;
    *sq1 = *sq2 = 0.0f;
    memset(grad, 0, TU_NUM_WEIGHTS * sizeof(float));
    for (k = 0; k < b; ++k) {
        tu_jet_accumulate(&field, &loss, b, x.f + k * TU_N, tu_golden("jet_xdot").f + k * TU_N,
                          tu_golden("jet_xddot").f + k * TU_N, TU_NU > 0 ? tu_golden("jet_u").f + k * TU_NU : NULL,
                          TU_NU > 0 ? tu_golden("jet_udot").f + k * TU_NU : NULL, 1, grad, sq1, sq2);
    }
    *sq1 /= (float)b;
    *sq2 /= (float)b;
    return *sq1 + lambda2 * *sq2;
}

static int test_jet_gradient(void)
{
    static float grad[TU_NUM_WEIGHTS];
    const float *params = tu_golden("jet_params").f;
    float sq1, sq2;
    jet_loss(params, 0.0f, grad, &sq1, &sq2);
    if (!(near("loss_r1 (lambda2 0)", &sq1, tu_golden("jet0_sq1").f, 1, 1e-5f, 0.0f)
          && near("loss_r2 (lambda2 0)", &sq2, tu_golden("jet0_sq2").f, 1, 1e-5f, 0.0f)
          && near("grad (lambda2 0)", grad, tu_golden("jet0_grad").f, TU_NUM_WEIGHTS, 1e-4f, 1e-6f))) {
        return 0;
    }
    jet_loss(params, 0.1f, grad, &sq1, &sq2);
    return near("loss_r1", &sq1, tu_golden("jet2_sq1").f, 1, 1e-5f, 0.0f)
           && near("loss_r2", &sq2, tu_golden("jet2_sq2").f, 1, 1e-5f, 0.0f)
           && near("grad", grad, tu_golden("jet2_grad").f, TU_NUM_WEIGHTS, 1e-4f, 1e-6f);
}

/* A directional finite-difference check of the whole jet gradient (KANN's kad_check_grad):
 * (L(p + h d) - L(p - h d)) / 2h against <grad, d> for a random unit direction d. */
static int test_finite_differences(void)
{
    static float grad[TU_NUM_WEIGHTS], scratch[TU_NUM_WEIGHTS], plus[TU_NUM_WEIGHTS], minus[TU_NUM_WEIGHTS];
    static float dir[TU_NUM_WEIGHTS];
    const float *params = tu_golden("jet_params").f;
    const float lambdas[2] = {0.0f, 0.1f};
    const float h = 1e-2f;
    tu_prng p;
    float sq1, sq2, norm = 0.0f;
    int i, k;
    tu_prng_seed(&p, 7u, 0u);
    for (i = 0; i < TU_NUM_WEIGHTS; ++i) {
        dir[i] = tu_prng_normal(&p);
        norm += dir[i] * dir[i];
    }
    for (i = 0; i < TU_NUM_WEIGHTS; ++i) {
        dir[i] /= sqrtf(norm);
    }
    for (k = 0; k < 2; ++k) {
        float analytic = 0.0f, numeric;
        jet_loss(params, lambdas[k], grad, &sq1, &sq2);
        for (i = 0; i < TU_NUM_WEIGHTS; ++i) {
            analytic += grad[i] * dir[i];
            plus[i] = params[i] + h * dir[i];
            minus[i] = params[i] - h * dir[i];
        }
        numeric = (jet_loss(plus, lambdas[k], scratch, &sq1, &sq2) - jet_loss(minus, lambdas[k], scratch, &sq1, &sq2))
                  / (2.0f * h);
        EXPECT(fabsf(numeric - analytic) <= 1e-2f * fabsf(analytic) + 1e-4f,
               "lambda2 %g: directional derivative %.7g by differences, %.7g analytic", (double)lambdas[k],
               (double)numeric, (double)analytic);
    }
    return 1;
}

static int test_clip_adam_ema(void)
{
    static float params[TU_NUM_PARAMS], grad[TU_NUM_PARAMS], m[TU_NUM_PARAMS], v[TU_NUM_PARAMS], ema[TU_NUM_PARAMS];
    const tu_golden_array grads = tu_golden("adam_grads");
    int sizes[TU_MLP_TENSORS], k;
    float norms[3];
    tu_adam adam;
    memcpy(params, tu_golden("mlp_params").f, sizeof params);
    memset(m, 0, sizeof m);
    memset(v, 0, sizeof v);
    adam.exp_avg = m;
    adam.exp_avg_sq = v;
    adam.n = TU_NUM_PARAMS;
    adam.step = 0;
    for (k = 0; k < TU_MLP_TENSORS; ++k) {
        sizes[k] = tu_mlp_tensor_size(TU_DEFAULT_CONFIG, k);
    }
    for (k = 0; k < 3; ++k) {
        memcpy(grad, grads.f + k * TU_NUM_PARAMS, sizeof grad);
        norms[k] = tu_clip_grad_norm(grad, sizes, TU_MLP_TENSORS, 5.0f);
        tu_adamw_step(&adam, params, grad, 5e-3f, 0.05f);
        tu_ema_update(ema, params, TU_NUM_PARAMS, 1.0f - 0.995f, k == 0);
    }
    return near("norms", norms, tu_golden("adam_norms").f, 3, 1e-5f, 0.0f)
           && near("params", params, tu_golden("adam_params").f, TU_NUM_PARAMS, 1e-5f, 1e-6f)
           && near("exp_avg", m, tu_golden("adam_exp_avg").f, TU_NUM_PARAMS, 1e-5f, 1e-7f)
           && near("exp_avg_sq", v, tu_golden("adam_exp_avg_sq").f, TU_NUM_PARAMS, 1e-5f, 1e-9f)
           && near("ema", ema, tu_golden("adam_ema").f, TU_NUM_PARAMS, 1e-5f, 1e-7f);
}

static int test_gate(void)
{
    static tu_gate gate;
    const tu_golden_array mis = tu_golden("gate_misfit"), rms = tu_golden("gate_rms"), acc = tu_golden("gate_accept");
    uint32_t k;
    tu_gate_reset(&gate);
    for (k = 0; k < acc.count; ++k) {
        const int got = tu_gate_check(&gate, TU_DEFAULT_CONFIG, mis.f + k * TU_CH, rms.f + k * TU_CH);
        EXPECT(got == (int)acc.q[k], "window %u: accept %d, want %lld", k, got, (long long)acc.q[k]);
    }
    return 1;
}

/* The float16 reservoir's storage (tu_trainer.c with TU_RESERVOIR_HALF): each value divided by its
 * channel's scale, rounded to binary16 and multiplied back, bit for bit as
 * torch_ude.reservoir.stored_jets (jets over eleven decades, some past binary16's range: +-Inf). */
static int test_half_storage(void)
{
    const tu_golden_array jets = tu_golden("store_jets"), scale = tu_golden("store_scale"),
                          want = tu_golden("store_values");
    uint32_t k;
    for (k = 0; k < jets.count; ++k) {
        const float s = scale.f[k % scale.count];
        const float got = tu_half_to_float(tu_half_from_float(jets.f[k] / s)) * s;
        EXPECT(memcmp(&got, &want.f[k], sizeof got) == 0, "value %u (%.9g, scale %.9g): got %.9g, want %.9g", k,
               (double)jets.f[k], (double)s, (double)got, (double)want.f[k]);
    }
    return 1;
}

/* The whole run: the golden stream replayed (tu_replay: chunks of one training tick, the due
 * updates, then the reservoir to TU_MAX_STEPS), against the float32 reference. */
static int test_whole_run(void)
{
    static float ema[TU_NUM_WEIGHTS], raw[TU_NUM_WEIGHTS];
    float low[TU_CH], high[TU_CH];
    const tu_golden_array want = tu_golden("run_counters");
    tu_replay_result result;
    tu_report rep;
    uint64_t got[11];
    int k;
    EXPECT(tu_trainer_init(&trainer, TU_DEFAULT_CONFIG, (uint64_t)tu_golden("run_seed").q[0]) == TU_OK, "init failed");
    EXPECT(tu_replay(&trainer, stream_path, TU_MAX_STEPS, &result, NULL, 0, NULL) == TU_FILE_END, "%s: %s",
           stream_path, tu_file_status_string(result.file));
    tu_trainer_report(&trainer, &rep);
    got[0] = rep.counters.samples;
    got[1] = rep.counters.nonfinite_samples;
    got[2] = rep.counters.out_of_order;
    got[3] = rep.counters.gaps;
    got[4] = rep.counters.long_gaps;
    got[5] = rep.counters.bridged;
    got[6] = rep.counters.windows;
    got[7] = rep.counters.nonfinite;
    got[8] = rep.counters.boundary;
    got[9] = rep.counters.misfit;
    got[10] = rep.counters.accepted;
    for (k = 0; k < 11; ++k) {
        EXPECT((int64_t)got[k] == want.q[k], "counter %d: got %llu, want %lld", k, (unsigned long long)got[k],
               (long long)want.q[k]);
    }
    EXPECT(rep.calibrated && rep.calibration.m == (int)tu_golden("run_m").q[0], "m = %d, want %lld",
           rep.calibration.m, (long long)tu_golden("run_m").q[0]);
    EXPECT(rep.updates == tu_golden("run_updates").q[0], "updates %lld, want %lld", (long long)rep.updates,
           (long long)tu_golden("run_updates").q[0]);
    memcpy(&trained, &trainer, sizeof trained);
    tu_trainer_weights(&trainer, 1, ema, TU_NUM_WEIGHTS);
    tu_trainer_weights(&trainer, 0, raw, TU_NUM_WEIGHTS);
    EXPECT(tu_trainer_span(&trainer, low, high, TU_CH - 1) == TU_ERR_ARGUMENT, "span of a wrong channel count");
#if TU_ENVELOPE
    /* the envelope's span: the reference's, bit for bit (same jets, same stored values) */
    EXPECT(tu_trainer_span(&trainer, low, high, TU_CH) == TU_OK, "span");
    EXPECT(near("span low", low, tu_golden("run_span_low").f, TU_CH, 0.0f, 0.0f)
           && near("span high", high, tu_golden("run_span_high").f, TU_CH, 0.0f, 0.0f), "span differs");
#else
    EXPECT(tu_trainer_span(&trainer, low, high, TU_CH) == TU_ERR_CONFIG, "span without TU_ENVELOPE");
#endif
#if TU_VELOCITY
    {   /* the derived stream's newest samples, in the ring oldest first: the reference's float32 derivative */
        static float ring[TU_RING_LEN_MAX * TU_CH];
        const int len = TU_DEFAULT_CONFIG->ring_len;
        const tu_golden_array want_ring = tu_golden("run_ring");
        int c;
        for (k = 0; k < len; ++k) {
            for (c = 0; c < TU_CH; ++c) {
                ring[k * TU_CH + c] = trainer.ring[(trainer.ring_head + k) % len][c];
            }
        }
        EXPECT(want_ring.count == (uint32_t)(len * TU_CH)
                   && near("derived stream", ring, want_ring.f, len * TU_CH, 0.0f, 0.0f),
               "the derived stream differs from the reference's");
    }
#endif
    return near("sigma", rep.calibration.sigma, tu_golden("run_sigma").f, TU_CH, 1e-4f, 0.0f)
           && near("x_rms", rep.calibration.x_rms, tu_golden("run_x_rms").f, TU_CH, 1e-4f, 0.0f)
           && near("s1", rep.calibration.s1, tu_golden("run_s1").f, TU_CH, 1e-4f, 0.0f)
           && near("s2", rep.calibration.s2, tu_golden("run_s2").f, TU_CH, 1e-4f, 0.0f)
           && near("lambda2", &rep.calibration.lambda2, tu_golden("run_lambda2").f, 1, 0.0f, 0.0f)
           && near("weight_decay", &rep.calibration.weight_decay, tu_golden("run_weight_decay").f, 1, 1e-4f, 0.0f)
           && near("raw weights", raw, tu_golden("run_raw").f, TU_NUM_WEIGHTS, 0.0f, TU_RUN_ATOL)
           && near("EMA weights", ema, tu_golden("run_ema").f, TU_NUM_WEIGHTS, 0.0f, TU_RUN_ATOL);
}

/* A weight made non-finite: every update is skipped and counted, none applied or reported as made.
 * Runs after test_whole_run (a calibrated trainer with a full reservoir). */
static int test_skipped_updates(void)
{
    tu_report before, after;
    int done = -1;
    tu_trainer_report(&trainer, &before);
    trainer.params[0] = NAN;
    EXPECT(tu_trainer_steps(&trainer, 3, &done) == TU_SKIPPED, "steps with a NaN weight did not report a skip");
    tu_trainer_report(&trainer, &after);
    EXPECT(done == 0, "steps reported %d updates made, want 0", done);
    EXPECT(after.updates == before.updates, "update count moved from %lld to %lld", (long long)before.updates,
           (long long)after.updates);
    EXPECT(after.counters.skipped_updates == before.counters.skipped_updates + 3u, "skipped %llu -> %llu, want +3",
           (unsigned long long)before.counters.skipped_updates, (unsigned long long)after.counters.skipped_updates);
    return 1;
}

static int test_api_misuse(void)
{
    static tu_trainer blank; /* zeroed: never initialized */
    const float good[TU_CH] = {0.0f}, bad[TU_CH] = {NAN};
    const uint64_t streamed = TU_RUN_LAG > 0 ? 0u : 1u; /* a pushed sample reaches the stream (no run of 2M + 2) */
    const int64_t tick12 = 12;
    float w[TU_NUM_WEIGHTS];
    tu_report rep;
    int due, s;
    EXPECT(tu_trainer_init(NULL, TU_DEFAULT_CONFIG, 0u) == TU_ERR_NULL, "init(NULL)");
    EXPECT(tu_trainer_push(NULL, 0, 0, good, TU_PUSH_CH) == TU_ERR_NULL, "push(NULL)");
    EXPECT(tu_trainer_push(&blank, 0, 0, good, TU_PUSH_CH) == TU_ERR_UNINITIALIZED, "push(uninitialized)");
    EXPECT(tu_trainer_step(&blank) == TU_ERR_UNINITIALIZED, "step(uninitialized)");
    EXPECT(tu_trainer_steps(NULL, 0, &due) == TU_ERR_NULL && due == 0, "steps(NULL, 0)");
    EXPECT(tu_trainer_steps(&blank, 0, NULL) == TU_ERR_UNINITIALIZED, "steps(uninitialized, 0)");
    EXPECT(tu_trainer_ready(NULL) == TU_ERR_NULL, "ready(NULL) = %d", tu_trainer_ready(NULL));
    EXPECT(tu_trainer_ready(&blank) == TU_ERR_UNINITIALIZED, "ready(uninitialized) = %d", tu_trainer_ready(&blank));
    EXPECT(tu_trainer_report(&blank, &rep) == TU_ERR_UNINITIALIZED, "report(uninitialized)");
    EXPECT(tu_trainer_init(&trainer, TU_DEFAULT_CONFIG, 1u) == TU_OK, "init");
    EXPECT(tu_trainer_push(&trainer, 0, 0, good, TU_PUSH_CH + 1) == TU_ERR_CHANNELS, "push of TU_PUSH_CH + 1 channels");
    EXPECT(TU_PUSH_CH == TU_CH || tu_trainer_push(&trainer, 0, 0, good, TU_CH) == TU_ERR_CHANNELS,
           "push of derived velocities");
    EXPECT(tu_trainer_push(&trainer, 0, 0, NULL, TU_PUSH_CH) == TU_ERR_NULL, "push(y NULL)");
    EXPECT(tu_trainer_push_chunk(&trainer, 1, NULL, NULL, good, TU_PUSH_CH, &due) == TU_ERR_NULL,
           "push_chunk(ticks NULL)");
    EXPECT(tu_trainer_push_chunk(&trainer, -1, NULL, NULL, NULL, TU_PUSH_CH, &due) == TU_ERR_ARGUMENT,
           "negative count");
    EXPECT(tu_trainer_step(&trainer) == TU_ERR_NOT_READY, "step before calibration");
    EXPECT(tu_trainer_ready(&trainer) == 0, "ready before calibration = %d", tu_trainer_ready(&trainer));
    EXPECT(tu_trainer_steps(&trainer, -5, NULL) == TU_ERR_ARGUMENT, "steps(t, -5)");
    EXPECT(tu_trainer_push(&trainer, 10, 0, good, TU_PUSH_CH) == TU_OK, "push");
    EXPECT(tu_trainer_push(&trainer, 10, 0, good, TU_PUSH_CH) == TU_OK, "push of a repeated tick");
    EXPECT(tu_trainer_push(&trainer, 5, 0, good, TU_PUSH_CH) == TU_OK, "push of an earlier tick");
    EXPECT(tu_trainer_push(&trainer, 11, 0, bad, TU_PUSH_CH) == TU_OK, "push of NaN");
    if (TU_NU > 0) { /* a plant with recorded inputs: every sample carries them after the states */
        float nan_input[TU_CH] = {0.0f};
        nan_input[TU_PUSH_CH - 1] = NAN;
        EXPECT(tu_trainer_push(&trainer, 12, 0, good, TU_PUSH_STATES) == TU_ERR_CHANNELS,
               "push of the states without inputs");
        EXPECT(tu_trainer_push_chunk(&trainer, 1, &tick12, NULL, good, TU_PUSH_STATES, &due) == TU_ERR_CHANNELS,
               "push_chunk of the states without inputs");
        EXPECT(tu_trainer_push(&trainer, 12, 0, nan_input, TU_PUSH_CH) == TU_OK, "push of a NaN input");
    }
    EXPECT(tu_trainer_weights(&trainer, 2, w, TU_NUM_WEIGHTS) == TU_ERR_ARGUMENT, "weights(which 2)");
    EXPECT(tu_trainer_weights(&trainer, 1, w, TU_NUM_WEIGHTS - 1) == TU_ERR_ARGUMENT, "weights(short)");
    EXPECT(tu_trainer_report(&trainer, &rep) == TU_OK, "report");
    EXPECT(rep.counters.samples == streamed * (2u + (TU_NU > 0)) && rep.counters.out_of_order == 2
               && rep.counters.nonfinite_samples == streamed * (1u + (TU_NU > 0)),
           "counters: %llu samples, %llu out of order, %llu non-finite", (unsigned long long)rep.counters.samples,
           (unsigned long long)rep.counters.out_of_order, (unsigned long long)rep.counters.nonfinite_samples);
    for (s = -9; s <= 1; ++s) {
        EXPECT(tu_status_string((tu_status)s) != NULL && strlen(tu_status_string((tu_status)s)) > 0, "string %d", s);
    }
    return 1;
}

/* The state a device reaches after months at 1 kHz: every counter just below 2^32 and the update
 * count just below 2^31. Pushing and updating must count on, not wrap or overflow, and keep the
 * weights finite at the schedule's last rate. */
static int test_counters_near_their_limits(void)
{
    static const float zero[TU_CH] = {0.0f};
    const uint64_t near = 0xFFFFFFFEu;
    tu_report rep;
    int64_t tick;
    int k, done = 0;
    memcpy(&trainer, &trained, sizeof trainer);
    trainer.counters.samples = trainer.counters.windows = trainer.counters.out_of_order = near;
    trainer.seen = near;
    trainer.adam_step = INT32_MAX - 1;
    tick = pushed_tick(&trainer); /* the run goes on: one stream sample a push */
    for (k = 1; k <= 2 * TU_M_MAX + 20; ++k) { /* at least two windows at any stride */
        EXPECT(tu_trainer_push(&trainer, tick + k, pushed_segment(&trainer), zero, TU_PUSH_CH) == TU_OK, "push %d", k);
    }
    EXPECT(tu_trainer_push(&trainer, tick, pushed_segment(&trainer), zero, TU_PUSH_CH) == TU_OK, "push out of order");
    EXPECT(tu_trainer_steps(&trainer, 3, &done) >= 0 && done == 3, "3 updates near 2^31: %d made", done);
    tu_trainer_report(&trainer, &rep);
    EXPECT(rep.counters.samples == near + 2u * TU_M_MAX + 20u, "samples %llu, want %llu",
           (unsigned long long)rep.counters.samples, (unsigned long long)(near + 2u * TU_M_MAX + 20u));
    EXPECT(rep.counters.out_of_order == near + 1u, "out_of_order %llu", (unsigned long long)rep.counters.out_of_order);
    EXPECT(rep.counters.windows > near, "windows %llu wrapped", (unsigned long long)rep.counters.windows);
    EXPECT(rep.seen >= near, "seen %llu wrapped", (unsigned long long)rep.seen);
    EXPECT(rep.updates == (int64_t)INT32_MAX + 2, "updates %lld, want 2^31 + 1", (long long)rep.updates);
    EXPECT(!TU_SCHEDULE_COSINE || rep.lr == TU_LR_MIN, "lr %g after the schedule, want %g", (double)rep.lr,
           (double)TU_LR_MIN);
    return 1;
}

/* Past TU_MAX_STEPS the cosine schedule stays at its last rate; it never climbs back to TU_LR. */
static int test_schedule_after_its_end(void)
{
    const int64_t at[4] = {TU_MAX_STEPS, TU_MAX_STEPS + 1, 2 * (int64_t)TU_MAX_STEPS, 16000};
    tu_report rep;
    int k;
    for (k = 0; k < 4; ++k) {
        memcpy(&trainer, &trained, sizeof trainer);
        trainer.adam_step = at[k];
        EXPECT(tu_trainer_step(&trainer) == TU_OK, "update %lld", (long long)at[k]);
        tu_trainer_report(&trainer, &rep);
        EXPECT(rep.lr == (TU_SCHEDULE_COSINE ? TU_LR_MIN : TU_LR), "lr %g at update %lld", (double)rep.lr,
               (long long)at[k]);
    }
    return 1;
}

/* One sample far ahead (a sensor silent for a long time, a tick that jumped): at most one
 * second of stream's updates are due, not 2^31 - 1. */
static int test_due_updates_after_a_long_gap(void)
{
    static const float zero[TU_RUN_MAX * TU_CH] = {0.0f};
    const int64_t jumps[3] = {1000000000000LL, 3 * (int64_t)TU_DUE_SPAN, INT64_MAX / 2};
    const int bound = (int)(TU_DUE_SPAN / TU_TRAIN_EVERY) + 1;
    const int count = TU_RUN_LAG + (TU_RUN_LAG > 0 ? 2 : 1); /* pushed samples that reach the stream */
    int64_t ticks[TU_RUN_MAX];
    int k, i, due = -1;
    for (k = 0; k < 3; ++k) {
        memcpy(&trainer, &trained, sizeof trainer);
        for (i = 0; i < count; ++i) {
            ticks[i] = pushed_tick(&trainer) + jumps[k] + i;
        }
        EXPECT(tu_trainer_push_chunk(&trainer, count, ticks, NULL, zero, TU_PUSH_CH, &due) == TU_OK, "push_chunk");
        EXPECT(due >= 1 && due <= bound, "%d updates due after a gap of %lld ticks, want 1..%d", due,
               (long long)jumps[k], bound);
    }
    /* a gap the Python trainer bridges or counts in full: the same count as due_updates (of the stream's ticks:
     * the newest one M ticks behind the newest pushed one where the trainer derives the velocities) */
    memcpy(&trainer, &trained, sizeof trainer);
    for (i = 0; i < count; ++i) {
        ticks[i] = pushed_tick(&trainer) + 3 * TU_TRAIN_EVERY + i;
    }
    {
        const int64_t newest = ticks[count - 1] - TU_RUN_LAG / 2;
        const int64_t want = newest / TU_TRAIN_EVERY - trainer.last_tick / TU_TRAIN_EVERY;
        EXPECT(newest - trainer.last_tick > TU_DUE_SPAN
                   || (tu_trainer_push_chunk(&trainer, count, ticks, NULL, zero, TU_PUSH_CH, &due) == TU_OK
                       && due == want),
               "%d updates due after %lld ticks, want %lld", due, (long long)(newest - trainer.last_tick),
               (long long)want);
    }
    return 1;
}

/* Fill a fresh trainer's calibration record with `value` (NaN: no valid window; a constant: no
 * motion) and check that it stops with `want` as the Python trainer does, and stays stopped. */
static int calibration_stops(float value, tu_status want, const char *what)
{
    float y[TU_CH];
    tu_status st = TU_OK;
    tu_report rep;
    int k, c;
    for (c = 0; c < TU_CH; ++c) {
        y[c] = value;
    }
    tu_trainer_init(&trainer, TU_DEFAULT_CONFIG, 1u);
    for (k = 0; k < TU_CAL_LEN + TU_RUN_LAG && st == TU_OK; ++k) {
        st = tu_trainer_push(&trainer, k, 0, y, TU_PUSH_CH);
    }
    EXPECT(st == want && k == TU_CAL_LEN + TU_RUN_LAG, "%s: push %d returned %d (%s), want %d", what, k, (int)st,
           tu_status_string(st), (int)want);
    EXPECT(tu_trainer_push(&trainer, k, 0, y, TU_PUSH_CH) == want, "%s: the next push did not stop", what);
    EXPECT(tu_trainer_step(&trainer) == want && tu_trainer_ready(&trainer) == (int)want, "%s: step/ready", what);
    tu_trainer_report(&trainer, &rep);
    EXPECT(rep.calibrated == (int32_t)want && rep.counters.calibration_failures == 1u
               && rep.counters.samples == (uint64_t)TU_CAL_LEN,
           "%s: report calibrated %d, %llu failures, %llu samples", what, (int)rep.calibrated,
           (unsigned long long)rep.counters.calibration_failures, (unsigned long long)rep.counters.samples);
    EXPECT(tu_status_is_calibration(want) && strstr(tu_status_string(want), "stopped") != NULL, "%s: string", what);
    return 1;
}

static int test_a_failed_calibration_stops_with_its_cause(void)
{
    return calibration_stops(NAN, TU_ERR_CAL_NO_WINDOW, "all NaN")
           && calibration_stops(0.25f, TU_ERR_CAL_ZERO_SCALE, "constant");
}

/* A damaged checkpoint: an index out of range is refused by every call (no access out of
 * bounds), and tu_trainer_restore checks the whole instance before use. */
static int test_damaged_checkpoints_are_refused(void)
{
    static tu_trainer copy;
    static unsigned char bytes[sizeof(tu_trainer) + 1];
    static const float zero[TU_CH] = {0.0f};
    float w[TU_NUM_WEIGHTS];
    int due = 0;
    /* an index out of range in a live instance (bytes written over it) */
    tu_trainer_init(&trainer, TU_DEFAULT_CONFIG, 1u);
    tu_trainer_push(&trainer, 0, 0, zero, TU_PUSH_CH);
    trainer.cal_fill = TU_CAL_LEN + 1000;
    EXPECT(tu_trainer_push(&trainer, 1, 0, zero, TU_PUSH_CH) == TU_ERR_CORRUPT, "push with cal_fill out of range");
    memcpy(&trainer, &trained, sizeof trainer);
    trainer.ring_head = -7;
    EXPECT(tu_trainer_push(&trainer, trainer.last_tick + 1, 0, zero, TU_PUSH_CH) == TU_ERR_CORRUPT,
           "push with ring_head out of range");
    EXPECT(tu_trainer_push_chunk(&trainer, 0, NULL, NULL, NULL, TU_PUSH_CH, &due) == TU_ERR_CORRUPT, "push_chunk");
    EXPECT(tu_trainer_step(&trainer) == TU_ERR_CORRUPT && tu_trainer_ready(&trainer) == TU_ERR_CORRUPT, "step/ready");
    memcpy(&trainer, &trained, sizeof trainer);
    trainer.cal.m = 0;
    EXPECT(tu_trainer_push(&trainer, trainer.last_tick + 1, 0, zero, TU_PUSH_CH) == TU_ERR_CORRUPT, "m = 0");
    memcpy(&trainer, &trained, sizeof trainer);
    trainer.gate.count = TU_GATE_HISTORY + 1;
    EXPECT(tu_trainer_push(&trainer, trainer.last_tick + 1, 0, zero, TU_PUSH_CH) == TU_ERR_CORRUPT, "gate count");
    /* restore: the good bytes give the same trainer back; damaged ones are refused */
    memcpy(bytes, &trained, sizeof trained);
    EXPECT(tu_trainer_restore(&copy, TU_DEFAULT_CONFIG, bytes, sizeof trained) == TU_OK && memcmp(&copy, &trained, sizeof copy) == 0,
           "restore of good bytes");
    EXPECT(tu_trainer_restore(&copy, TU_DEFAULT_CONFIG, bytes, sizeof trained - 1) == TU_ERR_ARGUMENT, "restore of short bytes");
    EXPECT(tu_trainer_restore(NULL, TU_DEFAULT_CONFIG, bytes, sizeof trained) == TU_ERR_NULL, "restore into NULL");
    memcpy(&trainer, &trained, sizeof trainer); /* the restored copy and the original continue bit for bit */
    EXPECT(tu_trainer_steps(&copy, 10, &due) == TU_OK && due == 10 && tu_trainer_steps(&trainer, 10, &due) == TU_OK
               && memcmp(&copy, &trainer, sizeof copy) == 0,
           "a restored trainer continues as the original");
    memcpy(bytes, &trained, sizeof trained);
#if TU_PHYSICAL
    memcpy(&copy, &trained, sizeof copy);
    copy.params[TU_NUM_PARAMS] = TU_DEFAULT_CONFIG->theta_high[0] + 1.0f; /* theta outside its bounds */
    memcpy(bytes, &copy, sizeof copy);
    EXPECT(tu_trainer_restore(&copy, TU_DEFAULT_CONFIG, bytes, sizeof copy) == TU_ERR_CORRUPT,
           "restore of theta outside its bounds");
    memcpy(bytes, &trained, sizeof trained);
#endif
    memcpy(bytes + 1, &trained, sizeof trained); /* unaligned */
    EXPECT(tu_trainer_restore(&copy, TU_DEFAULT_CONFIG, bytes + 1, sizeof trained) == TU_OK, "restore from unaligned bytes");
    copy.params[3] = NAN;
    memcpy(bytes, &copy, sizeof copy);
    EXPECT(tu_trainer_restore(&copy, TU_DEFAULT_CONFIG, bytes, sizeof copy) == TU_ERR_CORRUPT, "restore of a NaN weight");
    EXPECT(tu_trainer_weights(&copy, 0, w, TU_NUM_WEIGHTS) == TU_ERR_UNINITIALIZED,
           "a refused restore leaves it unset");
    memcpy(&copy, &trained, sizeof copy);
    copy.exp_avg_sq[0] = -1.0f;
    memcpy(bytes, &copy, sizeof copy);
    EXPECT(tu_trainer_restore(&copy, TU_DEFAULT_CONFIG, bytes, sizeof copy) == TU_ERR_CORRUPT, "restore of a negative moment");
    memcpy(&copy, &trained, sizeof copy);
    copy.calibrated = 7;
    memcpy(bytes, &copy, sizeof copy);
    EXPECT(tu_trainer_restore(&copy, TU_DEFAULT_CONFIG, bytes, sizeof copy) == TU_ERR_CORRUPT, "restore of a bad state");
#if TU_ENVELOPE
    memcpy(&copy, &trained, sizeof copy);
    copy.span_low[0] = copy.span_high[0] + 1.0f;
    memcpy(bytes, &copy, sizeof copy);
    EXPECT(tu_trainer_restore(&copy, TU_DEFAULT_CONFIG, bytes, sizeof copy) == TU_ERR_CORRUPT, "restore of low > high");
    memcpy(&copy, &trained, sizeof copy);
    copy.span_high[TU_CH - 1] = NAN;
    memcpy(bytes, &copy, sizeof copy);
    EXPECT(tu_trainer_restore(&copy, TU_DEFAULT_CONFIG, bytes, sizeof copy) == TU_ERR_CORRUPT, "restore of a NaN span");
#endif
#if TU_VELOCITY
    memcpy(&copy, &trained, sizeof copy);
    copy.vel_head = 2 * TU_DEFAULT_CONFIG->velocity_half_width + 2; /* one past the configuration's ring */
    memcpy(bytes, &copy, sizeof copy);
    EXPECT(tu_trainer_restore(&copy, TU_DEFAULT_CONFIG, bytes, sizeof copy) == TU_ERR_CORRUPT,
           "restore of a velocity ring index out of range");
    memcpy(&copy, &trained, sizeof copy);
    copy.vel_count = -1;
    memcpy(bytes, &copy, sizeof copy);
    EXPECT(tu_trainer_restore(&copy, TU_DEFAULT_CONFIG, bytes, sizeof copy) == TU_ERR_CORRUPT,
           "restore of a negative velocity run");
#endif
    return 1;
}

/* A configuration that does not fit the build, or tables of another configuration (their settings
 * hash), is refused at init with TU_ERR_CONFIG; so is a checkpoint restored with another configuration. */
static int test_configurations_are_checked(void)
{
    static tu_trainer t;
    static tu_model other_model;
    static unsigned char bytes[sizeof(tu_trainer)];
    static const char other_hash[] = "0123456789abcdef";
    tu_config cfg = *TU_DEFAULT_CONFIG;
    EXPECT(tu_config_count() == TU_CONFIG_COUNT && tu_config_get(0) == TU_DEFAULT_CONFIG
               && tu_config_get(TU_CONFIG_COUNT) == NULL && tu_config_get(-1) == NULL,
           "the configuration table");
    EXPECT(strcmp(TU_DEFAULT_CONFIG->hash, TU_CONFIG_HASH) == 0 && tu_config_check(TU_DEFAULT_CONFIG) == TU_OK,
           "configuration 0 is the macros' and fits");
    EXPECT(tu_trainer_init(&t, NULL, 1u) == TU_ERR_NULL && tu_trainer_step(&t) == TU_ERR_UNINITIALIZED, "no configuration");
    cfg.hash = other_hash; /* its tables were generated for another configuration */
    EXPECT(tu_trainer_init(&t, &cfg, 1u) == TU_ERR_CONFIG && tu_trainer_step(&t) == TU_ERR_UNINITIALIZED,
           "tables of another settings hash");
    cfg = *TU_DEFAULT_CONFIG;
    cfg.magic = 0u;
    EXPECT(tu_trainer_init(&t, &cfg, 1u) == TU_ERR_CONFIG, "not a generated configuration");
    cfg = *TU_DEFAULT_CONFIG;
    cfg.n = TU_N_MAX + 1;
    EXPECT(tu_trainer_init(&t, &cfg, 1u) == TU_ERR_CONFIG, "more states than the build holds");
    cfg = *TU_DEFAULT_CONFIG;
    cfg.capacity = TU_CAPACITY_MAX + 1;
    EXPECT(tu_trainer_init(&t, &cfg, 1u) == TU_ERR_CONFIG, "a reservoir larger than the build's");
    cfg = *TU_DEFAULT_CONFIG;
    cfg.num_params -= 1;
    EXPECT(tu_trainer_init(&t, &cfg, 1u) == TU_ERR_CONFIG, "a weight count that disagrees with the layers");
    cfg = *TU_DEFAULT_CONFIG;
    cfg.model = NULL;
    EXPECT(tu_trainer_init(&t, &cfg, 1u) == TU_ERR_CONFIG, "no tables");
    /* the input map (tu_model.h): one that disagrees with the network's input width, names a state out of
     * range, twice or both plain and periodic, or (a build without TU_INPUT_MAP) any map at all */
    cfg = *TU_DEFAULT_CONFIG;
    cfg.n_periodic += 1;
    EXPECT(tu_trainer_init(&t, &cfg, 1u) == TU_ERR_CONFIG, "a periodic count that disagrees with the input width");
    cfg = *TU_DEFAULT_CONFIG;
    if (!cfg.input_map) {  /* the same width read through the map: accepted only by a build with map code */
        int k;
        cfg.input_map = 1;
        cfg.n_plain = TU_N;
        for (k = 0; k < TU_N; ++k) {
            cfg.plain[k] = k;
        }
        EXPECT((tu_trainer_init(&t, &cfg, 1u) == TU_OK) == TU_INPUT_MAP, "an identity map (TU_INPUT_MAP %d)",
               TU_INPUT_MAP);
    } else {
        int *edit = cfg.n_periodic > 0 ? cfg.periodic : cfg.plain;
        EXPECT(tu_trainer_init(&t, &cfg, 1u) == TU_OK, "the generated map");
        edit[0] = TU_N;
        EXPECT(tu_trainer_init(&t, &cfg, 1u) == TU_ERR_CONFIG, "a mapped state out of range");
        edit[0] = -1;
        EXPECT(tu_trainer_init(&t, &cfg, 1u) == TU_ERR_CONFIG, "a negative mapped state");
        cfg = *TU_DEFAULT_CONFIG;
        if (cfg.n_plain > 0 && cfg.n_periodic > 0) {
            cfg.periodic[0] = cfg.plain[0];
            EXPECT(tu_trainer_init(&t, &cfg, 1u) == TU_ERR_CONFIG, "a state both plain and periodic");
        }
    }
#if TU_VELOCITY
    /* the velocity derivative: a missing row, positions that are not half the states, a window past the ring */
    if (TU_DEFAULT_CONFIG->positions > 0) {
        cfg = *TU_DEFAULT_CONFIG;
        cfg.velocity_row = NULL;
        EXPECT(tu_trainer_init(&t, &cfg, 1u) == TU_ERR_CONFIG, "no velocity row");
        cfg = *TU_DEFAULT_CONFIG;
        cfg.positions = TU_N;
        EXPECT(tu_trainer_init(&t, &cfg, 1u) == TU_ERR_CONFIG, "as many positions as states");
        cfg = *TU_DEFAULT_CONFIG;
        cfg.velocity_half_width = TU_VEL_RING_MAX / 2;
        EXPECT(tu_trainer_init(&t, &cfg, 1u) == TU_ERR_CONFIG, "a velocity window longer than the ring");
    }
#endif
#if TU_CONFIG_COUNT > 1
    cfg = *TU_DEFAULT_CONFIG;
    cfg.model = tu_config_get(1)->model; /* configuration 1's tables under configuration 0's settings */
    EXPECT(tu_trainer_init(&t, &cfg, 1u) == TU_ERR_CONFIG, "configuration 1's tables for configuration 0");
    EXPECT(tu_trainer_init(&t, tu_config_get(1), 1u) == TU_OK, "configuration 1");
    memcpy(bytes, &t, sizeof t);
    EXPECT(tu_trainer_restore(&t, TU_DEFAULT_CONFIG, bytes, sizeof bytes) == TU_ERR_CONFIG,
           "a checkpoint of configuration 1 restored as configuration 0");
#endif
    /* a consistent configuration of another hash (its own tables): a checkpoint of this one is refused */
    other_model = *TU_DEFAULT_CONFIG->model;
    other_model.hash = other_hash;
    cfg = *TU_DEFAULT_CONFIG;
    cfg.hash = other_hash;
    cfg.model = &other_model;
    EXPECT(tu_config_check(&cfg) == TU_OK, "a consistent copy");
    memcpy(bytes, &trained, sizeof trained);
    EXPECT(tu_trainer_restore(&t, &cfg, bytes, sizeof bytes) == TU_OK, "the same state hash (a longer schedule)");
    cfg.state_hash = other_hash;
    memcpy(bytes, &trained, sizeof trained);
    EXPECT(tu_trainer_restore(&t, &cfg, bytes, sizeof bytes) == TU_ERR_CONFIG && tu_trainer_step(&t) == TU_ERR_UNINITIALIZED,
           "a checkpoint restored with another configuration");
    EXPECT(tu_trainer_restore(&t, TU_DEFAULT_CONFIG, bytes, sizeof bytes) == TU_OK && tu_trainer_config(&t) == TU_DEFAULT_CONFIG,
           "the same checkpoint with its own");
    EXPECT(tu_trainer_restore(&t, NULL, bytes, sizeof bytes) == TU_ERR_NULL, "restore without a configuration");
    return 1;
}

#if TU_PHYSICAL
/* Float32 against float64 on the same jets: J^T J and |r|^2 are sums of ~10^3 float32 products (relative error
 * ~sqrt(R) eps ~ 1e-6), the errors' (J^T J)^-1 diagonal adds cond(Jacobi-scaled J^T J) ulp; the refit's theta is
 * the zero of a float32 J^T r, off scipy's by ~eps |J| |r| / lambda_min(J^T J). Seen: 9.3e-7 relative (errors) and
 * 1.5e-7 (theta, in units of half its bounds' width); the tolerances leave 100x and 67x. */
#ifndef TU_PHYS_SE_RTOL
#define TU_PHYS_SE_RTOL 1e-4f
#endif
#ifndef TU_PHYS_THETA_ATOL
#define TU_PHYS_THETA_ATOL 1e-5f
#endif

/* The Gauss-Newton standard errors and the end-of-run refit of theta on the trained instance's reservoir against
 * the float64 Python ones on the reference's identical reservoir (microcontroller.golden.physical_fit), and their
 * argument checks. Runs after test_whole_run. */
static int test_physical_fit(void)
{
    static tu_trainer t;
    static float w[TU_NUM_WEIGHTS];
    float se[TU_NUM_PHYSICAL], loss[2];
    tu_refit_report rep;
    EXPECT(tu_trainer_init(&t, TU_DEFAULT_CONFIG, 1) == TU_OK, "init");
    EXPECT(tu_trainer_refit(&t, 50, &rep) == TU_ERR_NOT_READY, "refit before calibration");
    EXPECT(tu_trainer_standard_errors(&t, se, TU_NUM_PHYSICAL) == TU_ERR_NOT_READY, "errors before calibration");
    memcpy(&t, &trained, sizeof t);
    EXPECT(tu_trainer_standard_errors(&t, se, TU_NUM_PHYSICAL - 1) == TU_ERR_ARGUMENT, "errors of a wrong count");
    EXPECT(tu_trainer_standard_errors(&t, NULL, TU_NUM_PHYSICAL) == TU_ERR_NULL, "errors into NULL");
    EXPECT(tu_trainer_refit(&t, 0, &rep) == TU_ERR_ARGUMENT, "refit of no evaluation");
    EXPECT(tu_trainer_refit(&t, 50, NULL) == TU_ERR_NULL, "refit into NULL");
    EXPECT(tu_trainer_standard_errors(&t, se, TU_NUM_PHYSICAL) == TU_OK, "standard errors");
    EXPECT(near("standard errors", se, tu_golden("phys_se").f, TU_NUM_PHYSICAL, TU_PHYS_SE_RTOL, 0.0f), "errors");
    EXPECT(TU_DEFAULT_CONFIG->refit_evaluations == (int)tu_golden("phys_evaluations").q[0], "refit_evaluations %d",
           TU_DEFAULT_CONFIG->refit_evaluations);
    EXPECT(tu_trainer_refit(&t, 50, &rep) == TU_OK && rep.converged, "refit: %d evaluations, converged %d",
           (int)rep.evaluations, (int)rep.converged);
    printf("  refit: %d evaluations, |r|^2 per jet %.9g -> %.9g\n", (int)rep.evaluations, (double)rep.loss_before,
           (double)rep.loss_after);
    EXPECT(tu_trainer_weights(&t, 1, w, TU_NUM_WEIGHTS) == TU_OK, "weights");
    loss[0] = rep.loss_before;
    loss[1] = rep.loss_after;
    return near("refit theta", w + TU_NUM_PARAMS, tu_golden("phys_theta").f, TU_NUM_PHYSICAL, 0.0f, TU_PHYS_THETA_ATOL)
           && near("refit loss", loss, tu_golden("phys_loss").f, 2, 1e-4f, 0.0f);
}
#endif

static int passed, failed;

static void run(const char *name, int (*test)(void))
{
    const int ok = test();
    printf("%s %s\n", ok ? "PASS" : "FAIL", name);
    if (ok) {
        ++passed;
    } else {
        ++failed;
    }
}

int main(int argc, char **argv)
{
    if (argc != 3 || tu_golden_load(argv[1]) != 0) {
        fprintf(stderr, "usage: %s GOLDEN_FILE STREAM_FILE (a readable golden file)\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IONBF, 0); /* every line out even if a sanitizer aborts the run */
    stream_path = argv[2];
    printf("sizeof(tu_trainer) = %lu bytes\n", (unsigned long)sizeof(tu_trainer));
    run("prng", test_prng);
    run("tanh", test_tanh);
    run("savgol", test_savgol);
    run("plant", test_plant);
    run("mlp", test_mlp);
    run("jet_gradient", test_jet_gradient);
    run("finite_differences", test_finite_differences);
    run("clip_adam_ema", test_clip_adam_ema);
    run("gate", test_gate);
    run("half_storage", test_half_storage);
    run("whole_run", test_whole_run);
    run("skipped_updates", test_skipped_updates);
    run("api_misuse", test_api_misuse);
    run("counters_near_their_limits", test_counters_near_their_limits);
    run("schedule_after_its_end", test_schedule_after_its_end);
    run("due_updates_after_a_long_gap", test_due_updates_after_a_long_gap);
    run("failed_calibration_stops", test_a_failed_calibration_stops_with_its_cause);
    run("damaged_checkpoints", test_damaged_checkpoints_are_refused);
    run("configurations_checked", test_configurations_are_checked);
#if TU_PHYSICAL
    run("physical_fit", test_physical_fit);
#endif
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}

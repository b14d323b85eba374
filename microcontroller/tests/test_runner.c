/* Host tests of the C trainer against golden vectors of the float32 Python reference
 * (microcontroller/golden.py), plus a finite-difference gradient check, skipped updates and API misuse.
 * Usage: run GOLDEN_FILE STREAM_FILE. Prints one line per test and "N passed, N failed". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden.h"
#include "tu_gate.h"
#include "tu_jet.h"
#include "tu_math.h"
#include "tu_mlp.h"
#include "tu_optim.h"
#include "tu_prng.h"
#include "tu_replay.h"
#include "tu_savgol.h"
#include "tu_stream_file.h"
#include "tu_trainer.h"

#ifndef TU_RUN_ATOL
#define TU_RUN_ATOL 1e-5f /* whole run: largest weight difference to the float32 reference (seen: 2e-7) */
#endif

static const char *stream_path;
static tu_trainer trainer;

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
    const int w = (int)(win.count / (TU_N * TU_TAPS));
    const float dt = tu_golden("sg_dt").f[0];
    float x[64][TU_N], xd[64][TU_N], xdd[64][TU_N], mis[64][TU_N], rms[64][TU_N], centre[64][TU_N];
    int k, c;
    for (k = 0; k < w; ++k) {
        const float *taps = win.f + k * TU_N * TU_TAPS;
        tu_savgol_estimate(tu_model_tables(), taps, dt, x[k], xd[k], xdd[k]);
        tu_savgol_misfit(tu_model_tables(), taps, mis[k], rms[k]);
        for (c = 0; c < TU_N; ++c) {
            centre[k][c] = tu_savgol_centre_residual(tu_model_tables(), taps + c * TU_TAPS);
        }
    }
    return near("x", &x[0][0], tu_golden("sg_x").f, w * TU_N, 1e-5f, 1e-5f)
           && near("xdot", &xd[0][0], tu_golden("sg_xdot").f, w * TU_N, 1e-5f, 1e-4f)
           && near("xddot", &xdd[0][0], tu_golden("sg_xddot").f, w * TU_N, 1e-5f, 1e-2f)
           && near("misfit", &mis[0][0], tu_golden("sg_misfit").f, w * TU_N, 1e-5f, 1e-5f)
           && near("rms", &rms[0][0], tu_golden("sg_rms").f, w * TU_N, 1e-6f, 1e-6f)
           && near("centre", &centre[0][0], tu_golden("sg_centre").f, w * TU_N, 1e-5f, 1e-5f);
}

static int test_mlp(void)
{
    const float *params = tu_golden("mlp_params").f;
    const tu_golden_array z = tu_golden("mlp_z");
    const int b = (int)(z.count / TU_N);
    static float grad[TU_NUM_PARAMS], grad_t[TU_NUM_PARAMS];
    float out[8][TU_N], jvp[8][TU_N], vjp[8][TU_N];
    int k;
    memset(grad, 0, sizeof grad);
    memset(grad_t, 0, sizeof grad_t);
    for (k = 0; k < b; ++k) {
        tu_mlp_acts acts;
        tu_mlp_tangents tan;
        tu_mlp_forward(params, z.f + k * TU_N, &acts);
        tu_mlp_jvp(params, &acts, tu_golden("mlp_zdot").f + k * TU_N, &tan);
        tu_mlp_vjp_input(params, &acts, tu_golden("mlp_obar").f + k * TU_N, vjp[k]);
        memcpy(out[k], acts.out, sizeof out[k]);
        memcpy(jvp[k], tan.out, sizeof jvp[k]);
        tu_mlp_backward(params, &acts, tu_golden("mlp_obar").f + k * TU_N, NULL, NULL, grad);
        tu_mlp_backward(params, &acts, tu_golden("mlp_obar").f + k * TU_N, &tan, tu_golden("mlp_tbar").f + k * TU_N,
                        grad_t);
    }
    return near("forward", &out[0][0], tu_golden("mlp_out").f, b * TU_N, 1e-5f, 1e-6f)
           && near("jvp", &jvp[0][0], tu_golden("mlp_jvp").f, b * TU_N, 1e-5f, 1e-6f)
           && near("vjp", &vjp[0][0], tu_golden("mlp_vjp").f, b * TU_N, 1e-5f, 1e-6f)
           && near("grad", grad, tu_golden("mlp_grad").f, TU_NUM_PARAMS, 1e-5f, 1e-6f)
           && near("grad with tangent", grad_t, tu_golden("mlp_grad_tangent").f, TU_NUM_PARAMS, 1e-5f, 1e-6f);
}

/* The loss and gradient of the golden jet minibatch at params, with lambda2. */
static float jet_loss(const float *params, float lambda2, float *grad, float *sq1, float *sq2)
{
    const tu_golden_array x = tu_golden("jet_x");
    const int b = (int)(x.count / TU_N);
    tu_field field;
    tu_jet_loss loss;
    int k;
    field.params = params;
    field.in_scale = tu_golden("jet_in").f;
    field.out_scale = tu_golden("jet_out").f;
    field.known = &tu_model_tables()->known;
    memcpy(loss.s1, tu_golden("jet_s1").f, sizeof loss.s1);
    memcpy(loss.s2, tu_golden("jet_s2").f, sizeof loss.s2);
    loss.lambda1 = 1.0f;
    loss.lambda2 = lambda2;
    *sq1 = *sq2 = 0.0f;
    memset(grad, 0, TU_NUM_PARAMS * sizeof(float));
    for (k = 0; k < b; ++k) {
        tu_jet_accumulate(&field, &loss, b, x.f + k * TU_N, tu_golden("jet_xdot").f + k * TU_N,
                          tu_golden("jet_xddot").f + k * TU_N, 1, grad, sq1, sq2);
    }
    *sq1 /= (float)b;
    *sq2 /= (float)b;
    return *sq1 + lambda2 * *sq2;
}

static int test_jet_gradient(void)
{
    static float grad[TU_NUM_PARAMS];
    const float *params = tu_golden("mlp_params").f;
    float sq1, sq2;
    jet_loss(params, 0.0f, grad, &sq1, &sq2);
    if (!(near("loss_r1 (lambda2 0)", &sq1, tu_golden("jet0_sq1").f, 1, 1e-5f, 0.0f)
          && near("loss_r2 (lambda2 0)", &sq2, tu_golden("jet0_sq2").f, 1, 1e-5f, 0.0f)
          && near("grad (lambda2 0)", grad, tu_golden("jet0_grad").f, TU_NUM_PARAMS, 1e-4f, 1e-6f))) {
        return 0;
    }
    jet_loss(params, 0.1f, grad, &sq1, &sq2);
    return near("loss_r1", &sq1, tu_golden("jet2_sq1").f, 1, 1e-5f, 0.0f)
           && near("loss_r2", &sq2, tu_golden("jet2_sq2").f, 1, 1e-5f, 0.0f)
           && near("grad", grad, tu_golden("jet2_grad").f, TU_NUM_PARAMS, 1e-4f, 1e-6f);
}

/* A directional finite-difference check of the whole jet gradient (KANN's kad_check_grad):
 * (L(p + h d) - L(p - h d)) / 2h against <grad, d> for a random unit direction d. */
static int test_finite_differences(void)
{
    static float grad[TU_NUM_PARAMS], scratch[TU_NUM_PARAMS], plus[TU_NUM_PARAMS], minus[TU_NUM_PARAMS];
    static float dir[TU_NUM_PARAMS];
    const float *params = tu_golden("mlp_params").f;
    const float lambdas[2] = {0.0f, 0.1f};
    const float h = 1e-2f;
    tu_prng p;
    float sq1, sq2, norm = 0.0f;
    int i, k;
    tu_prng_seed(&p, 7u, 0u);
    for (i = 0; i < TU_NUM_PARAMS; ++i) {
        dir[i] = tu_prng_normal(&p);
        norm += dir[i] * dir[i];
    }
    for (i = 0; i < TU_NUM_PARAMS; ++i) {
        dir[i] /= sqrtf(norm);
    }
    for (k = 0; k < 2; ++k) {
        float analytic = 0.0f, numeric;
        jet_loss(params, lambdas[k], grad, &sq1, &sq2);
        for (i = 0; i < TU_NUM_PARAMS; ++i) {
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
    int sizes[2 * TU_NUM_LAYERS], k;
    float norms[3];
    tu_adam adam;
    memcpy(params, tu_golden("mlp_params").f, sizeof params);
    memset(m, 0, sizeof m);
    memset(v, 0, sizeof v);
    adam.exp_avg = m;
    adam.exp_avg_sq = v;
    adam.n = TU_NUM_PARAMS;
    adam.step = 0;
    for (k = 0; k < 2 * TU_NUM_LAYERS; ++k) {
        sizes[k] = tu_mlp_tensor_size(k);
    }
    for (k = 0; k < 3; ++k) {
        memcpy(grad, grads.f + k * TU_NUM_PARAMS, sizeof grad);
        norms[k] = tu_clip_grad_norm(grad, sizes, 2 * TU_NUM_LAYERS, 5.0f);
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
        const int got = tu_gate_check(&gate, mis.f + k * TU_N, rms.f + k * TU_N);
        EXPECT(got == (int)acc.q[k], "window %u: accept %d, want %lld", k, got, (long long)acc.q[k]);
    }
    return 1;
}

/* The whole run: the golden stream replayed (tu_replay: chunks of one training tick, the due
 * updates, then the reservoir to TU_MAX_STEPS), against the float32 reference. */
static int test_whole_run(void)
{
    static float ema[TU_NUM_PARAMS], raw[TU_NUM_PARAMS];
    const tu_golden_array want = tu_golden("run_counters");
    tu_replay_result result;
    tu_report rep;
    uint32_t got[11];
    int k;
    EXPECT(tu_trainer_init(&trainer, (uint64_t)tu_golden("run_seed").q[0]) == TU_OK, "init failed");
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
        EXPECT((int64_t)got[k] == want.q[k], "counter %d: got %u, want %lld", k, got[k], (long long)want.q[k]);
    }
    EXPECT(rep.calibrated && rep.calibration.m == (int)tu_golden("run_m").q[0], "m = %d, want %lld",
           rep.calibration.m, (long long)tu_golden("run_m").q[0]);
    EXPECT(rep.updates == (int)tu_golden("run_updates").q[0], "updates %d, want %lld", rep.updates,
           (long long)tu_golden("run_updates").q[0]);
    tu_trainer_weights(&trainer, 1, ema, TU_NUM_PARAMS);
    tu_trainer_weights(&trainer, 0, raw, TU_NUM_PARAMS);
    return near("sigma", rep.calibration.sigma, tu_golden("run_sigma").f, TU_N, 1e-4f, 0.0f)
           && near("x_rms", rep.calibration.x_rms, tu_golden("run_x_rms").f, TU_N, 1e-4f, 0.0f)
           && near("s1", rep.calibration.s1, tu_golden("run_s1").f, TU_N, 1e-4f, 0.0f)
           && near("s2", rep.calibration.s2, tu_golden("run_s2").f, TU_N, 1e-4f, 0.0f)
           && near("lambda2", &rep.calibration.lambda2, tu_golden("run_lambda2").f, 1, 0.0f, 0.0f)
           && near("weight_decay", &rep.calibration.weight_decay, tu_golden("run_weight_decay").f, 1, 1e-4f, 0.0f)
           && near("raw weights", raw, tu_golden("run_raw").f, TU_NUM_PARAMS, 0.0f, TU_RUN_ATOL)
           && near("EMA weights", ema, tu_golden("run_ema").f, TU_NUM_PARAMS, 0.0f, TU_RUN_ATOL);
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
    EXPECT(after.updates == before.updates, "update count moved from %d to %d", before.updates, after.updates);
    EXPECT(after.counters.skipped_updates == before.counters.skipped_updates + 3u, "skipped %u -> %u, want +3",
           before.counters.skipped_updates, after.counters.skipped_updates);
    return 1;
}

static int test_api_misuse(void)
{
    static tu_trainer blank; /* zeroed: never initialized */
    const float good[TU_N] = {0.0f}, bad[TU_N] = {NAN};
    float w[TU_NUM_PARAMS];
    tu_report rep;
    int due, s;
    EXPECT(tu_trainer_init(NULL, 0u) == TU_ERR_NULL, "init(NULL)");
    EXPECT(tu_trainer_push(NULL, 0, 0, good, TU_N) == TU_ERR_NULL, "push(NULL)");
    EXPECT(tu_trainer_push(&blank, 0, 0, good, TU_N) == TU_ERR_UNINITIALIZED, "push(uninitialized)");
    EXPECT(tu_trainer_step(&blank) == TU_ERR_UNINITIALIZED, "step(uninitialized)");
    EXPECT(tu_trainer_report(&blank, &rep) == TU_ERR_UNINITIALIZED, "report(uninitialized)");
    EXPECT(tu_trainer_init(&trainer, 1u) == TU_OK, "init");
    EXPECT(tu_trainer_push(&trainer, 0, 0, good, TU_N + 1) == TU_ERR_CHANNELS, "push with TU_N + 1 channels");
    EXPECT(tu_trainer_push(&trainer, 0, 0, NULL, TU_N) == TU_ERR_NULL, "push(y NULL)");
    EXPECT(tu_trainer_push_chunk(&trainer, 1, NULL, NULL, good, TU_N, &due) == TU_ERR_NULL, "push_chunk(ticks NULL)");
    EXPECT(tu_trainer_push_chunk(&trainer, -1, NULL, NULL, NULL, TU_N, &due) == TU_ERR_ARGUMENT, "negative count");
    EXPECT(tu_trainer_step(&trainer) == TU_ERR_NOT_READY, "step before calibration");
    EXPECT(tu_trainer_push(&trainer, 10, 0, good, TU_N) == TU_OK, "push");
    EXPECT(tu_trainer_push(&trainer, 10, 0, good, TU_N) == TU_OK, "push of a repeated tick");
    EXPECT(tu_trainer_push(&trainer, 5, 0, good, TU_N) == TU_OK, "push of an earlier tick");
    EXPECT(tu_trainer_push(&trainer, 11, 0, bad, TU_N) == TU_OK, "push of NaN");
    EXPECT(tu_trainer_weights(&trainer, 2, w, TU_NUM_PARAMS) == TU_ERR_ARGUMENT, "weights(which 2)");
    EXPECT(tu_trainer_weights(&trainer, 1, w, TU_NUM_PARAMS - 1) == TU_ERR_ARGUMENT, "weights(short)");
    EXPECT(tu_trainer_report(&trainer, &rep) == TU_OK, "report");
    EXPECT(rep.counters.samples == 2 && rep.counters.out_of_order == 2 && rep.counters.nonfinite_samples == 1,
           "counters: %u samples, %u out of order, %u non-finite", rep.counters.samples, rep.counters.out_of_order,
           rep.counters.nonfinite_samples);
    for (s = -7; s <= 1; ++s) {
        EXPECT(tu_status_string((tu_status)s) != NULL && strlen(tu_status_string((tu_status)s)) > 0, "string %d", s);
    }
    return 1;
}

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
    run("mlp", test_mlp);
    run("jet_gradient", test_jet_gradient);
    run("finite_differences", test_finite_differences);
    run("clip_adam_ema", test_clip_adam_ema);
    run("gate", test_gate);
    run("whole_run", test_whole_run);
    run("skipped_updates", test_skipped_updates);
    run("api_misuse", test_api_misuse);
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}

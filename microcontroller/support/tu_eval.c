/* Single-pendulum evaluation and simulation on the device (see tu_eval.h). */
#include "tu_fp.h" /* first: no fused multiply-add in the library */

#include <math.h>
#include <string.h>

#include "tu_eval.h"

#if TU_SIM_PENDULUM

#define TU_TWO_PI 6.28318530717958647692f

static float tu_energy(float k, const float x[2])
{
    return 0.5f * x[1] * x[1] + k * (1.0f - cosf(x[0]));
}

float tu_pendulum_damping(const tu_trainer *trainer)
{
    static const float x0[2] = TU_SIM_X0;
    const float k = TU_SIM_K;
    const float level = tu_energy(k, x0);
    const tu_config *cfg = tu_trainer_config(trainer);
    float params[TU_WEIGHTS_MAX], known[2], value[2], num = 0.0f, den = 0.0f;
    tu_field field;
    tu_report rep;
    int i, j;
    if (cfg == NULL) {
        return NAN;
    }
    tu_trainer_weights(trainer, 1, params, cfg->num_params + TU_NUM_PHYSICAL_OF(cfg));
    tu_trainer_report(trainer, &rep);
    field.config = cfg;
    field.params = params;
    field.in_scale = rep.in_scale;
    field.out_scale = rep.out_scale;
    for (i = 0; i < 41; ++i) {
        for (j = 0; j < 41; ++j) {
            const float x[2] = {-1.2f + 2.4f * (float)i / 40.0f, -3.5f + 7.0f * (float)j / 40.0f};
            if (tu_energy(k, x) > level) {
                continue;
            }
            tu_field_eval(&field, x, NULL, value);
#if TU_PHYSICAL
            if (cfg->num_physical > 0) {  /* the known field at the trained physical parameters */
                cfg->field_p(x, NULL, params + cfg->num_params, known);
            } else {
                cfg->field(x, NULL, known);
            }
#else
            cfg->field(x, NULL, known);
#endif
            num += (value[1] - known[1]) * x[1];
            den += x[1] * x[1];
        }
    }
    return -num / den;
}

/* The simulated plant: the true field with its damping raised by `added` (1/s) on omega. */
static void tu_sim_field(float added, const float x[2], float f[2])
{
    TU_DEFAULT_CONFIG->truth(x, f);  /* configuration 0 is the simulated pendulum */
    f[1] -= added * x[1];
}

static void tu_rk4(float added, float x[2], float h)
{
    float k1[2], k2[2], k3[2], k4[2], t[2];
    int c;
    tu_sim_field(added, x, k1);
    for (c = 0; c < 2; ++c) {
        t[c] = x[c] + 0.5f * h * k1[c];
    }
    tu_sim_field(added, t, k2);
    for (c = 0; c < 2; ++c) {
        t[c] = x[c] + 0.5f * h * k2[c];
    }
    tu_sim_field(added, t, k3);
    for (c = 0; c < 2; ++c) {
        t[c] = x[c] + h * k3[c];
    }
    tu_sim_field(added, t, k4);
    for (c = 0; c < 2; ++c) {
        x[c] += h / 6.0f * (k1[c] + 2.0f * k2[c] + 2.0f * k3[c] + k4[c]);
    }
}

/* A state on a random energy level u E(x0) at a uniform phase (SinglePendulum.reexcite). */
static void tu_reexcite(tu_pendulum_sim *sim)
{
    static const float x0[2] = TU_SIM_X0, energy[2] = TU_SIM_ENERGY, interval[2] = TU_SIM_REEXCITE;
    const float k = TU_SIM_K;
    const float level = (energy[0] + (energy[1] - energy[0]) * tu_prng_uniform(&sim->excite)) * tu_energy(k, x0);
    const float theta_max = acosf(1.0f - level / k);
    const float phase = TU_TWO_PI * tu_prng_uniform(&sim->excite);
    const float theta = theta_max * sinf(phase);
    const float kinetic = 2.0f * (level - k * (1.0f - cosf(theta)));
    sim->x[0] = theta;
    sim->x[1] = copysignf(sqrtf(kinetic > 0.0f ? kinetic : 0.0f), cosf(phase));
    sim->left = (int32_t)rintf((interval[0] + (interval[1] - interval[0]) * tu_prng_uniform(&sim->excite)) * TU_FS);
    sim->left = sim->left > 0 ? sim->left : 1;
}

static void tu_sim_start(tu_pendulum_sim *sim, uint64_t seed)
{
    static const float x0[2] = TU_SIM_X0, interval[2] = TU_SIM_REEXCITE;
    tu_prng_seed(&sim->excite, seed, 11u);
    tu_prng_seed(&sim->noise, seed, 12u);
    memcpy(sim->x, x0, sizeof sim->x);
    sim->segment = 0;
    sim->left = (int32_t)rintf((interval[0] + (interval[1] - interval[0]) * tu_prng_uniform(&sim->excite)) * TU_FS);
}

static void tu_sim_advance(tu_pendulum_sim *sim)
{
    if (--sim->left <= 0) {
        ++sim->segment;
        tu_reexcite(sim);
    } else {
        tu_rk4(sim->added_damping, sim->x, 1.0f / TU_FS);
    }
}

void tu_pendulum_sim_init(tu_pendulum_sim *sim, uint64_t seed, float noise, float rms_seconds)
{
    const int32_t samples = (int32_t)(rms_seconds * TU_FS);
    float power[2] = {0.0f, 0.0f};
    int32_t i;
    int c;
    sim->added_damping = 0.0f;
    tu_sim_start(sim, seed);
    for (i = 0; i < samples; ++i) { /* a clean pass for the channel RMS that scales the noise */
        for (c = 0; c < 2; ++c) {
            power[c] += sim->x[c] * sim->x[c];
        }
        tu_sim_advance(sim);
    }
    for (c = 0; c < 2; ++c) {
        sim->sigma[c] = noise * sqrtf(power[c] / (float)(samples > 0 ? samples : 1));
    }
    tu_sim_start(sim, seed);
}

int32_t tu_pendulum_sim_next(tu_pendulum_sim *sim, float y[2])
{
    const int32_t segment = sim->segment;
    int c;
    for (c = 0; c < 2; ++c) {
        y[c] = sim->x[c] + sim->sigma[c] * tu_prng_normal(&sim->noise);
    }
    tu_sim_advance(sim);
    return segment;
}

#endif

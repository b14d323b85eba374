/* One trainer configuration, per instance (CMSIS style): a `tu_config` names its sizes, its
 * hyperparameters, its plant's generated fields (function pointers) and its constant tables
 * (`tu_model`: Savitzky-Golay rows and projection, initial weights and scales), all const, in
 * flash. They are generated from a torch-ude run or config (python -m microcontroller.generate,
 * one or several configs per build) into tu_model_data.h and tu_plant_code.h; tu_config_get(k)
 * returns the k-th. The instance buffers of tu_trainer are sized by the build's maxima over its
 * configurations (TU_*_MAX in tu_config.h), so one image can hold trainers of different plants
 * and sizes; tu_config_check refuses a configuration that does not fit them, or whose tables
 * were generated for another configuration (their settings hash differs). */
#ifndef TU_MODEL_H
#define TU_MODEL_H

#include <stdint.h>

#include "tu_config.h"
#include "tu_plant.h"
#include "tu_status.h"

#define TU_CONFIG_MAGIC 0x54554346u  /* "TUCF" */
#define TU_DIVISOR_MAX 65536         /* the largest train_every, window stride and m_max (ticks) */

/* The network's input map z = phi(x, u) (torch_ude/input_map.py): tu_config.h defines TU_INPUT_MAP 1 only
 * when a configuration of the build reads a state as an angle, (sin x_i, cos x_i), or leaves a state out
 * (an invariant state); otherwise z = [x / s_in, u / s_u] (TU_CH_MAX columns at most) and the library has no
 * map code at all. With the map z has n - q + p + nu columns (p periodic, q invariant states), at most the
 * widest layer, TU_WIDTH_MAX (the MLP's input width is one of its layer widths). */
#ifndef TU_INPUT_MAP
#define TU_INPUT_MAP 0
#endif
#if TU_INPUT_MAP
#define TU_NET_IN_MAX TU_WIDTH_MAX
#else
#define TU_NET_IN_MAX TU_CH_MAX
#endif

/* Trainable physical parameters of the known model (torch_ude/systems/parameters.py): tu_config.h defines
 * TU_PHYSICAL 1 and TU_PHYSICAL_MAX (the most of a configuration) only when a configuration of the build trains
 * them; its known field then reads theta (tu_plant.h's *_p functions), the instance's weight vectors hold
 * num_params network weights followed by num_physical theta values (as torch_ude.field.HybridField.parameters_list
 * orders them), and a build without (TU_PHYSICAL 0) has none of this code or memory. */
#ifndef TU_PHYSICAL
#define TU_PHYSICAL 0
#endif
#ifndef TU_PHYSICAL_MAX
#define TU_PHYSICAL_MAX 0
#endif
#define TU_WEIGHTS_MAX (TU_NUM_PARAMS_MAX + TU_PHYSICAL_MAX)  /* network weights and theta */
#if TU_PHYSICAL
#define TU_NUM_PHYSICAL_OF(cfg) ((cfg)->num_physical)
#else
#define TU_NUM_PHYSICAL_OF(cfg) 0
#endif
#if !defined(TU_LIBRARY) && !defined(TU_NUM_PHYSICAL)
#define TU_NUM_PHYSICAL 0  /* configuration 0 trains no physical parameter */
#endif

/* Velocities derived from streamed positions (torch_ude/position_only.py, data.velocity_from_position): tu_config.h
 * defines TU_VELOCITY 1 and TU_VEL_RING_MAX (2M + 2, the most of a configuration) only when a configuration of the
 * build streams positions only; such a configuration's pushed samples hold its `positions` positions, then its
 * inputs (TU_PUSH_CH_OF(cfg) channels), and the trainer derives each velocity with the centred row velocity_row
 * (fs D1, 2M + 1 taps) before its stream (tu_trainer.h). A build without it has none of this code or memory. */
#ifndef TU_VELOCITY
#define TU_VELOCITY 0
#endif
#if TU_VELOCITY
#define TU_PUSH_CH_OF(cfg) ((cfg)->ch - (cfg)->positions)
#else
#define TU_PUSH_CH_OF(cfg) ((cfg)->ch)
#endif
#if !defined(TU_LIBRARY) && !defined(TU_PUSH_CH)
#define TU_PUSH_CH TU_CH  /* configuration 0 streams every state */
#endif

/* The calibration record streamed again once calibrated (torch_ude.stream's calibration_replay): tu_config.h
 * defines TU_CAL_REPLAY 1 only when a configuration of the build replays it; the record then has its own memory
 * beside the reservoir (not a union with it) and its samples' ticks, and a build without it has neither. */
#ifndef TU_CAL_REPLAY
#define TU_CAL_REPLAY 0
#endif

/* A kernel the library specializes: its body is compiled once with the build's maxima as constant
 * sizes (the only sizes of a single-configuration build, so the loops are those of constant bounds) and
 * once with the configuration's sizes. */
#if defined(__GNUC__)
#define TU_KERNEL static inline __attribute__((always_inline))
#else
#define TU_KERNEL static inline
#endif

/** Read-only model tables (float32, as the device runs them); sizes TU_*_MAX, the configuration's
 * own sizes used (rows shorter than TU_TAPS_MAX are zero-padded). */
typedef struct {
    const char *hash;                                   /**< settings hash of the configuration they belong to */
    float sg_rows[3][TU_TAPS_MAX];                      /**< D0, D1, D2 of Eq. (19), per tap-unit^d, oldest tap first */
    float sg_row_norm[3];                               /**< ||D_d||_2 */
    float sg_projection[TU_TAPS_MAX][TU_TAPS_MAX];      /**< R = I - A A^+ (Eq. 27) */
    const float (*box_rows)[3][TU_TAPS_MAX];            /**< box-averaged taps of width m: D0..D2 at [m - 1] */
    const float *box_row2_norm;                         /**< ||D2|| of the box rows at [m - 1] */
    const float (*box_projection)[TU_TAPS_MAX][TU_TAPS_MAX]; /**< R of the box taps at [m - 1] */
    float sg_noise_gain;                                /**< 1 - 2 [D0]_mu + ||D0||^2 (Eq. 23) */
    float init_params[TU_NUM_PARAMS_MAX];  /**< initial weights W1, b1, ..., WL, bL (row-major W[out][in]) */
    float in_scale[TU_CH_MAX];             /**< pretrained network input scales, states then inputs (used when
                                                pretrained) */
    float out_scale[TU_N_MAX];             /**< pretrained output scales (used when pretrained) */
} tu_model;

/** One trainer configuration: what tu_config.h's macros held for a single-configuration build
 * (same names in lower case, without the TU_ prefix). */
typedef struct {
    uint32_t magic;                 /**< TU_CONFIG_MAGIC */
    const char *hash;               /**< settings hash (its tables carry the same) */
    const char *state_hash;         /**< settings hash without the schedule's length: a checkpoint restores into
                                         a configuration of the same state hash (a longer schedule continues it) */
    const tu_model *model;          /**< the constant tables */
    tu_plant_field_fn field;        /**< f_known(x, u) */
    tu_plant_jacobians_fn jacobians; /**< f_known with J_x and J_u */
    tu_plant_truth_fn truth;        /**< the simulated plant's true field (NULL: none) */
    int n, nu, ch;                  /**< states, recorded inputs, stream channels n + nu */
    int num_layers;                 /**< affine layers of the MLP */
    int layer_sizes[TU_NUM_LAYERS_MAX + 1]; /**< layer widths */
    int num_params;                 /**< trainable weights */
    int linear, mlp_reads;          /**< the residual's linear term; input columns of the tanh layers */
    int pretrained;                 /**< keep the tables' scales (fine-tuning) */
    int half_width, taps;           /**< SG half width M, taps 2M + 1 */
    int stride;                     /**< window stride in ticks (0: m) */
    int train_every;                /**< ticks per training tick */
    int cal_len;                    /**< calibration samples */
    int m_fixed, m0, m_max;         /**< fixed tap spacing (0: adaptive), first of the search, largest */
    int tap_average, box_tables;    /**< box-averaged taps; box tables in flash for m = 1 .. box_tables */
    int ring_len;                   /**< ring samples: (taps - 1) m_max + (tap_average ? m_max : 1) */
    int max_bridge;                 /**< longest bridged gap, ticks */
    int snr_gate, quality_gate, gate_history; /**< Eq. (25)-(26) gate, misfit gate, its median's windows */
    int buffer_reservoir, capacity, jet_rows, forget_window; /**< reservoir (1) or FIFO, B, rows of a jet, W */
    int reservoir_half;             /**< 1: float16 storage of the reservoir (the build's TU_RESERVOIR_HALF) */
    int batch, schedule_cosine, ema; /**< minibatch; cosine schedule; EMA of the weights */
    int64_t max_steps;              /**< updates the schedule spans */
    int64_t due_span;               /**< longest gap push_chunk counts in full, ticks: max(fs, train_every) */
    uint64_t default_seed;          /**< the run seed */
    float fs, dt_scale, outlier_threshold; /**< sample rate (Hz), Eq. (24) constant, outlier screen (0: off) */
    float lambda1, lambda2, snr_threshold; /**< loss weights, tau_SNR */
    float gate_factor, gate_floor;  /**< misfit gate: multiple of the running median, of the window RMS */
    float lr, lr_min, ema_weight;   /**< learning rate, its final value, 1 - EMA decay */
    float weight_decay, weight_decay_full_at, grad_clip; /**< AdamW decay, relative noise of full decay, clip */
    /* The input map (all zero, as a configuration generated without one leaves it: z = [x / s_in, u / s_u]).
     * With input_map 1, z's columns are x_j / s_in_j for the n_plain states plain[] (ascending), sin x_i for
     * the n_periodic states periodic[] (angles in rad, ascending), cos x_i for the same, then u / s_u; the
     * other states are invariant (not read). layer_sizes[0] = n_plain + 2 n_periodic + nu. */
    int input_map;                  /**< 1: the map below (needs a build with TU_INPUT_MAP) */
    int n_plain, n_periodic;        /**< states read scaled; states read as (sin, cos) */
    int plain[TU_N_MAX];            /**< their indices, ascending */
    int periodic[TU_N_MAX];         /**< their indices, ascending */
#if TU_PHYSICAL
    /* Trained physical parameters (num_physical 0: none; field and jacobians above are then used, else NULL and
     * the *_p functions below). theta starts at 0 (p = p0), is stepped by Adam with the network's learning rate
     * and schedule but never decayed, clamped into [theta_low, theta_high] after each step (the bounds,
     * (low - p0) / s), averaged by the EMA, and while the update count is below physics_updates only theta
     * trains (the network's gradient is zeroed: torch_ude.training.JetMatchingModule's physics_first). */
    int num_physical;               /**< P */
    tu_plant_field_p_fn field_p;    /**< f_known(x, u; theta) */
    tu_plant_jacobians_p_fn jacobians_p; /**< with J_x and J_u */
    tu_plant_physical_fn physical;  /**< the physical part of the jet gradient */
    tu_plant_sensitivity_fn sensitivity; /**< the known model's part of the residuals' Jacobian in theta */
    float theta_low[TU_PHYSICAL_MAX], theta_high[TU_PHYSICAL_MAX]; /**< theta's bounds */
    int64_t physics_updates;        /**< updates in which only theta trains (INT64_MAX: physics_first 1, always) */
    int refit_evaluations;          /**< the end-of-run refit's most passes over the reservoir (0: no refit;
                                         torch_ude.training.JetMatchingModule's physics_refit of a physics-alone
                                         run, physics_first 1: tu_trainer_refit) */
#endif
#if TU_VELOCITY
    /* Velocities derived on the device (positions 0: none, every state is pushed). States 0 .. positions - 1 are
     * pushed; state positions + j is the velocity of state j, n = 2 positions. */
    int positions;                  /**< pushed positions p */
    int velocity_half_width;        /**< M: the centred window has 2M + 1 samples at fs */
    const float *velocity_row;      /**< fs D1, 2M + 1 floats, oldest sample first (1/s) */
#endif
#if TU_CAL_REPLAY
    int calibration_replay;         /**< 1: once calibrated, the record's windows go to the gate and reservoir */
#endif
} tu_config;

/** TU_OK if `config` can run in this build: TU_ERR_NULL for NULL, TU_ERR_CONFIG when it is not a
 * generated configuration (magic), its sizes exceed the build's TU_*_MAX or disagree (ch != n + nu, its
 * reservoir precision differs from the build's TU_RESERVOIR_HALF,
 * ...), a table or field is missing, or its tables' settings hash differs from its own (a mismatched
 * table set). */
tu_status tu_config_check(const tu_config *config);

/** The build's generated configurations: tu_config_count() of them, tu_config_get(k) for k in
 * [0, count) (NULL outside). Configuration 0 is the one tu_config.h's single-configuration
 * macros describe (TU_DEFAULT_CONFIG). */
int tu_config_count(void);
const tu_config *tu_config_get(int k);

/** A 32-bit digest (FNV-1a) of a hash string: an instance stores that of its configuration's state_hash. */
uint32_t tu_config_digest(const char *hash);

#endif /* TU_MODEL_H */

/* The one translation unit that includes the generated configurations: their plant code
 * (tu_plant_code.h, static functions) and tables (tu_model_data.h, static const, in flash). */
#define TU_LIBRARY 1 /* the library reads its configuration from a tu_config, no single-configuration macro */
#include "tu_fp.h" /* first: no fused multiply-add in the library */

#include <stddef.h>
#include <string.h>

#include "tu_model.h"
#include "tu_plant_code.h"
#include "tu_model_data.h"

int tu_config_count(void)
{
    return (int)(sizeof tu_configs / sizeof tu_configs[0]);
}

const tu_config *tu_config_get(int k)
{
    return k >= 0 && k < tu_config_count() ? tu_configs[k] : NULL;
}

uint32_t tu_config_digest(const char *hash)
{
    uint32_t h = 2166136261u;
    for (; hash != NULL && *hash != '\0'; ++hash) {
        h = (h ^ (uint32_t)(unsigned char)*hash) * 16777619u;
    }
    return h;
}

/* The network's input width: n + nu without the input map; with it, the plain and periodic state lists
 * ascending, disjoint and in range (the states in neither are the invariant ones) give n_plain + 2 n_periodic
 * + nu columns. 0 for a map this build cannot run (TU_INPUT_MAP 0) or that is inconsistent. */
static int tu_config_net_inputs(const tu_config *c)
{
    int k, j;
    if (!c->input_map) {
        return c->n_plain == 0 && c->n_periodic == 0 ? c->ch : 0;
    }
    if (!TU_INPUT_MAP || c->n_plain < 0 || c->n_periodic < 0 || c->n_plain + c->n_periodic < 1
        || c->n_plain + c->n_periodic > c->n) {
        return 0;
    }
    for (k = 0; k < c->n_plain + c->n_periodic; ++k) {
        const int *list = k < c->n_plain ? c->plain : c->periodic;
        const int i = k < c->n_plain ? k : k - c->n_plain;
        if (list[i] < 0 || list[i] >= c->n || (i > 0 && list[i] <= list[i - 1])) {
            return 0;
        }
        for (j = 0; k >= c->n_plain && j < c->n_plain; ++j) {
            if (c->plain[j] == list[i]) {  /* a state both plain and periodic */
                return 0;
            }
        }
    }
    return c->n_plain + 2 * c->n_periodic + c->nu;
}

/* The sizes fit the build's maxima and agree with each other. */
static int tu_config_sizes_valid(const tu_config *c)
{
    int l, params = 0, width = 0;
    const int inputs = c->n >= 1 && c->n <= TU_N_MAX ? tu_config_net_inputs(c) : 0;
    if (c->n < 1 || c->n > TU_N_MAX || c->nu < 0 || c->nu > TU_NU_MAX || c->ch != c->n + c->nu || c->ch > TU_CH_MAX
        || c->num_layers < 2 || c->num_layers > TU_NUM_LAYERS_MAX || inputs < 1 || inputs > TU_NET_IN_MAX
        || c->layer_sizes[0] != inputs || c->layer_sizes[c->num_layers] != c->n || c->mlp_reads < 1
        || c->mlp_reads > inputs || (c->mlp_reads < inputs && !c->linear)) {
        return 0;
    }
    for (l = 0; l < c->num_layers; ++l) {
        const int din = l == 0 ? c->mlp_reads : c->layer_sizes[l];
        if (c->layer_sizes[l + 1] < 1 || c->layer_sizes[l + 1] > TU_WIDTH_MAX) {
            return 0;
        }
        params += c->layer_sizes[l + 1] * (din + 1);
        width = c->layer_sizes[l + 1] > width ? c->layer_sizes[l + 1] : width;
    }
    params += c->linear ? c->n * inputs : 0;
#if TU_MLP_COMMON
    {  /* the build's one network (src/tu_mlp.c computes with its shape) */
        static const int common[] = TU_MLP_COMMON_SIZES;
        if (c->n != TU_MLP_COMMON_N || c->ch != TU_MLP_COMMON_CH || c->num_layers != TU_MLP_COMMON_LAYERS
            || c->linear != TU_MLP_COMMON_LINEAR || c->mlp_reads != TU_MLP_COMMON_READS) {
            return 0;
        }
        for (l = 0; l <= c->num_layers; ++l) {
            if (c->layer_sizes[l] != common[l]) {
                return 0;
            }
        }
    }
#endif
    return width <= TU_WIDTH_MAX && params == c->num_params && params <= TU_NUM_PARAMS_MAX && c->taps >= 3
           && c->taps == 2 * c->half_width + 1 && c->taps <= TU_TAPS_MAX && c->cal_len >= c->taps
           && c->cal_len <= TU_CAL_LEN_MAX && c->m_max >= 1 && c->m_fixed >= 0 && c->m_fixed <= c->m_max
           && c->m0 >= 1 && c->box_tables >= 1 && c->box_tables == (c->tap_average ? c->m_max : 1)
           && c->ring_len == (c->taps - 1) * c->m_max + (c->tap_average ? c->m_max : 1)
           && c->ring_len <= TU_RING_LEN_MAX && c->gate_history >= 1 && c->gate_history <= TU_GATE_HISTORY_MAX
           && c->capacity >= 1 && c->capacity <= TU_CAPACITY_MAX && (c->jet_rows == 2 || c->jet_rows == 3)
           && c->jet_rows <= TU_JET_ROWS_MAX && c->reservoir_half == TU_RESERVOIR_HALF
           && c->batch >= 1 && c->batch <= c->capacity && c->stride >= 0
           && c->train_every >= 1 && c->train_every <= TU_DIVISOR_MAX && c->stride <= TU_DIVISOR_MAX
           && c->m_max <= TU_DIVISOR_MAX && c->max_bridge >= 0 && c->forget_window >= 0 && c->max_steps >= 1
           && c->due_span >= 1 && c->fs > 0.0f;
}

#if TU_PHYSICAL
/* The plant functions a configuration computes with: field and jacobians, or for one that trains physical
 * parameters the *_p functions, the gradient's and theta's bounds (low <= 0 <= high). */
static int tu_config_fields_valid(const tu_config *c)
{
    int k;
    if (c->num_physical < 0 || c->num_physical > TU_PHYSICAL_MAX
        || c->num_params + c->num_physical > TU_WEIGHTS_MAX || c->physics_updates < 0 || c->refit_evaluations < 0) {
        return 0;
    }
    if (c->num_physical > 0) {
        for (k = 0; k < c->num_physical; ++k) {
            if (!(c->theta_low[k] <= 0.0f && c->theta_high[k] >= 0.0f)) {
                return 0;
            }
        }
        return c->field_p != NULL && c->jacobians_p != NULL && c->physical != NULL && c->sensitivity != NULL;
    }
    return c->field != NULL && c->jacobians != NULL;
}
#define TU_FIELDS_MISSING(c) (!tu_config_fields_valid(c))
#else
#define TU_FIELDS_MISSING(c) ((c)->field == NULL || (c)->jacobians == NULL)
#endif

#if TU_VELOCITY
/* The velocity derivative: none (positions 0), or n = 2 positions, a window whose ring fits and a row. */
#define TU_VELOCITY_INVALID(c)                                                                                        \
    ((c)->positions != 0                                                                                              \
     && ((c)->positions < 0 || (c)->n != 2 * (c)->positions || (c)->velocity_half_width < 1                          \
         || 2 * (c)->velocity_half_width + 2 > TU_VEL_RING_MAX || (c)->velocity_row == NULL))
#else
#define TU_VELOCITY_INVALID(c) 0
#endif

tu_status tu_config_check(const tu_config *config)
{
    if (config == NULL) {
        return TU_ERR_NULL;
    }
    if (config->magic != TU_CONFIG_MAGIC || config->hash == NULL || config->state_hash == NULL || config->model == NULL
        || config->model->hash == NULL || TU_FIELDS_MISSING(config)
        || config->model->box_rows == NULL || config->model->box_row2_norm == NULL
        || config->model->box_projection == NULL || !tu_config_sizes_valid(config) || TU_VELOCITY_INVALID(config)) {
        return TU_ERR_CONFIG;
    }
    /* tables generated for another configuration */
    return strcmp(config->hash, config->model->hash) == 0 ? TU_OK : TU_ERR_CONFIG;
}

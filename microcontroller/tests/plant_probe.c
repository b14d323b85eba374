/* The generated plant code at given points, for tests against torch (tests/microcontroller/test_plant_code.py).
 * Reads lines of TU_N states and TU_NU inputs from stdin; prints per line f (TU_N), J_x (TU_N x TU_N,
 * row-major) and J_u (TU_N x TU_NU, row-major) with 9 significant digits, and the same f from
 * the field function. Needs tu_config.h (TU_N, TU_NU, TU_N_MAX, TU_SIM_PENDULUM) and tu_plant_code.h
 * only (configuration 0's static functions). */
#include <stdio.h>

#include "tu_plant.h"
#include "tu_plant_code.h"

int main(void)
{
    float x[TU_N], u[TU_NU + 1], f[TU_N], g[TU_N], jx[TU_N_MAX * TU_N_MAX], ju[TU_N * TU_NU + 1];
    int i, j;
#if TU_SIM_PENDULUM
    (void)tu_plant_truth_0;
#endif
    for (;;) {
        for (i = 0; i < TU_N + TU_NU; ++i) {
            if (scanf("%f", i < TU_N ? &x[i] : &u[i - TU_N]) != 1) {
                return i == 0 ? 0 : 1;
            }
        }
        tu_plant_jacobians_0(x, TU_NU ? u : NULL, f, jx, TU_NU ? ju : NULL);
        tu_plant_field_0(x, TU_NU ? u : NULL, g);
        for (i = 0; i < TU_N; ++i) {
            printf("%.9g ", (double)f[i]);
        }
        for (i = 0; i < TU_N; ++i) {
            for (j = 0; j < TU_N; ++j) {
                printf("%.9g ", (double)jx[i * TU_N_MAX + j]);
            }
        }
        for (i = 0; i < TU_N * TU_NU; ++i) {
            printf("%.9g ", (double)ju[i]);
        }
        for (i = 0; i < TU_N; ++i) {
            printf("%.9g%s", (double)g[i], i + 1 < TU_N ? " " : "\n");
        }
    }
}

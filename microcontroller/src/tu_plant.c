/* Known fields and Jacobians of the plants, float32 (Eq. 3-8); the Python reference is
 * torch_ude/systems/pendulum.py and double_pendulum.py. */
#include <math.h>

#include "tu_plant.h"

#if TU_PLANT == TU_PLANT_PENDULUM

void tu_plant_field(const tu_plant *plant, const float x[TU_N], float f[TU_N])
{
    const float k = plant->gravity / plant->length;
    f[0] = x[1];
    f[1] = -k * sinf(x[0]) - plant->damping * x[1];
}

void tu_plant_jacobian(const tu_plant *plant, const float x[TU_N], float jac[TU_N][TU_N])
{
    const float k = plant->gravity / plant->length;
    jac[0][0] = 0.0f;
    jac[0][1] = 1.0f;
    jac[1][0] = -k * cosf(x[0]);
    jac[1][1] = -plant->damping;
}

#else /* TU_PLANT_DOUBLE_PENDULUM */

/* The shared parts of Eq. (7)-(8). */
typedef struct {
    float sd, cd, den, num1, s, num2;
} tu_dp_parts;

static tu_dp_parts tu_dp_parts_at(const tu_plant *p, const float x[TU_N])
{
    tu_dp_parts q;
    const float th1 = x[0], th2 = x[1], w1 = x[2], w2 = x[3];
    const float g = p->gravity, m1 = p->m1, m2 = p->m2, l1 = p->l1, l2 = p->l2;
    const float delta = th1 - th2;
    q.sd = sinf(delta);
    q.cd = cosf(delta);
    q.den = 2.0f * m1 + m2 - m2 * cosf(2.0f * delta);
    q.num1 = -g * (2.0f * m1 + m2) * sinf(th1) - m2 * g * sinf(th1 - 2.0f * th2)
             - 2.0f * q.sd * m2 * (w2 * w2 * l2 + w1 * w1 * l1 * q.cd);
    q.s = w1 * w1 * l1 * (m1 + m2) + g * (m1 + m2) * cosf(th1) + w2 * w2 * l2 * m2 * q.cd;
    q.num2 = 2.0f * q.sd * q.s;
    return q;
}

void tu_plant_field(const tu_plant *plant, const float x[TU_N], float f[TU_N])
{
    const tu_dp_parts q = tu_dp_parts_at(plant, x);
    f[0] = x[2];
    f[1] = x[3];
    f[2] = q.num1 / (plant->l1 * q.den) - plant->c1 * x[2];
    f[3] = q.num2 / (plant->l2 * q.den) - plant->c2 * x[3];
}

void tu_plant_jacobian(const tu_plant *plant, const float x[TU_N], float jac[TU_N][TU_N])
{
    const tu_dp_parts q = tu_dp_parts_at(plant, x);
    const float th1 = x[0], th2 = x[1], w1 = x[2], w2 = x[3];
    const float g = plant->gravity, m1 = plant->m1, m2 = plant->m2, l1 = plant->l1, l2 = plant->l2;
    const float delta = th1 - th2;
    const float c2d = cosf(2.0f * delta), s2d = sinf(2.0f * delta), cth = cosf(th1 - 2.0f * th2);
    const float kin = w2 * w2 * l2 * q.cd + w1 * w1 * l1 * c2d;
    const float dden[4] = {2.0f * m2 * s2d, -2.0f * m2 * s2d, 0.0f, 0.0f};
    const float dnum1[4] = {
        -g * (2.0f * m1 + m2) * cosf(th1) - m2 * g * cth - 2.0f * m2 * kin,
        2.0f * m2 * g * cth + 2.0f * m2 * kin,
        -2.0f * m2 * l1 * w1 * s2d,
        -4.0f * m2 * l2 * w2 * q.sd,
    };
    const float ds[4] = {
        -g * (m1 + m2) * sinf(th1) - w2 * w2 * l2 * m2 * q.sd,
        w2 * w2 * l2 * m2 * q.sd,
        2.0f * w1 * l1 * (m1 + m2),
        2.0f * w2 * l2 * m2 * q.cd,
    };
    const float dnum2[4] = {
        2.0f * q.cd * q.s + 2.0f * q.sd * ds[0],
        -2.0f * q.cd * q.s + 2.0f * q.sd * ds[1],
        2.0f * q.sd * ds[2],
        2.0f * q.sd * ds[3],
    };
    int j;
    for (j = 0; j < 4; ++j) {
        jac[0][j] = j == 2 ? 1.0f : 0.0f;
        jac[1][j] = j == 3 ? 1.0f : 0.0f;
        jac[2][j] = (dnum1[j] * q.den - q.num1 * dden[j]) / (l1 * q.den * q.den);
        jac[3][j] = (dnum2[j] * q.den - q.num2 * dden[j]) / (l2 * q.den * q.den);
    }
    jac[2][2] -= plant->c1;
    jac[3][3] -= plant->c2;
}

#endif

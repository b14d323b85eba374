"""Chaotic damped double pendulum, Eq. (5)-(8) of the jet-matching paper."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from .base import System, VectorField, as_state

__all__ = ["DoublePendulumField", "DoublePendulum"]

# the 11 intermediate terms of Eq. (5)-(8) (spelled out so that TorchScript can compile the field)
_Parts = tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]


class DoublePendulumField(VectorField):
    """The double pendulum of Eq. (5)-(8), state ``(theta1, theta2, omega1, omega2)``.

    Args:
        gravity: g in m/s^2.
        m1, m2: link masses in kg.
        l1, l2: link lengths in m.
        c1, c2: damping of the two joints in 1/s (zero where the model omits it).
    """

    n_states = 4

    def __init__(self, gravity: float, m1: float, m2: float, l1: float, l2: float,
                 c1: float, c2: float) -> None:
        super().__init__()
        if min(m1, m2, l1, l2) <= 0:
            raise ValueError(f"masses and lengths must be positive; got m1={m1}, m2={m2}, l1={l1}, l2={l2}.")
        self.gravity, self.m1, self.m2 = float(gravity), float(m1), float(m2)
        self.l1, self.l2, self.c1, self.c2 = float(l1), float(l2), float(c1), float(c2)

    def _parts(self, x: Tensor) -> _Parts:
        th1, th2, w1, w2 = x[:, 0], x[:, 1], x[:, 2], x[:, 3]
        g, m1, m2, l1, l2 = self.gravity, self.m1, self.m2, self.l1, self.l2
        delta = th1 - th2
        sd, cd = torch.sin(delta), torch.cos(delta)
        den = 2 * m1 + m2 - m2 * torch.cos(2 * delta)
        num1 = (-g * (2 * m1 + m2) * torch.sin(th1) - m2 * g * torch.sin(th1 - 2 * th2)
                - 2 * sd * m2 * (w2**2 * l2 + w1**2 * l1 * cd))
        s = w1**2 * l1 * (m1 + m2) + g * (m1 + m2) * torch.cos(th1) + w2**2 * l2 * m2 * cd
        num2 = 2 * sd * s
        return th1, th2, w1, w2, delta, sd, cd, den, num1, s, num2

    def forward(self, x: Tensor) -> Tensor:
        """Field value (N, 4) -> (N, 4), Eq. (5)-(8)."""
        _, _, w1, w2, _, _, _, den, num1, _, num2 = self._parts(x)
        dw1 = num1 / (self.l1 * den) - self.c1 * w1
        dw2 = num2 / (self.l2 * den) - self.c2 * w2
        return torch.stack((w1, w2, dw1, dw2), dim=1)

    def jacobian(self, x: Tensor) -> Tensor:
        """Hand-derived state Jacobian (N, 4) -> (N, 4, 4) (quotient rule on Eq. 7-8)."""
        th1, th2, w1, w2, delta, sd, cd, den, num1, s, num2 = self._parts(x)
        g, m1, m2, l1, l2 = self.gravity, self.m1, self.m2, self.l1, self.l2
        c2d, s2d = torch.cos(2 * delta), torch.sin(2 * delta)
        cth = torch.cos(th1 - 2 * th2)
        zero = torch.zeros_like(th1)
        # d den / d(th1, th2, w1, w2)
        dden = (2 * m2 * s2d, -2 * m2 * s2d, zero, zero)
        kin = w2**2 * l2 * cd + w1**2 * l1 * c2d
        dnum1 = (
            -g * (2 * m1 + m2) * torch.cos(th1) - m2 * g * cth - 2 * m2 * kin,
            2 * m2 * g * cth + 2 * m2 * kin,
            -2 * m2 * l1 * w1 * s2d,
            -4 * m2 * l2 * w2 * sd,
        )
        ds = (
            -g * (m1 + m2) * torch.sin(th1) - w2**2 * l2 * m2 * sd,
            w2**2 * l2 * m2 * sd,
            2 * w1 * l1 * (m1 + m2),
            2 * w2 * l2 * m2 * cd,
        )
        dnum2 = (2 * cd * s + 2 * sd * ds[0], -2 * cd * s + 2 * sd * ds[1], 2 * sd * ds[2], 2 * sd * ds[3])
        jac = x.new_zeros(x.shape[0], 4, 4)
        jac[:, 0, 2] = 1.0
        jac[:, 1, 3] = 1.0
        for j in range(4):
            jac[:, 2, j] = (dnum1[j] * den - num1 * dden[j]) / (l1 * den**2)
            jac[:, 3, j] = (dnum2[j] * den - num2 * dden[j]) / (l2 * den**2)
        jac[:, 2, 2] = jac[:, 2, 2] - self.c1
        jac[:, 3, 3] = jac[:, 3, 3] - self.c2
        return jac


class DoublePendulum(System):
    """The chaotic damped double pendulum plant with Cases A, B and C.

    Case A omits both joint dampings from the known model; Case B keeps them but uses
    ``g_model = gravity_factor * g``; Case C has both errors.

    Re-excitation law: at intervals drawn uniformly from `reexcite_interval` (s) the
    rig releases the pendulum from rest at angles ``|theta1| ~ U(theta1_range)``,
    ``|theta2| ~ U(theta2_range)`` with independent random signs, which keeps the
    motion in the chaotic, high-energy regime of ``x0 = (2.0, 2.4, 0, 0)``.

    Args:
        gravity: g in m/s^2.
        m1, m2: masses in kg.
        l1, l2: lengths in m.
        c1, c2: true joint damping in 1/s.
        gravity_factor: ratio g_model / g of Cases B and C.
        x0: initial state (rad, rad, rad/s, rad/s).
        reexcite_interval: (low, high) seconds between re-excitations.
        theta1_range, theta2_range: release angle magnitudes in rad.
    """

    state_names = ("theta1", "theta2", "omega1", "omega2")
    periodic = (0, 1)

    def __init__(
        self,
        gravity: float = 9.81,
        m1: float = 1.0,
        m2: float = 1.0,
        l1: float = 1.0,
        l2: float = 1.0,
        c1: float = 0.15,
        c2: float = 0.15,
        gravity_factor: float = 0.9,
        x0: Sequence[float] = (2.0, 2.4, 0.0, 0.0),
        reexcite_interval: tuple[float, float] = (6.0, 10.0),
        theta1_range: tuple[float, float] = (1.6, 2.4),
        theta2_range: tuple[float, float] = (2.0, 2.8),
    ) -> None:
        if not 0.0 < reexcite_interval[0] <= reexcite_interval[1]:
            raise ValueError(f"reexcite_interval must satisfy 0 < low <= high; got {reexcite_interval}.")
        self.gravity, self.m1, self.m2, self.l1, self.l2 = map(float, (gravity, m1, m2, l1, l2))
        self.c1, self.c2, self.gravity_factor = float(c1), float(c2), float(gravity_factor)
        self.x0 = as_state(x0, 4, "x0")
        self.reexcite_interval = (float(reexcite_interval[0]), float(reexcite_interval[1]))
        self.theta1_range = (float(theta1_range[0]), float(theta1_range[1]))
        self.theta2_range = (float(theta2_range[0]), float(theta2_range[1]))

    def init_args(self) -> dict:
        """Constructor arguments of this plant."""
        return {
            "gravity": self.gravity, "m1": self.m1, "m2": self.m2, "l1": self.l1, "l2": self.l2,
            "c1": self.c1, "c2": self.c2, "gravity_factor": self.gravity_factor, "x0": self.x0.tolist(),
            "reexcite_interval": list(self.reexcite_interval),
            "theta1_range": list(self.theta1_range), "theta2_range": list(self.theta2_range),
        }

    def _field(self, gravity: float, c1: float, c2: float) -> DoublePendulumField:
        return DoublePendulumField(gravity, self.m1, self.m2, self.l1, self.l2, c1, c2)

    def true_field(self) -> DoublePendulumField:
        """The true plant f* with joint damping c1, c2."""
        return self._field(self.gravity, self.c1, self.c2)

    def build_known_field(self, case: str) -> DoublePendulumField:
        """Case A: no damping. Case B: g_model, damping known. Case C: g_model, no damping."""
        gravity = self.gravity if case == "A" else self.gravity_factor * self.gravity
        keep = case == "B"
        return self._field(gravity, self.c1 if keep else 0.0, self.c2 if keep else 0.0)

    def damping_terms(self, case: str) -> tuple[tuple[int, int, float], ...]:
        """omega_i-channel residuals should be ``-c_i omega_i`` (0 in Case B)."""
        case = self.check_case(case)
        scale = 0.0 if case == "B" else 1.0
        return ((2, 2, scale * self.c1), (3, 3, scale * self.c2))

    def initial_state(self) -> np.ndarray:
        """``x0`` as float64, shape (4,)."""
        return self.x0.copy()

    def reexcite(self, rng: np.random.Generator) -> np.ndarray:
        """Release from rest at random angles (see class doc)."""
        th1 = rng.uniform(*self.theta1_range) * rng.choice((-1.0, 1.0))
        th2 = rng.uniform(*self.theta2_range) * rng.choice((-1.0, 1.0))
        return np.array([th1, th2, 0.0, 0.0])

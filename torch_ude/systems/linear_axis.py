"""A force-driven linear axis (the EMPS positioning system): ``M q'' = gtau vir - friction - offset``.

The electro-mechanical positioning system of the nonlinear system-identification benchmark
(Janot, Gautier, Brunot; ``../shared/data/emps``) is a prismatic joint driven by a motor
whose force is ``gtau * vir``, with ``vir`` the controller's output voltage, and measured by
position only. Its benchmark model (IDIM-LS, ``Script_IDIM_LS.m``) is
``M q'' = gtau vir - Fv q' - Fc sign(q') - offset``. Here the sign is smoothed to
``tanh(q' / v_c)`` so that the field is differentiable and an RK4 step stays stable at
1 kHz (``Fc / (M v_c) = 215 /s`` with the benchmark's values and ``v_c = 1 mm/s``).
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from .controlled import ControlledField

__all__ = ["LinearAxisModel"]


class LinearAxisModel(ControlledField):
    """``q' = v``, ``v' = (gain u - Fv v - Fc tanh(v / v_c) - offset) / M``.

    State ``x = (q, v)`` (m, m/s), input ``u = (vir,)`` (V; the motor force is ``gain * vir``
    in N). With the defaults (no friction, no offset) it is the known model ``M q'' = gtau vir``
    whose friction and offset a residual learns; with the IDIM-LS ``Fv``, ``Fc`` and ``offset``
    it is the benchmark's whole inverse-model fit (a reference, not the truth). Float64 for
    verification, float32 where a device runs it, complex128 for complex-step checks.

    Args:
        mass: ``M`` in kg (> 0).
        gain: ``gtau`` in N/V (the EMPS files store 35.15).
        viscous: ``Fv`` in N s/m.
        coulomb: ``Fc`` in N.
        coulomb_velocity: ``v_c`` in m/s (> 0), the smoothing of ``sign(v)``.
        offset: force offset in N.

    Raises:
        ValueError: for a non-finite constant, or a non-positive mass or ``v_c``.
    """

    n_states = 2
    n_inputs = 1
    invariant = (0,)  # no force depends on the position: the residual reads (v, u) only

    def __init__(self, mass: float = 95.1, gain: float = 35.15, viscous: float = 0.0, coulomb: float = 0.0,
                 coulomb_velocity: float = 1e-3, offset: float = 0.0) -> None:
        super().__init__()
        values = (("mass", mass), ("gain", gain), ("viscous", viscous), ("coulomb", coulomb),
                  ("coulomb_velocity", coulomb_velocity), ("offset", offset))
        for name, value in values:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number; got {value!r}.")
        for name, unit, value in (("mass", "M in kg", mass), ("coulomb_velocity", "v_c in m/s", coulomb_velocity)):
            if not value > 0:
                raise ValueError(f"{name} ({unit}) must be positive; got {value!r}.")
        self.mass, self.gain, self.viscous, self.coulomb = float(mass), float(gain), float(viscous), float(coulomb)
        self.coulomb_velocity, self.offset = float(coulomb_velocity), float(offset)

    def init_args(self) -> dict:
        """The constructor arguments."""
        return {"mass": self.mass, "gain": self.gain, "viscous": self.viscous, "coulomb": self.coulomb,
                "coulomb_velocity": self.coulomb_velocity, "offset": self.offset}

    def forward(self, x: Tensor, u: Tensor) -> Tensor:
        """``(v, (gain u - friction - offset) / M)``, shapes (N, 2), (N, 1) -> (N, 2) in m/s, m/s^2."""
        v = x[:, 1]
        force = self.gain * u[:, 0]
        if self.viscous or self.coulomb or self.offset:
            force = force - self.viscous * v - self.coulomb * torch.tanh(v / self.coulomb_velocity) - self.offset
        return torch.stack((v, force / self.mass), dim=1)

    def jacobian(self, x: Tensor, u: Tensor) -> Tensor:
        """``[[0, 1], [0, -(Fv + Fc (1 - tanh^2(v / v_c)) / v_c) / M]]`` per state, (N, 2, 2)."""
        jac = x.new_zeros(x.shape[0], 2, 2)
        jac[:, 0, 1] = 1.0
        if self.viscous or self.coulomb:
            t = torch.tanh(x[:, 1] / self.coulomb_velocity)
            jac[:, 1, 1] = -(self.viscous + self.coulomb * (1.0 - t * t) / self.coulomb_velocity) / self.mass
        return jac

    def input_jacobian(self, x: Tensor, u: Tensor) -> Tensor:
        """``[[0], [gain / M]]`` per state, (N, 2, 1)."""
        jac = x.new_zeros(x.shape[0], 2, 1)
        jac[:, 1, 0] = self.gain / self.mass
        return jac

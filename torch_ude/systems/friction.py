"""A single pendulum with motor friction: viscous, Coulomb and Stribeck terms.

The missing physics of this plant is a friction curve that no small polynomial or
Fourier library holds: a smoothed sign function with a Stribeck bump at rest. It is
the plant on which the peers of `benchmarks.peers.pendulums` are compared with jet matching
where sparse regression cannot simply pick the missing term out of its library.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from .base import VectorField
from .pendulum import PendulumField, SinglePendulum

__all__ = ["FrictionField", "FrictionPendulum"]


class FrictionField(VectorField):
    """``theta' = omega``, ``omega' = -(g/L) sin(theta) - phi(omega)`` with the friction curve

        phi(omega) = c omega + (F_c + (F_s - F_c) exp(-(omega / v_s)^2)) tanh(omega / eps),

    all per unit inertia: viscous ``c`` in 1/s, Coulomb ``F_c`` and static (break-away)
    ``F_s`` levels in rad/s^2, Stribeck velocity ``v_s`` and the smoothing scale ``eps``
    of the sign function in rad/s.

    Args:
        gravity: g in m/s^2.
        length: L in m.
        viscous: c in 1/s (>= 0).
        coulomb: F_c in rad/s^2 (>= 0).
        static: F_s in rad/s^2 (>= F_c).
        stribeck_velocity: v_s in rad/s (> 0).
        smoothing: eps in rad/s (> 0).

    Raises:
        ValueError: for a non-positive length, scale or velocity, a negative friction
            level, or ``static < coulomb``.
    """

    n_states = 2

    def __init__(self, gravity: float, length: float, viscous: float, coulomb: float, static: float,
                 stribeck_velocity: float, smoothing: float) -> None:
        super().__init__()
        if length <= 0:
            raise ValueError(f"length must be positive (metres); got {length}.")
        if viscous < 0 or coulomb < 0:
            raise ValueError(f"viscous and coulomb must be >= 0; got viscous={viscous}, coulomb={coulomb}.")
        if static < coulomb:
            raise ValueError(f"static (the break-away level F_s) must be >= coulomb (F_c = {coulomb}); got {static}. "
                             "Set static = coulomb for friction without a Stribeck bump.")
        if stribeck_velocity <= 0 or smoothing <= 0:
            raise ValueError(f"stribeck_velocity and smoothing must be positive (rad/s); got "
                             f"{stribeck_velocity} and {smoothing}.")
        self.gravity, self.length = float(gravity), float(length)
        self.viscous, self.coulomb, self.static = float(viscous), float(coulomb), float(static)
        self.stribeck_velocity, self.smoothing = float(stribeck_velocity), float(smoothing)
        self._k = self.gravity / self.length

    def friction(self, omega: Tensor) -> Tensor:
        """The friction curve ``phi(omega)`` (rad/s^2) at velocities ``omega`` (rad/s), any shape."""
        level = self.coulomb + (self.static - self.coulomb) * torch.exp(-(omega / self.stribeck_velocity) ** 2)
        return self.viscous * omega + level * torch.tanh(omega / self.smoothing)

    def friction_slope(self, omega: Tensor) -> Tensor:
        """``d phi / d omega`` (1/s) at velocities ``omega``, any shape."""
        bump = (self.static - self.coulomb) * torch.exp(-(omega / self.stribeck_velocity) ** 2)
        tanh = torch.tanh(omega / self.smoothing)
        return (self.viscous + (self.coulomb + bump) * (1.0 - tanh**2) / self.smoothing
                - 2.0 * omega / self.stribeck_velocity**2 * bump * tanh)

    def forward(self, x: Tensor) -> Tensor:
        """Field value, (N, 2) rad, rad/s -> (N, 2) rad/s, rad/s^2."""
        theta, omega = x[:, 0], x[:, 1]
        return torch.stack((omega, -self._k * torch.sin(theta) - self.friction(omega)), dim=1)

    def jacobian(self, x: Tensor) -> Tensor:
        """State Jacobian, (N, 2) -> (N, 2, 2)."""
        jac = x.new_zeros(x.shape[0], 2, 2)
        jac[:, 0, 1] = 1.0
        jac[:, 1, 0] = -self._k * torch.cos(x[:, 0])
        jac[:, 1, 1] = -self.friction_slope(x[:, 1])
        return jac


class FrictionPendulum(SinglePendulum):
    """The single pendulum driven through a small geared motor whose friction the model omits.

    True plant: `FrictionField`. Known model (the only case, ``"A"``): the frictionless
    pendulum ``omega' = -(g/L) sin(theta)``, so the residual to learn is ``-phi(omega)``.

    Default parameters, per unit inertia of the project's pendulum (L = 1 m) with a
    0.5 kg bob, ``J = m L^2 = 0.5 kg m^2``, and the friction of a real small-motor
    pendulum, the DFKI torque-limited pendulum, whose lab fitted
    ``Fv qd + Fc atan(100 qd)`` with Fv = 0.04707 N m s/rad and Fc = 0.1839 N m
    (``../shared/data/dfki_pendulum/system_identification.txt``):

    * viscous ``c = Fv / J = 0.0941 /s``;
    * Coulomb ``F_c = (pi/2) Fc / J = 0.578 rad/s^2`` (the level ``Fc atan(100 qd)`` saturates at);
    * static ``F_s = 1.5 F_c = 0.867 rad/s^2``: break-away friction 20-50 % above the
      Coulomb level is typical of geared drives (Armstrong-Helouvry et al. 1994; Olsson
      et al. 1998); the lab's model has no Stribeck term, so this is chosen;
    * Stribeck velocity ``v_s = 0.1 rad/s``, the upper end of the 0.01-0.1 rad/s typical
      of servo drives (same sources; chosen);
    * sign smoothing ``eps = 0.02 rad/s``: close to the lab's ``atan(100 qd)``, whose
      normalized slope at rest, 200/pi, equals that of ``tanh(qd / 0.0157)``.

    The Coulomb level is 5.9 % of the largest gravity torque, so a swing loses about
    ``2 F_c / (g/L) = 0.12 rad`` of amplitude and the pendulum keeps swinging between
    re-excitations (every 2.5-5 s, to a random energy level ``u E(x0)`` with ``u ~ U(0.3,
    1)`` at a uniform phase; the wider range than `SinglePendulum`'s 0.95-1 makes up
    for friction draining the energy more slowly than the damping of Case A does).

    Evaluation grid: 41 x 41 states over the box that holds the energy level of ``x0``
    (``|theta| <= theta_max``, ``|omega| <= omega_max``); the visited region is the level's
    inside, as for `SinglePendulum`.

    Args:
        gravity: g in m/s^2.
        length: L in m (> 0).
        viscous: c in 1/s.
        coulomb: F_c in rad/s^2.
        static: F_s in rad/s^2.
        stribeck_velocity: v_s in rad/s.
        smoothing: eps in rad/s.
        x0: initial state (rad, rad/s), below the separatrix.
        reexcite_interval: (low, high) seconds between re-excitations.
        energy_fraction: (low, high) range of ``u``, within (0, 1].

    Raises:
        ValueError: for parameters `FrictionField` or `SinglePendulum` reject.
    """

    cases = ("A",)

    def __init__(
        self,
        gravity: float = 9.81,
        length: float = 1.0,
        viscous: float = 0.0941,
        coulomb: float = 0.578,
        static: float = 0.867,
        stribeck_velocity: float = 0.1,
        smoothing: float = 0.02,
        x0: Sequence[float] = (1.2, 0.0),
        reexcite_interval: tuple[float, float] = (2.5, 5.0),
        energy_fraction: tuple[float, float] = (0.3, 1.0),
    ) -> None:
        field = FrictionField(gravity, length, viscous, coulomb, static, stribeck_velocity, smoothing)  # validates
        super().__init__(gravity=gravity, length=length, damping=viscous, gravity_factor=1.0, x0=x0,
                         reexcite_interval=reexcite_interval, energy_fraction=energy_fraction)
        self.coulomb, self.static = field.coulomb, field.static
        self.stribeck_velocity, self.smoothing = field.stribeck_velocity, field.smoothing

    def init_args(self) -> dict:
        """Constructor arguments of this plant."""
        return {
            "gravity": self.gravity, "length": self.length, "viscous": self.damping, "coulomb": self.coulomb,
            "static": self.static, "stribeck_velocity": self.stribeck_velocity, "smoothing": self.smoothing,
            "x0": self.x0.tolist(), "reexcite_interval": list(self.reexcite_interval),
            "energy_fraction": list(self.energy_fraction),
        }

    def true_field(self) -> FrictionField:
        """The true plant f* with the friction curve."""
        return FrictionField(self.gravity, self.length, self.damping, self.coulomb, self.static,
                             self.stribeck_velocity, self.smoothing)

    def build_known_field(self, case: str) -> PendulumField:
        """Case A: the pendulum without friction."""
        return PendulumField(self.gravity, self.length, 0.0)

    def damping_terms(self, case: str) -> tuple[tuple[int, int, float], ...]:
        """The viscous coefficient c of the omega channel.

        ``c_hat`` of `torch_ude.metrics.damping_estimate` is the least-squares slope of the
        whole learned friction on omega, so on this plant it also holds the Coulomb and
        Stribeck terms' projection on omega and exceeds c; the terms themselves are read
        from the residual by `torch_ude.sparse.fit_residual` with a library holding tanh.
        """
        self.check_case(case)
        return ((1, 1, self.damping),)

    def evaluation_grid(self) -> Tensor:
        """41 x 41 states over ``[-theta_max, theta_max] x [-omega_max, omega_max]`` of E(x0); (1681, 2)."""
        theta_max = math.acos(1.0 - self.energy0 / self._k)
        omega_max = math.sqrt(2.0 * self.energy0)
        theta = torch.linspace(-theta_max, theta_max, 41, dtype=torch.float64)
        omega = torch.linspace(-omega_max, omega_max, 41, dtype=torch.float64)
        return torch.cartesian_prod(theta, omega)

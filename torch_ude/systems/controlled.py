"""Known models with a recorded input: ``f_known(x, u)`` and its state and input Jacobians.

A plant driven by a known input ``u(t)`` (a motor torque, a force command) is learned as
``F(x, u) = f_known(x, u) + N_theta(x, u)`` (`torch_ude.field.HybridField` with
``known`` a `ControlledField`). The known model gives, besides its value, the state
Jacobian ``J_x = df/dx`` and the input Jacobian ``J_u = df/du`` with plain tensor
operations (float64, float32 and complex128 for complex-step checks), so the jet
target ``xddot = J_x F F + J_u F udot`` and its gradient are written out by hand.
"""
from __future__ import annotations

import abc
import math

import torch
from torch import Tensor, nn

__all__ = ["ControlledField", "TorquePendulumModel", "GRAVITY"]

#: Standard gravity in m/s^2 (the DFKI lab's value).
GRAVITY = 9.81


class ControlledField(nn.Module, abc.ABC):
    """An analytic, batched field ``f: (N, n), (N, n_u) -> (N, n)`` with both Jacobians.

    Subclasses set ``n_states`` and ``n_inputs`` (and ``periodic``, the indices of the states
    that are angles in rad, when there are any: a recorded machine driven by this model reads
    them as ``(sin, cos)``, `torch_ude.input_map`; and ``invariant``, the states its dynamics
    do not depend on, which the residual then does not read) and implement `forward`, `jacobian`,
    `input_jacobian` and `init_args`. Inputs are not validated here: the public entry
    points of the library check them once at their boundary.
    """

    n_states: int
    n_inputs: int
    periodic: tuple[int, ...] = ()
    invariant: tuple[int, ...] = ()

    @abc.abstractmethod
    def forward(self, x: Tensor, u: Tensor) -> Tensor:
        """The field: states (N, n) in the plant's units and inputs (N, n_u) -> (N, n) per second."""

    @abc.abstractmethod
    def jacobian(self, x: Tensor, u: Tensor) -> Tensor:
        """``J[b, i, j] = d f_i / d x_j`` at ``(x[b], u[b])``, shape (N, n, n)."""

    @abc.abstractmethod
    def input_jacobian(self, x: Tensor, u: Tensor) -> Tensor:
        """``B[b, i, k] = d f_i / d u_k`` at ``(x[b], u[b])``, shape (N, n, n_u)."""

    @abc.abstractmethod
    def init_args(self) -> dict:
        """The constructor arguments that rebuild this model (for run records)."""

    def vjp(self, x: Tensor, u: Tensor, w: Tensor) -> Tensor:
        """``J_x(x, u)^T w``; shapes (N, n), (N, n_u), (N, n) -> (N, n)."""
        return torch.einsum("bij,bi->bj", self.jacobian(x, u), w)

    def spec(self) -> dict:
        """``{"class_path": ..., "init_args": ...}``: the model as a config file names it."""
        return {"class_path": f"{type(self).__module__}.{type(self).__qualname__}", "init_args": self.init_args()}


class TorquePendulumModel(ControlledField):
    """A motor-driven pendulum: ``J q'' = tau - m cx g sin(q) - Fv q' - Fc atan(100 q') - offset``.

    State ``x = (q, qdot)`` (rad, rad/s), input ``u = (tau,)`` (N m). The DFKI
    torque-limited pendulum's own identification gives ``J = 6.259e-2`` kg m^2 and
    ``m cx = 1.022e-1`` kg m (``../shared/data/dfki_pendulum/system_identification.txt``);
    without friction (the defaults: ``Fv = Fc = offset = 0``) it is the known model whose
    friction and torque offset a residual learns; with the lab's ``Fv``, ``Fc`` and
    ``offset`` it is the lab's whole least-squares model (a reference, not the truth).

    Args:
        inertia: ``J`` in kg m^2 (> 0).
        mass_com: ``m cx``, mass times distance of the centre of mass from the axis, in kg m.
        gravity: ``g`` in m/s^2.
        viscous: ``Fv`` in N m s.
        coulomb: ``Fc`` in N m (smoothed by ``atan(100 q')``, the lab's form).
        offset: torque offset in N m.

    Raises:
        ValueError: for a non-positive or non-finite inertia, or non-finite constants.
    """

    n_states = 2
    n_inputs = 1
    periodic = (0,)

    def __init__(self, inertia: float = 6.259e-2, mass_com: float = 1.022e-1, gravity: float = GRAVITY,
                 viscous: float = 0.0, coulomb: float = 0.0, offset: float = 0.0) -> None:
        super().__init__()
        for name, value in (("inertia", inertia), ("mass_com", mass_com), ("gravity", gravity), ("viscous", viscous),
                            ("coulomb", coulomb), ("offset", offset)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number; got {value!r}.")
        if not inertia > 0:
            raise ValueError(f"inertia (J in kg m^2) must be positive; got {inertia!r}.")
        self.inertia, self.mass_com, self.gravity = float(inertia), float(mass_com), float(gravity)
        self.viscous, self.coulomb, self.offset = float(viscous), float(coulomb), float(offset)

    def init_args(self) -> dict:
        """The constructor arguments."""
        return {"inertia": self.inertia, "mass_com": self.mass_com, "gravity": self.gravity, "viscous": self.viscous,
                "coulomb": self.coulomb, "offset": self.offset}

    def forward(self, x: Tensor, u: Tensor) -> Tensor:
        """``(qdot, (tau - m cx g sin q - friction - offset) / J)``, shapes (N, 2), (N, 1) -> (N, 2)."""
        q, qd = x[:, 0], x[:, 1]
        torque = u[:, 0] - self.mass_com * self.gravity * torch.sin(q)
        if self.viscous or self.coulomb or self.offset:
            torque = torque - self.viscous * qd - self.coulomb * torch.atan(100.0 * qd) - self.offset
        return torch.stack((qd, torque / self.inertia), dim=1)

    def jacobian(self, x: Tensor, u: Tensor) -> Tensor:
        """``[[0, 1], [-m cx g cos(q) / J, -(Fv + 100 Fc / (1 + (100 q')^2)) / J]]`` per state, (N, 2, 2)."""
        jac = x.new_zeros(x.shape[0], 2, 2)
        jac[:, 0, 1] = 1.0
        jac[:, 1, 0] = -self.mass_com * self.gravity * torch.cos(x[:, 0]) / self.inertia
        if self.viscous or self.coulomb:
            s = 100.0 * x[:, 1]
            jac[:, 1, 1] = -(self.viscous + 100.0 * self.coulomb / (1.0 + s * s)) / self.inertia
        return jac

    def input_jacobian(self, x: Tensor, u: Tensor) -> Tensor:
        """``[[0], [1 / J]]`` per state, (N, 2, 1)."""
        jac = x.new_zeros(x.shape[0], 2, 1)
        jac[:, 1, 0] = 1.0 / self.inertia
        return jac

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
import re
from collections.abc import Mapping
from pathlib import Path

import torch
from torch import Tensor, nn

from .parameters import PhysicalParameters

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


class TorquePendulumModel(PhysicalParameters, ControlledField):
    """A motor-driven pendulum: ``J q'' = tau - m cx g sin(q) - Fv q' - Fc atan(100 q') - offset``.

    State ``x = (q, qdot)`` (rad, rad/s), input ``u = (tau,)`` (N m). The DFKI
    torque-limited pendulum's own identification gives ``J = 6.259e-2`` kg m^2 and
    ``m cx = 1.022e-1`` kg m (``../shared/data/dfki_pendulum/system_identification.txt``);
    without friction (the defaults: ``Fv = Fc = offset = 0``) it is the known model whose
    friction and torque offset a residual learns; with the lab's ``Fv``, ``Fc`` and
    ``offset`` it is the lab's whole least-squares model (a reference, not the truth).
    Any of ``inertia``, ``mass_com``, ``viscous``, ``coulomb`` and ``offset`` can be trained
    with the residual (``trainable``, `torch_ude.systems.parameters`); the attributes of the
    same names give their current values.

    Args:
        inertia: ``J`` in kg m^2 (> 0).
        mass_com: ``m cx``, mass times distance of the centre of mass from the axis, in kg m.
        gravity: ``g`` in m/s^2.
        viscous: ``Fv`` in N m s.
        coulomb: ``Fc`` in N m (smoothed by ``atan(100 q')``, the lab's form).
        offset: torque offset in N m.
        trainable: the parameters to train and their bounds, e.g. ``{"inertia": [0.02, 0.2]}``;
            None trains none. The bounds of ``inertia`` must stay positive.

    Raises:
        ValueError: for a non-positive or non-finite inertia, non-finite constants, or bad
            trainable names or bounds (`PhysicalParameters.init_parameters`).
    """

    n_states = 2
    n_inputs = 1
    periodic = (0,)
    _SHARPNESS = 100.0  # of the lab's atan(100 q') Coulomb form

    def __init__(self, inertia: float = 6.259e-2, mass_com: float = 1.022e-1, gravity: float = GRAVITY,
                 viscous: float = 0.0, coulomb: float = 0.0, offset: float = 0.0,
                 trainable: dict[str, list[float]] | None = None) -> None:
        super().__init__()
        for name, value in (("inertia", inertia), ("mass_com", mass_com), ("gravity", gravity), ("viscous", viscous),
                            ("coulomb", coulomb), ("offset", offset)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number; got {value!r}.")
        if not inertia > 0:
            raise ValueError(f"inertia (J in kg m^2) must be positive; got {inertia!r}.")
        if trainable and "gravity" in trainable:
            raise ValueError("gravity is not a trainable parameter of TorquePendulumModel (m cx carries its scale); "
                             "train mass_com instead.")
        if trainable and "inertia" in trainable and not (isinstance(trainable["inertia"], (list, tuple))
                                                           and len(trainable["inertia"]) == 2
                                                           and isinstance(trainable["inertia"][0], (int, float))
                                                           and trainable["inertia"][0] > 0):
            raise ValueError(f"the bounds of inertia must be [low, high] with low > 0 (J is positive); got "
                             f"{trainable['inertia']!r}.")
        self.init_parameters({"inertia": inertia, "mass_com": mass_com, "gravity": gravity, "viscous": viscous,
                              "coulomb": coulomb, "offset": offset}, trainable)

    inertia = property(lambda self: self.values()["inertia"], doc="``J`` in kg m^2 (current value).")
    mass_com = property(lambda self: self.values()["mass_com"], doc="``m cx`` in kg m (current value).")
    gravity = property(lambda self: self.values()["gravity"], doc="``g`` in m/s^2.")
    viscous = property(lambda self: self.values()["viscous"], doc="``Fv`` in N m s (current value).")
    coulomb = property(lambda self: self.values()["coulomb"], doc="``Fc`` in N m (current value).")
    offset = property(lambda self: self.values()["offset"], doc="torque offset in N m (current value).")

    def init_args(self) -> dict:
        """The constructor arguments, with the current (trained) values."""
        return self.constructor_args()

    @classmethod
    def from_lab_file(cls, path: str | Path, gravity: float = GRAVITY) -> TorquePendulumModel:
        """The lab's whole least-squares model from its ``system_identification.txt`` (J, m*cx, Fv, Fc, offset).

        Args:
            path: a text file with lines ``J = 0.06259``, ``m*cx = ...``, ``Fv``, ``Fc``, ``offset``
                (SI units as the constructor's); other lines are ignored.
            gravity: ``g`` in m/s^2 (the file has none).

        Raises:
            FileNotFoundError: if the file does not exist.
            ValueError: if a name is missing or its value is not a number.
        """
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"the lab's identification file {path} does not exist; the DFKI pendulum files "
                                    f"live in ../shared/data/dfki_pendulum (see its README).")
        text = path.read_text()
        values = {}
        for name in ("J", "m*cx", "Fv", "Fc", "offset"):
            found = re.search(rf"^{re.escape(name)}\s*=\s*([-+0-9.e]+)", text, re.M)
            if found is None:
                raise ValueError(f"{path}: no number for {name} (a line '{name} = value').")
            values[name] = float(found.group(1))
        return cls(inertia=values["J"], mass_com=values["m*cx"], gravity=gravity, viscous=values["Fv"],
                   coulomb=values["Fc"], offset=values["offset"])

    def _friction(self) -> bool:
        """Whether the friction and offset terms are present (always when any parameter is trained)."""
        v = self._values
        return self.trainable or bool(v["viscous"] or v["coulomb"] or v["offset"])

    def _torque(self, x: Tensor, u: Tensor, c: Mapping[str, float | Tensor]) -> Tensor:
        """``tau - m cx g sin q - Fv q' - Fc atan(100 q') - offset``, (N,), with the constants ``c``
        (`PhysicalParameters.constants`: read once per call, as a rollout calls this per step)."""
        q, qd = x[:, 0], x[:, 1]
        torque = u[:, 0] - c["mass_com"] * c["gravity"] * torch.sin(q)
        if self._friction():
            torque = torque - c["viscous"] * qd - c["coulomb"] * torch.atan(self._SHARPNESS * qd) - c["offset"]
        return torque

    def forward(self, x: Tensor, u: Tensor) -> Tensor:
        """``(qdot, (tau - m cx g sin q - friction - offset) / J)``, shapes (N, 2), (N, 1) -> (N, 2)."""
        c = self.constants()
        return torch.stack((x[:, 1], self._torque(x, u, c) / c["inertia"]), dim=1)

    def _slope(self, qd: Tensor) -> Tensor | float:
        """``d(friction)/dq' = Fv + 100 Fc / (1 + (100 q')^2)``."""
        s = self._SHARPNESS * qd
        return self.value("viscous") + self._SHARPNESS * self.value("coulomb") / (1.0 + s * s)

    def jacobian(self, x: Tensor, u: Tensor) -> Tensor:
        """``[[0, 1], [-m cx g cos(q) / J, -(Fv + 100 Fc / (1 + (100 q')^2)) / J]]`` per state, (N, 2, 2)."""
        jac = x.new_zeros(x.shape[0], 2, 2)
        jac[:, 0, 1] = 1.0
        inertia = self.value("inertia")
        jac[:, 1, 0] = -self.value("mass_com") * self.value("gravity") * torch.cos(x[:, 0]) / inertia
        if self._friction():
            jac[:, 1, 1] = -self._slope(x[:, 1]) / inertia
        return jac

    def input_jacobian(self, x: Tensor, u: Tensor) -> Tensor:
        """``[[0], [1 / J]]`` per state, (N, 2, 1)."""
        jac = x.new_zeros(x.shape[0], 2, 1)
        jac[:, 1, 0] = 1.0 / self.value("inertia")
        return jac

    def parameter_jacobian(self, x: Tensor, u: Tensor) -> Tensor:
        """``df/dtheta`` (`torch_ude.systems.parameters`), (N, 2, P): of ``q''`` only,
        ``-a / J^2`` for J (``a`` the net torque), ``-g sin q / J``, ``-q' / J``,
        ``-atan(100 q') / J`` and ``-1 / J`` for m cx, Fv, Fc and the offset."""
        q, qd = x[:, 0], x[:, 1]
        inertia = self.value("inertia")
        ones = torch.ones_like(qd)
        return self.acceleration_columns(x, inertia=-self._torque(x, u, self.constants()) / inertia ** 2,
                                         mass_com=-self.value("gravity") * torch.sin(q) / inertia,
                                         viscous=-qd / inertia, coulomb=-torch.atan(self._SHARPNESS * qd) / inertia,
                                         offset=-ones / inertia)

    def parameter_lie_jacobian(self, x: Tensor, u: Tensor, v: Tensor, udot: Tensor) -> Tensor:
        """``d/dtheta (J_x f v + J_u f udot)`` with ``v`` (N, 2) and ``udot`` (N, 1) held fixed,
        (N, 2, P): with ``b = -m cx g cos q v_q - slope(q') v_q' + udot`` the acceleration row is
        ``b / J``, so ``-b / J^2`` for J and ``-g cos q v_q / J``, ``-v_q' / J``,
        ``-100 v_q' / ((1 + (100 q')^2) J)`` and 0 for m cx, Fv, Fc and the offset."""
        q, qd = x[:, 0], x[:, 1]
        inertia = self.value("inertia")
        s = self._SHARPNESS * qd
        b = (-self.value("mass_com") * self.value("gravity") * torch.cos(q) * v[:, 0] - self._slope(qd) * v[:, 1]
             + udot[:, 0])
        return self.acceleration_columns(x, inertia=-b / inertia ** 2,
                                         mass_com=-self.value("gravity") * torch.cos(q) * v[:, 0] / inertia,
                                         viscous=-v[:, 1] / inertia,
                                         coulomb=-self._SHARPNESS * v[:, 1] / ((1.0 + s * s) * inertia),
                                         offset=torch.zeros_like(qd))

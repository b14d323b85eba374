"""Damped single pendulum, Eq. (3)-(4) of the jet-matching paper."""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from .base import System, VectorField, as_state
from .parameters import PhysicalParameters

__all__ = ["PendulumField", "TrainablePendulumField", "SinglePendulum"]


class PendulumField(VectorField):
    """``theta' = omega``, ``omega' = -(g/L) sin(theta) - c omega`` (Eq. 3-4).

    Args:
        gravity: g in m/s^2.
        length: L in m.
        damping: c in 1/s (zero for a model that omits damping).
    """

    n_states = 2

    def __init__(self, gravity: float, length: float, damping: float) -> None:
        super().__init__()
        if length <= 0:
            raise ValueError(f"length must be positive (metres); got {length}.")
        self.gravity, self.length, self.damping = float(gravity), float(length), float(damping)
        self._k = self.gravity / self.length

    def forward(self, x: Tensor) -> Tensor:
        """Field value, (N, 2) rad, rad/s -> (N, 2) rad/s, rad/s^2."""
        theta, omega = x[:, 0], x[:, 1]
        return torch.stack((omega, -self._k * torch.sin(theta) - self.damping * omega), dim=1)

    def jacobian(self, x: Tensor) -> Tensor:
        """State Jacobian, (N, 2) -> (N, 2, 2)."""
        jac = x.new_zeros(x.shape[0], 2, 2)
        jac[:, 0, 1] = 1.0
        jac[:, 1, 0] = -self._k * torch.cos(x[:, 0])
        jac[:, 1, 1] = -self.damping
        return jac


class TrainablePendulumField(PhysicalParameters, VectorField):
    """`PendulumField` with any of ``gravity``, ``length`` and ``damping`` trained with the
    residual (``trainable``, `torch_ude.systems.parameters`); the attributes give their current
    values. (A separate class: `PendulumField`, the simulators' true field, stays scriptable.)

    Args:
        gravity, length, damping: as `PendulumField` (their initial values when trained).
        trainable: the parameters to train and their bounds, e.g. ``{"damping": [0, 1]}``.
            The bounds of ``length`` must stay positive.
    """

    n_states = 2

    def __init__(self, gravity: float, length: float, damping: float,
                 trainable: dict[str, list[float]] | None = None) -> None:
        super().__init__()
        if length <= 0:
            raise ValueError(f"length must be positive (metres); got {length}.")
        if trainable and "length" in trainable and not (isinstance(trainable["length"], (list, tuple))
                                                         and len(trainable["length"]) == 2
                                                         and isinstance(trainable["length"][0], (int, float))
                                                         and trainable["length"][0] > 0):
            raise ValueError(f"the bounds of length must be [low, high] with low > 0 (metres); got "
                             f"{trainable['length']!r}.")
        self.init_parameters({"gravity": gravity, "length": length, "damping": damping}, trainable)

    gravity = property(lambda self: self.values()["gravity"], doc="g in m/s^2 (current value).")
    length = property(lambda self: self.values()["length"], doc="L in m (current value).")
    damping = property(lambda self: self.values()["damping"], doc="c in 1/s (current value).")

    def _k(self) -> float | Tensor:
        return self.value("gravity") / self.value("length")

    def forward(self, x: Tensor) -> Tensor:
        """Field value, (N, 2) rad, rad/s -> (N, 2) rad/s, rad/s^2."""
        theta, omega = x[:, 0], x[:, 1]
        return torch.stack((omega, -self._k() * torch.sin(theta) - self.value("damping") * omega), dim=1)

    def jacobian(self, x: Tensor) -> Tensor:
        """State Jacobian, (N, 2) -> (N, 2, 2)."""
        jac = x.new_zeros(x.shape[0], 2, 2)
        jac[:, 0, 1] = 1.0
        jac[:, 1, 0] = -self._k() * torch.cos(x[:, 0])
        jac[:, 1, 1] = -self.value("damping")
        return jac

    def parameter_jacobian(self, x: Tensor) -> Tensor:
        """``df/dtheta`` (`torch_ude.systems.parameters`), (N, 2, P): of ``omega'`` only,
        ``-sin(theta) / L``, ``(g / L^2) sin(theta)`` and ``-omega`` for g, L and c."""
        s, length = torch.sin(x[:, 0]), self.value("length")
        return self.acceleration_columns(x, gravity=-s / length, length=self.value("gravity") * s / length ** 2,
                                         damping=-x[:, 1])

    def parameter_lie_jacobian(self, x: Tensor, v: Tensor) -> Tensor:
        """``d/dtheta (J f v)`` with ``v`` (N, 2) held fixed, (N, 2, P): ``-cos(theta) v_theta / L``,
        ``(g / L^2) cos(theta) v_theta`` and ``-v_omega`` for g, L and c."""
        c, length = torch.cos(x[:, 0]) * v[:, 0], self.value("length")
        return self.acceleration_columns(x, gravity=-c / length, length=self.value("gravity") * c / length ** 2,
                                         damping=-v[:, 1])

    def init_args(self) -> dict:
        """The constructor arguments, with the current (trained) values."""
        return self.constructor_args()


class SinglePendulum(System):
    """The damped single pendulum plant with the paper's Cases A, B and C.

    Case A omits damping from the known model; Case B keeps it but uses
    ``g_model = gravity_factor * g``; Case C has both errors.

    Re-excitation law: at intervals drawn uniformly from `reexcite_interval` (s) the
    rig places the pendulum at a fresh state on the energy level ``u * E(x0)`` with
    ``u ~ U(energy_fraction)`` and a uniform phase along that level; damping then
    lets it spiral inwards. Every visited state therefore lies inside the energy
    level of ``x0 = (1.2, 0)``. The defaults (every 2.5-5 s, back to 95-100 % of
    E(x0)) keep the stream near the outer levels, where the field is largest and a
    decaying pendulum otherwise spends little time (damping drains the energy at the
    rate c), while the decay of each segment (to about 15-35 % of E(x0)) covers the
    interior.

    Args:
        gravity: g in m/s^2.
        length: L in m.
        damping: true c in 1/s.
        gravity_factor: ratio g_model / g of Cases B and C.
        x0: initial state (rad, rad/s).
        reexcite_interval: (low, high) seconds between re-excitations.
        energy_fraction: (low, high) range of ``u``, within (0, 1].
        known_length: L of the known model in m (None: ``length``), for a known model whose
            inertia is off.
        trainable: physical parameters of the known model to train with the residual and their
            bounds (`PendulumField`), e.g. ``{"length": [0.5, 2], "damping": [0, 1]}``.
    """

    state_names = ("theta", "omega")
    periodic = (0,)

    def __init__(
        self,
        gravity: float = 9.81,
        length: float = 1.0,
        damping: float = 0.40,
        gravity_factor: float = 0.9,
        x0: Sequence[float] = (1.2, 0.0),
        reexcite_interval: tuple[float, float] = (2.5, 5.0),
        energy_fraction: tuple[float, float] = (0.95, 1.0),
        known_length: float | None = None,
        trainable: dict[str, list[float]] | None = None,
    ) -> None:
        if not 0.0 < energy_fraction[0] <= energy_fraction[1] <= 1.0:
            raise ValueError(f"energy_fraction must satisfy 0 < low <= high <= 1; got {energy_fraction}.")
        if not 0.0 < reexcite_interval[0] <= reexcite_interval[1]:
            raise ValueError(f"reexcite_interval must satisfy 0 < low <= high; got {reexcite_interval}.")
        self.gravity, self.length, self.damping = float(gravity), float(length), float(damping)
        self.gravity_factor = float(gravity_factor)
        self.x0 = as_state(x0, 2, "x0")
        self.reexcite_interval = (float(reexcite_interval[0]), float(reexcite_interval[1]))
        self.energy_fraction = (float(energy_fraction[0]), float(energy_fraction[1]))
        self.known_length = None if known_length is None else float(known_length)
        self.trainable = None if trainable is None else {k: [float(b) for b in v] for k, v in dict(trainable).items()}
        self._k = self.gravity / self.length
        self.energy0 = float(self.energy(torch.as_tensor(self.x0).reshape(1, 2))[0])
        if self.energy0 >= 2 * self._k:
            raise ValueError("x0 must lie below the separatrix (the pendulum must not rotate over the top).")

    def init_args(self) -> dict:
        """Constructor arguments of this plant."""
        args = {
            "gravity": self.gravity, "length": self.length, "damping": self.damping,
            "gravity_factor": self.gravity_factor, "x0": self.x0.tolist(),
            "reexcite_interval": list(self.reexcite_interval),
            "energy_fraction": list(self.energy_fraction),
        }
        if self.known_length is not None or self.trainable is not None:  # (older specs stay as they were)
            args.update(known_length=self.known_length, trainable=self.trainable)
        return args

    def energy(self, x: Tensor) -> Tensor:
        """Energy per unit ``m L^2``: ``omega^2 / 2 + (g/L)(1 - cos theta)``; (N, 2) -> (N,)."""
        return 0.5 * x[:, 1] ** 2 + self._k * (1.0 - torch.cos(x[:, 0]))

    def true_field(self) -> PendulumField:
        """The true plant f* with damping c."""
        return PendulumField(self.gravity, self.length, self.damping)

    def build_known_field(self, case: str) -> PendulumField | TrainablePendulumField:
        """Case A: no damping. Case B: g_model, damping known. Case C: g_model, no damping."""
        gravity = self.gravity if case == "A" else self.gravity_factor * self.gravity
        damping = self.damping if case == "B" else 0.0
        length = self.length if self.known_length is None else self.known_length
        if self.trainable:
            return TrainablePendulumField(gravity, length, damping, self.trainable)
        return PendulumField(gravity, length, damping)

    def damping_terms(self, case: str) -> tuple[tuple[int, int, float], ...]:
        """The omega-channel residual should be ``-c omega`` (0 in Case B)."""
        case = self.check_case(case)
        return ((1, 1, 0.0 if case == "B" else self.damping),)

    def initial_state(self) -> np.ndarray:
        """``x0`` as float64, shape (2,)."""
        return self.x0.copy()

    def rollout_states(self) -> Tensor:
        """The initial states of the paper's rollout test (Figure 5): ``x0`` and seven states on the
        energy levels 0.3, 0.5, 0.7, 0.9, 0.95, 0.6 and 0.4 ``E(x0)`` at spread phases, all inside
        the visited region; (8, 2) float64, rad and rad/s."""
        rows = [self.initial_state().tolist()]
        for i, frac in enumerate((0.3, 0.5, 0.7, 0.9, 0.95, 0.6, 0.4)):
            level = frac * self.energy0
            theta = math.acos(1 - level / self._k) * math.cos(0.9 * i)
            omega = math.copysign(math.sqrt(max(2 * (level - self._k * (1 - math.cos(theta))), 0.0)),
                                  math.sin(0.9 * i))
            rows.append([theta, omega])
        return torch.tensor(rows, dtype=torch.float64)

    def reexcite(self, rng: np.random.Generator) -> np.ndarray:
        """A state on a random energy level below ``E(x0)``, uniform phase (see class doc)."""
        level = rng.uniform(*self.energy_fraction) * self.energy0
        theta_max = math.acos(1.0 - level / self._k)
        phase = rng.uniform(0.0, 2.0 * math.pi)
        theta = theta_max * math.sin(phase)
        omega = math.copysign(math.sqrt(max(2.0 * (level - self._k * (1.0 - math.cos(theta))), 0.0)),
                              math.cos(phase))
        return np.array([theta, omega])

    def evaluation_grid(self) -> Tensor:
        """The paper's 41 x 41 grid, theta in [-1.2, 1.2] rad, omega in [-3.5, 3.5] rad/s; (1681, 2)."""
        theta = torch.linspace(-1.2, 1.2, 41, dtype=torch.float64)
        omega = torch.linspace(-3.5, 3.5, 41, dtype=torch.float64)
        grid = torch.cartesian_prod(theta, omega)
        return grid

    def visited_region(self, x: Tensor) -> Tensor:
        """States inside the energy level of ``x0`` (those the stream visits); (G, 2) -> (G,)."""
        return self.energy(x) <= self.energy0

"""Builders shared by the baseline tests: short streams, windows and test fields."""
from __future__ import annotations

import copy
import warnings

import torch
from torch import Tensor

from baselines.shooting import ShootingObjective
from baselines.windows import ShootingWindows, observe, shooting_windows
from torch_ude import DoublePendulum, HybridField, SinglePendulum, simulate
from torch_ude.systems.base import VectorField

PLANTS = {"single": SinglePendulum, "double": DoublePendulum}


def short_windows(plant: str, steps: int, n_windows: int, noise: float = 0.01, seed: int = 0,
                  duration: float = 6.0, rate: float = 50.0) -> ShootingWindows:
    """Windows from a short simulated stream of the plant."""
    rec = simulate(PLANTS[plant](), duration, noise=noise, seed=seed)
    return shooting_windows(observe(rec, rate), steps, n_windows)


def complex_copy(field: HybridField) -> HybridField:
    """The field in complex128 (for complex-step differentiation)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch flags complex modules as experimental
        return copy.deepcopy(field).to(torch.complex128)


def complex_step_gradient(objective: ShootingObjective, step: float = 1e-30) -> tuple[Tensor, Tensor]:
    """``dL/dtheta`` (flattened) and ``dL/ds`` (B, n) of a complex128 objective, one entry at a time."""
    def derivative(tensor: Tensor) -> Tensor:
        flat = tensor.view(-1)
        out = torch.empty(flat.numel(), dtype=torch.float64)
        for j in range(flat.numel()):
            flat[j] += step * 1j
            out[j] = objective.loss().imag / step
            flat[j] -= step * 1j
        return out
    with torch.no_grad():
        theta = torch.cat([derivative(p) for p in objective.field.parameters_list()])
        states = derivative(objective.shooting_states).reshape(objective.shooting_states.shape)
    return theta, states


class Explosive(VectorField):
    """``x' = gain x^2`` per channel: blow-up at ``t = 1 / (gain x0)`` for ``x0 > 0``."""

    def __init__(self, n_states: int = 2, gain: float = 1.0) -> None:
        super().__init__()
        self.n_states, self.gain = n_states, gain

    def forward(self, x: Tensor) -> Tensor:
        """``gain x^2``, (N, n) -> (N, n)."""
        return self.gain * x * x

    def jacobian(self, x: Tensor) -> Tensor:
        """``diag(2 gain x)``, (N, n) -> (N, n, n)."""
        return torch.diag_embed(2.0 * self.gain * x)

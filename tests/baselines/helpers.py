"""Builders shared by the baseline tests: short streams, windows and test fields."""
from __future__ import annotations

import torch
from torch import Tensor

from baselines.windows import ShootingWindows, observe, shooting_windows
from torch_ude import DoublePendulum, SinglePendulum, simulate
from torch_ude.systems.base import VectorField

PLANTS = {"single": SinglePendulum, "double": DoublePendulum}


def short_windows(plant: str, steps: int, n_windows: int, noise: float = 0.01, seed: int = 0,
                  duration: float = 6.0, rate: float = 50.0) -> ShootingWindows:
    """Windows from a short simulated stream of the plant."""
    rec = simulate(PLANTS[plant](), duration, noise=noise, seed=seed)
    return shooting_windows(observe(rec, rate), steps, n_windows)


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

"""A Duffing oscillator sampled close to its resonance: the plant of a signal too fast for the jets.

An electronic oscillator (the kind a system-identification benchmark records) resonates at a
frequency that the sensor samples only a few times per period. Savitzky–Golay jets need a
window much shorter than a period; at about 9 samples per period even the 11 consecutive
samples of the noise estimate span more than a period, so the polynomial bias reads as
noise. This plant reproduces that regime with a known model that is exact (Case A), so the
best a trainer can do is to leave the physics alone, and one without the cubic term (Case B).
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from .base import System, VectorField

__all__ = ["DuffingField", "DuffingOscillator"]


class DuffingField(VectorField):
    """``x' = v``, ``v' = -delta v - alpha x - beta x^3 - mu tanh(20 v)``.

    Args:
        alpha: linear stiffness per unit mass in 1/s^2 (> 0).
        beta: cubic stiffness per unit mass in 1/(s^2 unit^2).
        delta: damping in 1/s (>= 0).
        mu: Coulomb friction per unit mass in unit/s^2 (>= 0; default 0: none), its sign of v smoothed by
            ``tanh(20 v)`` (v in unit/s).
    """

    n_states = 2

    def __init__(self, alpha: float, beta: float, delta: float, mu: float = 0.0) -> None:
        super().__init__()
        if not alpha > 0:
            raise ValueError(f"alpha must be positive; got alpha={alpha}.")
        for name, value in (("delta", delta), ("mu", mu)):
            if not value >= 0:
                raise ValueError(f"{name} must be >= 0; got {name}={value}.")
        self.alpha, self.beta, self.delta, self.mu = float(alpha), float(beta), float(delta), float(mu)

    def forward(self, x: Tensor) -> Tensor:
        """Field value, (N, 2) -> (N, 2)."""
        pos, vel = x[:, 0], x[:, 1]
        acc = -self.delta * vel - self.alpha * pos - self.beta * pos ** 3
        if self.mu:
            acc = acc - self.mu * torch.tanh(20.0 * vel)
        return torch.stack((vel, acc), dim=1)

    def jacobian(self, x: Tensor) -> Tensor:
        """State Jacobian, (N, 2) -> (N, 2, 2)."""
        jac = x.new_zeros(x.shape[0], 2, 2)
        jac[:, 0, 1] = 1.0
        jac[:, 1, 0] = -self.alpha - 3.0 * self.beta * x[:, 0] ** 2
        jac[:, 1, 1] = -self.delta
        if self.mu:
            jac[:, 1, 1] -= 20.0 * self.mu / torch.cosh(20.0 * x[:, 1]) ** 2
        return jac


class DuffingOscillator(System):
    """A lightly damped hardening Duffing oscillator, re-excited to random amplitudes.

    Case A: the known model is the true field (nothing to learn). Case B: it lacks the cubic
    term. The defaults resonate at ``frequency = 1000 / 9`` Hz, 9 samples per period at the
    trainers' default 1 kHz, with a damping ratio of 5e-4 (an amplitude decays to about a third
    over the 2.5-5 s between re-excitations) and a cubic term half the linear one at unit
    amplitude; each re-excitation sets an amplitude in [0.5, 1] at a uniform phase.

    Args:
        frequency: the linear natural frequency in Hz (> 0).
        damping_ratio: zeta (>= 0).
        hardening: ``beta / alpha``, the cubic term's share at unit amplitude.
        amplitude: (low, high) range of the re-excitation amplitude, 0 < low <= high.
        reexcite_interval: (low, high) seconds between re-excitations.
    """

    state_names = ("x", "v")
    cases = ("A", "B")

    def __init__(self, frequency: float = 1000.0 / 9.0, damping_ratio: float = 5e-4, hardening: float = 0.5,
                 amplitude: tuple[float, float] = (0.5, 1.0),
                 reexcite_interval: tuple[float, float] = (2.5, 5.0)) -> None:
        if not (frequency > 0 and damping_ratio >= 0 and 0 < amplitude[0] <= amplitude[1]
                and 0 < reexcite_interval[0] <= reexcite_interval[1]):
            raise ValueError(f"need frequency > 0, damping_ratio >= 0, 0 < amplitude low <= high and 0 < "
                             f"reexcite_interval low <= high; got {frequency}, {damping_ratio}, {amplitude}, "
                             f"{reexcite_interval}.")
        self.frequency, self.damping_ratio, self.hardening = float(frequency), float(damping_ratio), float(hardening)
        self.amplitude = (float(amplitude[0]), float(amplitude[1]))
        self.reexcite_interval = (float(reexcite_interval[0]), float(reexcite_interval[1]))
        self.omega0 = 2.0 * math.pi * self.frequency
        self.alpha = self.omega0 ** 2
        self.beta = self.hardening * self.alpha
        self.delta = 2.0 * self.damping_ratio * self.omega0

    def init_args(self) -> dict:
        """Constructor arguments of this plant."""
        return {"frequency": self.frequency, "damping_ratio": self.damping_ratio, "hardening": self.hardening,
                "amplitude": list(self.amplitude), "reexcite_interval": list(self.reexcite_interval)}

    def true_field(self) -> DuffingField:
        """The true oscillator."""
        return DuffingField(self.alpha, self.beta, self.delta)

    def build_known_field(self, case: str) -> DuffingField:
        """Case A: exact; Case B: without the cubic term."""
        return DuffingField(self.alpha, self.beta if case == "A" else 0.0, self.delta)

    def damping_terms(self, case: str) -> tuple[tuple[int, int, float], ...]:
        """No damping is missing from either case: the v-channel residual's damping should be 0."""
        self.check_case(case)
        return ((1, 1, 0.0),)

    def initial_state(self) -> np.ndarray:
        """Rest at the largest amplitude, shape (2,)."""
        return np.array([self.amplitude[1], 0.0])

    def reexcite(self, rng: np.random.Generator) -> np.ndarray:
        """A random amplitude and phase of the linear oscillation (class doc)."""
        amp, phase = rng.uniform(*self.amplitude), rng.uniform(0.0, 2.0 * math.pi)
        return np.array([amp * math.cos(phase), -amp * self.omega0 * math.sin(phase)])

    def evaluation_grid(self) -> Tensor:
        """41 x 41 states over the largest amplitude's box, (1681, 2)."""
        a = self.amplitude[1]
        return torch.cartesian_prod(torch.linspace(-a, a, 41, dtype=torch.float64),
                                    torch.linspace(-1.2 * a * self.omega0, 1.2 * a * self.omega0, 41,
                                                   dtype=torch.float64))

    def visited_region(self, x: Tensor) -> Tensor:
        """States inside the largest re-excitation's energy level, (G, 2) -> (G,)."""
        a = self.amplitude[1]
        energy = 0.5 * x[:, 1] ** 2 + 0.5 * self.alpha * x[:, 0] ** 2 + 0.25 * self.beta * x[:, 0] ** 4
        return energy <= 0.5 * self.alpha * a * a + 0.25 * self.beta * a ** 4

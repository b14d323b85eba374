"""A linear oscillator driven by an analogue input: what an input hold costs (`mhe.models.hold`).

``p'' + 2 zeta omega p' + omega^2 p = g u(t)``, states ``x = (p, v)``, the position measured.
`OscillatorSimulation` drives it with a multisine ``u(t)`` that is a function of continuous time
(an analogue signal generator: the input between two samples is neither held nor linear) and
records it at ``samples_per_period`` samples per natural period with Gaussian measurement noise;
the plant is integrated finely (`mhe.data.simulate.simulate_plant`). A model that holds the sampled
input constant over each step (zero-order hold) shifts it by half a sample; a first-order hold
follows it to second order in the sample time. `oscillator_problem` identifies it with a chosen hold.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import SimpleNamespace

import torch
from torch import Tensor

from ..identification import ArrivalCost, IdentificationProblem
from ..estimator.estimator import MHESettings
from ..models.bounds import Bound, BoundedParameters
from ..models.model import PhysicsField
from ..data.recording import RecordingSource
from ..data.recording import Recording
from ..data.simulate import simulate_plant

__all__ = ["LinearOscillator", "OscillatorSimulation", "multisine", "oscillator_problem"]


class LinearOscillator(PhysicsField):
    """``p' = v``, ``v' = -omega^2 p - 2 zeta omega v + gain u``.

    Args:
        omega: natural frequency in rad/s (start or fixed value).
        zeta: damping ratio.
        gain: input gain (units of ``p`` per unit of ``u`` per s^2).
        identify: the parameters to identify, of ``omega``, ``zeta``, ``gain``.
        bounds: their bounds by name (default: ``omega`` and ``gain`` positive, ``zeta`` in (0, 2)).
    """

    state_names = ("p", "v")
    input_names = ("u",)

    def __init__(self, omega: float = 1.0, zeta: float = 0.1, gain: float = 1.0, identify: Sequence[str] = (),
                 bounds: Mapping[str, Bound] | None = None) -> None:
        default = {"omega": Bound(0.0), "zeta": Bound(0.0, 2.0), "gain": Bound(0.0)}
        chosen = {n: (bounds or {}).get(n, default[n]) for n in identify if n in default}
        super().__init__(BoundedParameters({"omega": omega, "zeta": zeta, "gain": gain}, chosen, tuple(identify)))

    def vector_field(self, x: Sequence, u: Sequence, p: Mapping[str, object], ops: SimpleNamespace) -> list:
        """The oscillator on components (see the class docstring)."""
        pos, vel = x
        return [vel, p["gain"] * u[0] - p["omega"] ** 2 * pos - 2.0 * p["zeta"] * p["omega"] * vel]


def multisine(max_hz: float, tones: int, seed: int, amplitude: float = 1.0):
    """``u(t) = amplitude * sum_i sin(2 pi f_i t + phi_i) / tones``, ``f_i`` evenly spread over ``(0, max_hz]``,
    random phases: a function of continuous time, times (K,) -> inputs (K, 1)."""
    gen = torch.Generator().manual_seed(seed)
    freq = max_hz * torch.arange(1, tones + 1, dtype=torch.float64) / tones
    phase = 2 * math.pi * torch.rand(tones, generator=gen, dtype=torch.float64)

    def signal(t: Tensor) -> Tensor:
        return amplitude * torch.sin(2 * math.pi * freq * t[:, None] + phase).sum(dim=1, keepdim=True) / tones

    return signal


class OscillatorSimulation(RecordingSource):
    """The oscillator at ``samples_per_period`` samples per natural period, driven by a `multisine`, y = p + noise.

    Args:
        steps: samples T.
        samples_per_period: samples per natural period ``2 pi / omega``.
        dt: sample time in seconds.
        zeta: true damping ratio.
        gain: true input gain.
        max_hz: the multisine's highest frequency, as a multiple of the natural frequency.
        tones: number of sinusoids.
        noise: standard deviation of the measurement noise (units of ``p``).
        seed: seed of the phases and the noise.
        substeps: RK4 steps per sample of the reference simulation.
    """

    def __init__(self, steps: int = 2000, samples_per_period: float = 9.0, dt: float = 0.01, zeta: float = 0.05,
                 gain: float | None = None, max_hz: float = 1.5, tones: int = 24, noise: float = 0.01,
                 seed: int = 0, substeps: int = 20) -> None:
        self.steps, self.samples_per_period, self.dt, self.zeta = steps, samples_per_period, dt, zeta
        self.omega = 2 * math.pi / (samples_per_period * dt)
        self.gain = self.omega ** 2 if gain is None else gain  # unit static gain by default
        self.max_hz, self.tones, self.noise, self.seed, self.substeps = max_hz, tones, noise, seed, substeps

    @property
    def truth(self) -> Mapping[str, float]:
        """The true ``omega``, ``zeta`` and ``gain``."""
        return {"omega": self.omega, "zeta": self.zeta, "gain": self.gain}

    def record(self) -> Recording:
        """Simulate from rest and add the measurement noise."""
        signal = multisine(self.max_hz * self.omega / (2 * math.pi), self.tones, self.seed)
        states, inputs = simulate_plant(LinearOscillator(self.omega, self.zeta, self.gain), (0.0, 0.0), signal,
                                        self.dt, self.steps, self.substeps)
        gen = torch.Generator().manual_seed(self.seed + 1)
        noise = self.noise * torch.randn(self.steps, 1, generator=gen, dtype=torch.float64)
        return Recording(states, inputs, states[:, :1] + noise, self.dt)


def oscillator_problem(hold: str, steps: int, noise: float, seed: int, max_hz: float = 1.5) -> IdentificationProblem:
    """The oscillator's identification problem with input hold ``hold`` (every hold sees the same recording).

    `LinearOscillator` started 10 % off in ``omega`` (above) and ``gain`` (below) and at ``zeta`` 0.08 (truth 0.05),
    all three identified; windows of 15 samples every 10 samples, the position measured.

    Args:
        hold: the model's input hold, ``"zoh"``, ``"foh"`` or ``"midpoint"`` (`mhe.models.hold`).
        steps: samples of the recording.
        noise: standard deviation of the position noise (also the MHE's measurement standard deviation).
        seed: the recording's seed (multisine phases and noise).
        max_hz: the multisine's highest frequency as a multiple of the natural frequency.
    """
    source = OscillatorSimulation(steps=steps, noise=noise, seed=seed, max_hz=max_hz)
    physics = LinearOscillator(1.1 * source.omega, 0.08, 0.9 * source.gain, identify=("omega", "zeta", "gain"))
    return IdentificationProblem(source, MHESettings(15, (0.5, 5.0), (noise,)), ArrivalCost((0.0, 0.0), (1.0, 50.0)),
                                 (0,), physics, stride=10, hold=hold)

"""The simulated test problem of Section 4.1: BayesRace ground truth, our simulator, partial outputs.

The true single-track model (`mhe.vehicle`) is driven by `mhe.simulate.vehicle_policy`
with process and measurement noise; only ``y = (vx, omega)`` is measured, ``vy`` is
hidden. `perturbed_values` gives the "about 50 % off" start of the identification and
`relative_errors` the metric of Table 1, ``|theta^_j - theta*_j| / |theta*_j|``.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .model import StateSpaceModel
from .simulate import Recording, simulate, vehicle_policy
from .vehicle import BAYESRACE_BOUNDS, BAYESRACE_TRUTH, IDENTIFIED, SingleTrackVehicle
from .windows import Windows, make_windows

__all__ = ["MEASURED", "RacingData", "racing_recording", "perturbed_values", "relative_errors"]

MEASURED = (0, 2)
"""Measured states: vx and omega (vy is unmeasured)."""


@dataclass(frozen=True)
class RacingData:
    """Settings of the simulated racing data.

    Attributes:
        steps: samples T of the recording (dt = 0.02 s).
        horizon: MHE horizon N of the windows.
        stride: samples between window starts.
        process_std: q of the simulator's process noise (m/s^2, m/s^2, rad/s^2).
        measurement_std: r of the measurement noise of (vx, omega) (m/s, rad/s).
        steer_amplitude: peak steering (rad).
        speed_range: range of the speed reference (m/s).
        seed: seed of excitation and noise.
    """

    steps: int = 2000
    horizon: int = 10
    stride: int = 10
    process_std: tuple[float, float, float] = (0.005, 0.005, 0.1)
    measurement_std: tuple[float, float] = (0.0005, 0.002)
    steer_amplitude: float = 0.45
    speed_range: tuple[float, float] = (0.8, 3.0)
    seed: int = 1

    def windows(self) -> Windows:
        """The windows of `racing_recording`."""
        rec = racing_recording(self)
        return make_windows(rec.inputs, rec.outputs, self.horizon, self.stride)


def racing_recording(data: RacingData) -> Recording:
    """Simulate the true racing model (BayesRace parameters) with the settings of ``data``."""
    truth = StateSpaceModel(SingleTrackVehicle(), dt=0.02, measured=MEASURED)
    policy = vehicle_policy(data.steps, 0.02, data.seed, steer_amplitude=data.steer_amplitude,
                            speed_range=tuple(data.speed_range))
    return simulate(truth, [1.5, 0.0, 0.0], policy, data.steps, data.process_std, data.measurement_std, data.seed)


def perturbed_values(factor: float = 0.5, seed: int = 0, identify: Sequence[str] = IDENTIFIED,
                     fixed: Mapping[str, float] | None = None, spread: float = 0.0) -> dict[str, float]:
    """Start values ``theta*_j (1 +- f_j)`` for the identified parameters.

    ``f_j`` is ``factor``, or drawn uniformly from ``factor +- spread``; the sign is
    drawn per parameter and, when that value leaves the bounds, the other sign is used
    (Deep Dynamics' ranges are [0.5, 2] x truth for several parameters, so exactly
    -50 % is on the bound there). Parameters not identified keep the truth unless
    ``fixed`` overrides them.

    Raises:
        ValueError: if neither sign keeps a parameter inside its bounds.
    """
    rng = np.random.default_rng(seed)
    out = dict(BAYESRACE_TRUTH)
    out.update(fixed or {})
    for name in identify:
        signs = (1.0, -1.0) if rng.random() < 0.5 else (-1.0, 1.0)
        f = factor + spread * (2.0 * rng.random() - 1.0)
        candidates = [BAYESRACE_TRUTH[name] * (1.0 + s * f) for s in signs]
        inside = [c for c in candidates if BAYESRACE_BOUNDS[name].contains(c)]
        if not inside:
            raise ValueError(f"{name}: neither {candidates} lies inside {BAYESRACE_BOUNDS[name]}; use a smaller factor.")
        out[name] = inside[0]
    return out


def relative_errors(values: Mapping[str, float], names: Sequence[str] = IDENTIFIED) -> dict[str, float]:
    """``|theta_j - theta*_j| / |theta*_j|`` for ``names`` (Table 1's metric)."""
    return {n: abs(float(values[n]) - BAYESRACE_TRUTH[n]) / abs(BAYESRACE_TRUTH[n]) for n in names}

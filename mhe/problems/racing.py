"""The simulated test problem of Section 4.1: BayesRace ground truth, our simulator, partial outputs.

`RacingSimulation` drives the true single-track model (`mhe.models.vehicle`) with
`mhe.data.simulate.vehicle_policy` under process and measurement noise; only ``y = (vx, omega)``
is measured (`MEASURED`), ``vy`` is hidden. It is the recording of the racing configs
(``configs/mhe_racing_*.yaml``). `perturbed_values` gives the "about 50 % off" starts of
the identification; the error metric of Table 1, ``|theta^_j - theta*_j| / |theta*_j|``, is
`mhe.identification.IdentificationProblem.relative_errors` with this truth. `neural_racing_problem` and
`neural_racing_estimator` are the neural-only models of the hypergradient timings (Sec. 4.2).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from ..estimator.estimator import MHESettings, MovingHorizonEstimator
from ..identification import ArrivalCost, IdentificationProblem, ResidualSettings
from ..models.model import StateSpaceModel
from ..models.vehicle import BAYESRACE_BOUNDS, BAYESRACE_TRUTH, IDENTIFIED, SingleTrackVehicle
from ..data.recording import RecordingSource
from ..data.recording import Recording
from ..data.simulate import simulate_closed_loop, vehicle_policy

__all__ = ["MEASURED", "DT", "RacingSimulation", "neural_racing_estimator", "neural_racing_problem", "perturbed_values",
           "start_values"]

MEASURED = (0, 2)
"""Measured states: vx and omega (vy is unmeasured)."""

DT = 0.02
"""Sample time of the simulated recording in seconds (50 Hz)."""

NEURAL_SCALES = ((2.0, 0.3, 3.0, 0.3, 1.0), (1.0, 1.0, 20.0))
"""Input scales (vx, vy, omega in m/s, m/s, rad/s; the two inputs) and output scales (the three rates) of the
neural-only racing model."""


class RacingSimulation(RecordingSource):
    """The true racing model (BayesRace parameters) driven by `vehicle_policy`, y = (vx, omega).

    Args:
        steps: samples T of the recording (dt = 0.02 s).
        process_std: q of the simulator's process noise (m/s^2, m/s^2, rad/s^2).
        measurement_std: r of the measurement noise of (vx, omega) (m/s, rad/s).
        steer_amplitude: peak steering (rad).
        speed_range: range of the speed reference (m/s).
        seed: seed of excitation and noise.
    """

    def __init__(self, steps: int = 2000, process_std: tuple[float, float, float] = (0.005, 0.005, 0.1),
                 measurement_std: tuple[float, float] = (0.0005, 0.002), steer_amplitude: float = 0.45,
                 speed_range: tuple[float, float] = (0.8, 3.0), seed: int = 1) -> None:
        self.steps, self.seed, self.steer_amplitude = steps, seed, steer_amplitude
        self.process_std, self.measurement_std = tuple(process_std), tuple(measurement_std)
        self.speed_range = tuple(speed_range)

    @property
    def truth(self) -> Mapping[str, float]:
        """The BayesRace ground truth."""
        return BAYESRACE_TRUTH

    def record(self) -> Recording:
        """Simulate ``steps`` samples from x0 = (1.5 m/s, 0, 0)."""
        truth = StateSpaceModel(SingleTrackVehicle(), dt=DT, measured=MEASURED)
        policy = vehicle_policy(self.steps, DT, self.seed, steer_amplitude=self.steer_amplitude,
                                speed_range=self.speed_range)
        return simulate_closed_loop(truth, [1.5, 0.0, 0.0], policy, self.steps, self.process_std,
                                    self.measurement_std, self.seed)


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


def start_values(mean_error: float, seed: int = 0, identify: Sequence[str] = IDENTIFIED,
                 fixed: Mapping[str, float] | None = None, spread: float = 0.3, margin: float = 0.05
                 ) -> dict[str, float]:
    """Seeded start values ``theta*_j (1 +- f_j)`` whose mean relative error is exactly ``mean_error``.

    Per parameter a sign (random, or the other one when it leaves the bounds sooner) and a raw
    ``f_j`` uniform in ``1 +- spread``; ``f_j = min(c f_raw_j, f_max_j)`` with ``f_max_j`` the
    largest error that keeps the value ``margin`` (relative to the distance) inside the bounds,
    and ``c`` found by bisection so that the mean of ``f_j`` is ``mean_error`` (e.g. 0.6795, the
    start of the paper's Table 1). Parameters not identified keep the truth unless ``fixed``
    overrides them.

    Raises:
        ValueError: if ``mean_error`` cannot be reached inside the bounds.
    """
    rng = np.random.default_rng(seed)
    out = dict(BAYESRACE_TRUTH)
    out.update(fixed or {})
    raw, caps, signs = [], [], []
    for name in identify:
        theta, bound = BAYESRACE_TRUTH[name], BAYESRACE_BOUNDS[name]
        order = (1.0, -1.0) if rng.random() < 0.5 else (-1.0, 1.0)
        raw.append(1.0 + spread * (2.0 * rng.random() - 1.0))

        def cap(s: float) -> float:
            slope = s * theta  # value = theta + slope * f
            edge = bound.upper if slope > 0 else bound.lower
            return float("inf") if edge is None else (1.0 - margin) * (edge - theta) / slope

        best = order[0] if cap(order[0]) >= min(cap(order[1]), mean_error * raw[-1]) else order[1]
        signs.append(best)
        caps.append(cap(best))
    raw_a, caps_a = np.array(raw), np.array(caps)
    if np.isfinite(caps_a).all() and caps_a.mean() < mean_error:
        raise ValueError(f"A mean relative error of {mean_error} does not fit inside the bounds (at most "
                         f"{caps_a.mean():.4f}); lower it or the margin.")
    lo, hi = 0.0, 1.0
    while np.minimum(hi * raw_a, caps_a).mean() < mean_error:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if np.minimum(mid * raw_a, caps_a).mean() < mean_error else (lo, mid)
    f = np.minimum(hi * raw_a, caps_a)
    for name, s, fj in zip(identify, signs, f):
        out[name] = BAYESRACE_TRUTH[name] * (1.0 + s * float(fj))
    return out


def neural_racing_problem(width: int, recording: Recording, horizon: int, windows: int) -> IdentificationProblem:
    """The neural-only racing problem ``f_c = N(x, u) + w``: a tanh MLP of two hidden layers of ``width``, no physics.

    Args:
        width: hidden width of the network.
        recording: the data (a `RacingSimulation` recording).
        horizon: the MHE horizon N.
        windows: the number of windows M (every 50 samples).

    Returns:
        The problem, with the simulator's noise levels and the arrival cost of the racing configs.
    """
    sim = RacingSimulation()
    return IdentificationProblem(recording, MHESettings(horizon, sim.process_std, sim.measurement_std),
                                 ArrivalCost((1.5, 0.0, 0.0), (1.0, 0.3, 3.0)), MEASURED,
                                 residual=ResidualSettings(width, *NEURAL_SCALES, seed=0), stride=50,
                                 windows=windows, n_x=3)


def neural_racing_estimator(problem: IdentificationProblem, seed: int = 1) -> MovingHorizonEstimator:
    """The problem's estimator with a small random last layer (std ``0.5 / sqrt(width)``, seeded), so that every
    weight has a non-trivial gradient (a new network's last layer is zero)."""
    est = problem.estimator()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        w_last = est.model.residual.mlp.ordered_parameters()[-2]
        scale = 0.5 / problem.residual.width ** 0.5
        w_last.copy_(torch.randn(w_last.shape, generator=gen, dtype=torch.float64) * scale)
    return est

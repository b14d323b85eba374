"""PEM–MHE on a jet-matching stream of a pendulum plant: physics-only or gray-box, from theta or (theta, omega).

The problem is `mhe.problems.pendulum.pendulum_problem` on the data module's stream (the settings and
why they were chosen are in `mhe.problems.pendulum`); the outer loop is Gauss–Newton
(Levenberg–Marquardt) with its stopping tests (`mhe.OuterSettings`). Physics-only: the known
model with an identified damping; gray-box: the known model plus the 2-16-16 tanh residual
on the omega channel through L4CasADi (theta' = omega is exact; a residual on the theta
channel is confounded with the unmeasured omega: with it, gray-box PEM-MHE from theta drifted
to field errors of 0.24-0.37, worse than the known model alone), started either as `mhe`
starts it (last layer zero, hidden layers from the run seed) with the jet run's calibration
scales, or from the jet-matching run's trained field (`mhe.models.trained_field`).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from mhe import OuterSettings, PEMIdentifier, ResidualSettings, SolverSettings
from mhe.problems.pendulum import pendulum_problem
from torch_ude.training.data import StreamDataModule

__all__ = ["PEM_MODELS", "PEMSettings", "pem_fit", "reach_ratio"]

#: Physics-only (an identified damping) or gray-box (a neural residual).
PEM_MODELS = ("physics", "gray")


@dataclass(frozen=True)
class PEMSettings:
    """One PEM–MHE variant; the problem's settings are `mhe.problems.pendulum.pendulum_problem`'s defaults.

    Attributes:
        variant: ``"physics"`` or ``"gray"``.
        measured: measured states, ``(0,)`` theta only or ``(0, 1)``.
        start: gray-box only: the run folder of a trained field to start the residual from,
            or None for the cold start; ``scales`` is then ignored.
        scales: gray-box cold start: ``(in_scale, out_scale)`` of the residual, 2 numbers each
            (the jet run's calibration), or None for ones.
        max_steps: cap of outer iterations.
        build_dir: L4CasADi's build folder.
    """

    variant: str = "physics"
    measured: tuple[int, ...] = (0,)
    start: str | None = None
    scales: tuple[tuple[float, ...], tuple[float, ...]] | None = None
    max_steps: int = 30
    build_dir: str = "build/l4casadi/peer_pem"

    def __post_init__(self) -> None:
        if self.variant not in PEM_MODELS:
            raise ValueError(f"variant must be one of {list(PEM_MODELS)}; got {self.variant!r}.")
        if self.start is not None and self.variant != "gray":
            raise ValueError("start (a trained field) needs the gray-box variant; got variant 'physics'.")


def pem_fit(dm: StreamDataModule, settings: PEMSettings) -> tuple[Callable[[Tensor], Tensor], dict]:
    """Identify the pendulum from the data module's stream by PEM–MHE.

    Args:
        dm: the jet-matching run's data module (plant, case, noise, seed, duration, rate).
        settings: the variant and its settings.

    Returns:
        ``(field, info)``: the identified continuous-time field ``(N, 2) -> (N, 2)`` (float64,
        no process noise) and ``wall_s`` (the outer loop, the L4CasADi build included),
        ``steps``, ``J``, ``stop``, ``failed_solves``, ``windows`` and ``history`` (per
        iteration: seconds since the start and J).
    """
    s = settings
    residual = None
    if s.variant == "gray":
        in_scale, out_scale = (None, None) if s.scales is None or s.start else s.scales
        residual = ResidualSettings(16, in_scale, out_scale, seed=0 if s.start else dm.seed, outputs=(1,),
                                    start=s.start)
    problem = pendulum_problem(dm.system, dm.case, dm.noise, dm.seed, dm.duration, fs=dm.fs, substeps=dm.substeps,
                               measured=s.measured, residual=residual)
    windows = len(problem.windows)
    history: list[tuple[float, float]] = []
    t0 = time.perf_counter()
    with PEMIdentifier(problem, settings.max_steps, OuterSettings(optimizer="gauss_newton"),
                       SolverSettings(build_dir=str(Path(settings.build_dir) / f"seed{dm.seed}"))) as pem:
        result = pem.fit(lambda i, step: history.append((time.perf_counter() - t0, float(step.loss))))
        model = pem.estimator.model
    wall = time.perf_counter() - t0

    def field(x: Tensor) -> Tensor:
        with torch.no_grad():
            x = x.to(torch.float64)
            return model.field(x, x.new_zeros(x.shape[0], 0), torch.zeros_like(x))

    info = {"wall_s": wall, "steps": len(history), "J": history[-1][1] if history else None,
            "stop": result.stop_reason, "failed_solves": result.counters.failed + result.counters.failed_trials,
            "windows": windows, "history": history}
    return field, info


def reach_ratio(warm: dict, cold: dict, tolerance: float = 0.01) -> float | None:
    """Time the warm start needs to reach the cold start's final J (within ``tolerance``), over the cold run's time.

    Args:
        warm, cold: run records of `pem_fit` (``history`` of (seconds, J), ``wall_s``).
        tolerance: relative slack on the cold run's final J.

    Returns:
        The ratio, or None if the warm run never reached that J.
    """
    target = cold["J"] * (1.0 + tolerance)
    reached = [t for t, j in warm["history"] if j <= target]
    return reached[0] / cold["wall_s"] if reached else None

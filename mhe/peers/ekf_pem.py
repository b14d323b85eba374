"""EKF->PEM, the two-stage baseline of the paper's Tables 1 and 2 (Section 4.3; Tedrake, Ch. 18), as one pipeline.

Stage one runs the extended Kalman filter of the problem's model at its start values over the problem's recording
(`mhe.peers.ekf.ExtendedKalmanFilter`; the filter's noise model from the problem's MHE weights and its prior from
the arrival-cost start: `ekf_settings`). Stage two takes the filtered states ``x^_{k|k}`` as exact and fits the
identified parameters to them by the one-step prediction error (`mhe.peers.state_pem.fit_on_states`, from the
given starts). The identified values are moved ``1e-6`` of their range inside their bounds
(`mhe.models.bounds.clip_inside`), so that a model (and its MHE, to score them) can be built from them. The
filter's own one-step error (`ekf_one_step_error`, its squared innovations) scores a model without an MHE.
"""
from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..identification import IdentificationProblem
from ..models.bounds import clip_inside
from .ekf import EKFResult, EKFSettings, ExtendedKalmanFilter
from .state_pem import StateFit, fit_on_states

__all__ = ["EKFPEMResult", "ekf_one_step_error", "ekf_pem", "ekf_settings", "run_ekf"]


@dataclass(frozen=True)
class EKFPEMResult:
    """The result of `ekf_pem`.

    Attributes:
        values: all physical parameters by name (physical units): the fitted ones moved inside their bounds, the
            others at the problem's start values.
        fit: the one-step fit on the filtered states (its raw values, cost, starts, parameters at a bound).
        ekf: the filter's result (filtered states (T, n_x), innovations, wall time).
        wall_s: the wall time of both stages in seconds (a filter run before `ekf_pem` included).
        hidden_rmse: the RMSE of the filtered unmeasured states against the logged ones (units of those states),
            or None for a recording without logged states.
    """

    values: dict[str, float]
    fit: StateFit
    ekf: EKFResult
    wall_s: float
    hidden_rmse: float | None


def ekf_settings(problem: IdentificationProblem) -> EKFSettings:
    """The filter's noise model from ``problem``'s MHE weights (q, r), its prior from the arrival-cost start."""
    return EKFSettings(problem.mhe.process_std, problem.mhe.measurement_std, problem.arrival.mean,
                       problem.arrival.std)


def run_ekf(problem: IdentificationProblem, build: str | Path) -> EKFResult:
    """The EKF (`ekf_settings`) with ``problem``'s model at its start values over its recording.

    Args:
        problem: the model, weights and recording.
        build: the build folder of the filter's CasADi functions.

    Returns:
        The filtered states ``x^_{k|k}`` (T, n_x), innovations and wall time.
    """
    return ExtendedKalmanFilter(problem.model(), ekf_settings(problem), build).run(problem.recording)


def ekf_one_step_error(problem: IdentificationProblem, build: str | Path) -> float:
    """The EKF's one-step prediction error with ``problem``'s model at its start values on its recording.

    Args:
        problem: the model, weights and recording (`run_ekf`).
        build: the build folder of the filter's CasADi functions.

    Returns:
        The mean over samples (after the first, whose innovation is the prior's) and outputs of the squared
        innovations ``y~_k - h(x^_{k|k-1})``, output units squared.
    """
    return float((run_ekf(problem, build).innovations[1:] ** 2).mean())


def ekf_pem(problem: IdentificationProblem, build: str | Path, fit_starts: Sequence[Mapping[str, float]] | None = None,
            filtered: EKFResult | None = None) -> EKFPEMResult:
    """EKF->PEM from ``problem``'s start values: the EKF over its recording, then the fit on the frozen estimates.

    Args:
        problem: the model at its start values (the filter's model), weights, bounds and recording.
        build: the build folder of the filter.
        fit_starts: the starts of the fit (parameter values by name; `mhe.peers.state_pem.jittered_starts` draws
            several); None: the start values alone.
        filtered: the filter's result on ``problem``, already run (`run_ekf`); None: run it here.

    Returns:
        The identified values and both stages' results.
    """
    t0 = time.perf_counter()
    model, rec, start = problem.model(), problem.recording, problem.start_values()
    est = run_ekf(problem, build) if filtered is None else filtered
    starts = [start] if fit_starts is None else list(fit_starts)
    fit = fit_on_states(model, est.states, rec.inputs.numpy(), problem.mhe.process_std, starts, rec.breaks)
    wall = time.perf_counter() - t0 + (0.0 if filtered is None else est.wall_s)
    hidden = [j for j in range(problem.n_x) if j not in problem.measured]
    rmse = float(np.sqrt(((est.states[:, hidden] - rec.states.numpy()[:, hidden]) ** 2).mean())) \
        if rec.states.shape[1] else None
    return EKFPEMResult(clip_inside({**start, **fit.values}, problem.physics.params.bounds), fit, est, wall, rmse)

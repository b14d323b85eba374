"""The residual check of a gray-box run: a model is never worse than the physics it could fall back to, on data the
fit did not see.

A gray-box PEM-MHE run trains known physics and a neural residual together (`mhe.models.model.NeuralResidual`).
At its end (`mhe.pem.finish`, both front-ends) `check_residual` scores the trained model, its physics alone (the
same trained physical and output-map parameters and arrival cost, the residual removed) and the physics the run
started from (every parameter at the problem's start, the residual removed) by the run's own criterion, the
one-step prediction error of Eq. (9) (`mhe.scoring.one_step_error`: each window's MHE solved as ``torch-ude validate``
solves it, `mhe.estimator.solver.lowest_cost_solve`, then the mean over windows and outputs of ``r^2``); where the
residual does not predict better than both, the run's model becomes the better physics. Why the start: trained
beside a residual the physics drifts and the residual makes up for it on the fit's data (measured on the two-tank
process and BayesRace, RESULTS.md), so a gray-box started from a physics-only fit must not end worse than that fit.
A gray-box run has no other criterion: the free-run refinement of ``outer.criterion: simulation`` refuses a neural
residual (`mhe.outer.free_run.refine_output_error`).

Which data: the last ``residual.check_share`` (default 0.2) of the training recording's samples, held back from
the PEM windows (`mhe.identification.IdentificationProblem.held_out_windows`; no window of the fit reads an
output of the tail). Not the fit's own windows: PEM lowers exactly this criterion on them, so the hybrid would
pass there whenever its extra freedom fits anything (noise included), and the check would reject nothing it
needs to. Not a validation recording: the check decides which model the run exports, so the data a user scores
the run on (another track, another seed) must stay unseen, and a run needs no second recording. The chronological
tail is the part of one recording most like new driving: it comes after everything the fit saw, and on a drifting
or growing operating range (a car speeding up over a session, a plant heating up) it leaves the fit's envelope
first. The price is a fit on 80 % of the recording; ``residual.check: false`` trains on all of it.

Removing the residual zeroes its last layer (`residual_removed`): the network's output is then exactly zero with
or without its trust envelope, on the torch side and through L4CasADi alike, so the physics alone is scored by
the same NLP with the same solver. A rejected run keeps the zeroed residual (`remove_residual`), so the
checkpoint ``torch-ude score`` reads holds the physics alone, and exports the model without it
(`without_residual`: ``field.json`` has no residual; `mhe.training.outputs.write_pem_outputs`).
"""
from __future__ import annotations

import copy
import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from ..data.recording import Recording
from ..data.windows import Windows
from ..estimator.estimator import MovingHorizonEstimator
from ..estimator.solver import WindowSolver, lowest_cost_solve
from ..models.model import NeuralResidual, StateSpaceModel
from .free_run import estimate_initial_states

__all__ = ["CHECK_PASSES", "check_residual", "free_run_error", "remove_residual", "residual_removed", "window_errors",
           "without_residual"]

log = logging.getLogger(__name__)

CHECK_PASSES = 3
"""Passes of propagated starts of the check's solves (``torch-ude validate``'s default ``validation_passes``)."""


def window_errors(solver: WindowSolver, windows: Windows, starts: int, passes: int = 0) -> tuple[Tensor, Tensor]:
    """The one-step prediction residuals of Eq. (9) at the solver's estimator's current parameters.

    Each window's MHE is solved from ``starts`` cold starts and up to ``passes`` passes of propagated starts, the
    lowest MHE cost kept (`mhe.estimator.solver.lowest_cost_solve`).

    Args:
        solver: the window solver (its estimator's current ``alpha``).
        windows: the M windows (of one recording when ``passes > 0``).
        starts: cold starts per window, >= 1.
        passes: the most passes of propagated starts, >= 0.

    Returns:
        ``r = h(x^_N, u~_N) - y~_N`` (M, n_y), output units, and which windows solved (M,) bool (``r`` of a failed
        window is not meaningful).
    """
    best = lowest_cost_solve(solver, windows, starts, passes=passes)
    with torch.no_grad():
        r = solver.estimator.prediction_error(best.point.stages(), windows)
    return r, best.ok


def free_run_error(estimator: MovingHorizonEstimator, recording: Recording) -> float:
    """The free-run error of the estimator's model on ``recording``: each stretch simulated from the initial state
    that fits it best, the parameters fixed (`mhe.outer.free_run.estimate_initial_states`), then the mean over the
    outputs of the squared RMSE (output units squared; NaN where the run diverged), as
    `mhe.scoring.one_step_error` averages."""
    _, rmse = estimate_initial_states(estimator, recording)
    return float((rmse ** 2).mean())


def _no_worse(a: float, b: float) -> bool:
    """``a <= b`` with NaN as the worst score (a candidate that diverged or never solved)."""
    return math.isnan(b) or (not math.isnan(a) and a <= b)


def _last_layer(model: StateSpaceModel) -> tuple[Tensor, Tensor]:
    residual: NeuralResidual | None = model.residual
    if residual is None:
        raise ValueError("The residual check compares a model with its physics alone; this model has no neural "
                         "residual.")
    assert not residual.mlp.linear, "a NeuralResidual's MLP has no linear term"
    return residual.mlp.layers[-1]


def remove_residual(model: StateSpaceModel) -> None:
    """Zero the residual's last layer in place: the model computes its physics alone (``N = 0`` exactly, faded or
    not), its structure and its compiled NLPs unchanged.

    Raises:
        ValueError: for a model without a neural residual.
    """
    with torch.no_grad():
        for p in _last_layer(model):
            p.zero_()


@contextmanager
def residual_removed(model: StateSpaceModel) -> Iterator[StateSpaceModel]:
    """Within the block ``model`` is its physics alone (`remove_residual`); its weights come back after.

    Raises:
        ValueError: for a model without a neural residual.
    """
    saved = [p.detach().clone() for p in _last_layer(model)]
    remove_residual(model)
    try:
        yield model
    finally:
        with torch.no_grad():
            for p, v in zip(_last_layer(model), saved):
                p.copy_(v)


def without_residual(model: StateSpaceModel) -> StateSpaceModel:
    """A physics-only copy of a gray-box model: its physics, output map, sample time, measured states,
    discretization and hold, no residual, reading the physics' inputs (an input history dropped)."""
    physics = model.physics
    if physics is None:
        raise ValueError("A model without physics has no physics alone to keep; the residual check is for gray-box "
                         "models.")
    return StateSpaceModel(copy.deepcopy(physics), None, dt=model.dt, measured=model.measured, n_x=model.n_x,
                           n_u=physics.n_u, discretization=model.tableau.name, hold=model.hold.name,
                           output=copy.deepcopy(model.output_map))


def check_residual(solver: WindowSolver, windows: Windows, starts: int = 1, passes: int = CHECK_PASSES,
                   keep_rejected: bool = False, on: str = "the held-out windows", start: Tensor | None = None,
                   tail: Recording | None = None) -> dict:
    """Score the solver's gray-box model and the physics it could fall back to on held-out windows; keep the residual
    only where it predicts better than each (module docstring).

    The candidates, each scored by the one-step error (`mhe.scoring.one_step_error`) on the windows where all of them
    solved: the trained model (``hybrid``), its trained physics alone (``physics``: the residual removed) and, given
    ``start``, the physics the run started from (``start_physics``: every parameter at ``start``, the residual
    removed; a gray-box started from a physics-only fit, as docs/mhe.md advises, falls back to that fit). Given
    ``tail``, each is also scored by free run over it (`free_run_error`). The residual is rejected unless the
    hybrid's error is at most every physics candidate's, by one step and, given ``tail``, by free run; a rejected
    residual is removed in place (`remove_residual`) and the model's parameters become the better physics
    candidate's (by free run where it was scored: the error a free-running model is judged by; else by one step),
    unless ``keep_rejected``, with a warning either way.

    Args:
        solver: the window solver of the trained estimator (built with the residual as it is now: its trust
            envelope included).
        windows: the held-out windows (`mhe.identification.IdentificationProblem.held_out_windows`).
        starts: cold starts per window, >= 1.
        passes: the most passes of propagated starts, >= 0.
        keep_rejected: keep the residual even when it is rejected.
        on: what the windows are, for the report and the warning.
        start: the estimator's parameters at the run's start, flat in ``estimator.parameters()`` order (None: no
            start candidate).
        tail: the held-out samples as a recording (`mhe.identification.IdentificationProblem.held_out_recording`)
            for the free-run scores (None: one step only).

    Returns:
        The report of ``metrics.json``'s ``"residual_check"``: ``metric`` (``"one_step_mse"``), ``hybrid``,
        ``physics`` and ``start_physics`` (mean ``r^2``, NaN when no window solved for all; ``start_physics`` None
        without ``start``), ``on``, ``windows`` (scored, of ``held_out``), ``rejected``, ``kept`` (the model still
        has its residual), ``model`` (what the run's model is now: ``"hybrid"``, ``"physics"`` or
        ``"start_physics"``) and ``free_run`` (None without ``tail``, else ``metric`` ``"free_run_mse"`` and the
        three candidates' `free_run_error`).

    Raises:
        ValueError: for a model without a neural residual, or a ``start`` of another length than the parameters.
    """
    estimator = solver.estimator
    model = estimator.model
    trained = parameters_to_vector(estimator.parameters()).detach().clone()
    if start is not None and start.shape != trained.shape:
        raise ValueError(f"The run's start has {start.numel()} parameters, the estimator {trained.numel()}; give the "
                         f"start of this problem's estimator.")
    r_hybrid, ok = window_errors(solver, windows, starts, passes)
    free = {} if tail is None else {"hybrid": free_run_error(estimator, tail)}
    errors = {}
    with residual_removed(model):
        errors["physics"] = window_errors(solver, windows, starts, passes)
        if tail is not None:
            free["physics"] = free_run_error(estimator, tail)
    if start is not None:
        _set_parameters(estimator, start)
        with residual_removed(model):
            errors["start_physics"] = window_errors(solver, windows, starts, passes)
            if tail is not None:
                free["start_physics"] = free_run_error(estimator, tail)
        _set_parameters(estimator, trained)
    for _, ok_other in errors.values():
        ok = ok & ok_other
    def mse(r: Tensor) -> float:
        return float((r[ok] ** 2).mean()) if bool(ok.any()) else math.nan
    hybrid = mse(r_hybrid)
    scores = {name: mse(r) for name, (r, _) in errors.items()}
    worse = [(what, got[name]) for what, got, own in (("one-step", scores, hybrid),
                                                      ("free-run", free, free.get("hybrid")))
             for name in got if name != "hybrid" and not _no_worse(own, got[name])]
    rank = free if free else scores
    best = min((n for n in rank if n != "hybrid"), key=lambda name: (math.isnan(rank[name]), rank[name]))
    rejected = bool(worse)
    kept = not rejected or keep_rejected
    report = {"metric": "one_step_mse", "hybrid": hybrid, "physics": scores["physics"],
              "start_physics": scores.get("start_physics"), "on": on, "windows": int(ok.sum()),
              "held_out": len(windows), "rejected": rejected, "kept": kept, "model": "hybrid" if kept else best,
              "free_run": {"metric": "free_run_mse", **free} if free else None}
    if rejected:
        alone = "its physics alone" if best == "physics" else "the physics it started from"
        what = worse[0][0]
        own = hybrid if what == "one-step" else free["hybrid"]
        log.warning("residual rejected: on %s the gray-box model predicts worse than a physics model (%s error %.4g "
                    "against %.4g, %d windows); %s", on, what, own, worse[0][1], report["windows"],
                    "the residual is kept (residual.keep_rejected)." if keep_rejected else
                    f"the run's model is {alone} (set residual.keep_rejected: true to keep the residual).")
        if not keep_rejected:
            if best == "start_physics":
                _set_parameters(estimator, start)
            remove_residual(model)
    return report


def _set_parameters(estimator: torch.nn.Module, alpha: Tensor) -> None:
    with torch.no_grad():
        vector_to_parameters(alpha, estimator.parameters())

"""The residual check of a gray-box run: a model is never worse than its own physics on data the fit did not see.

A gray-box PEM-MHE run trains known physics and a neural residual together (`mhe.models.model.NeuralResidual`).
At its end (`mhe.pem.finish`, both front-ends) `check_residual` scores the trained model and its physics alone (the
same trained physical and output-map parameters and arrival cost, the residual removed) by the run's own criterion,
the one-step prediction error of Eq. (9) (`one_step_error`: each window's MHE solved as ``torch-ude validate`` solves
it, `mhe.estimator.solver.lowest_cost_solve`, then the mean over windows and outputs of ``r^2``); where the
residual does not predict better, the run's model becomes its physics alone. A gray-box run has no other
criterion: the free-run refinement of ``outer.criterion: simulation`` refuses a neural residual
(`mhe.outer.free_run.refine_output_error`).

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

from ..data.windows import Windows
from ..estimator.solver import WindowSolver, lowest_cost_solve
from ..models.model import NeuralResidual, StateSpaceModel

__all__ = ["CHECK_PASSES", "check_residual", "one_step_error", "remove_residual", "residual_removed",
           "window_errors", "without_residual"]

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


def one_step_error(solver: WindowSolver, windows: Windows, starts: int, passes: int = 0) -> dict[str, float | int]:
    """The one-step prediction error of Table 1 (Eq. 9): the mean of ``r^2`` over the windows that solved and the
    outputs (`window_errors`); ``torch-ude validate``'s ``val/one_step_mse``.

    Returns:
        ``mse`` (output units squared; NaN when no window solved), ``windows`` (M) and ``failed``.
    """
    r, ok = window_errors(solver, windows, starts, passes)
    return {"mse": float((r[ok] ** 2).mean()) if bool(ok.any()) else math.nan, "windows": len(windows),
            "failed": int((~ok).sum())}


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
                   keep_rejected: bool = False, on: str = "the held-out windows") -> dict:
    """Score the solver's gray-box model and its physics alone on held-out windows; remove the residual where it
    does not predict better (module docstring).

    Both are scored by the one-step error (`one_step_error`) on the windows where both solved. The residual is
    rejected unless the hybrid's error is at most the physics'; a rejected residual is removed from the model in
    place (`remove_residual`) unless ``keep_rejected``, with a warning either way.

    Args:
        solver: the window solver of the trained estimator (built with the residual as it is now: its trust
            envelope included).
        windows: the held-out windows (`mhe.identification.IdentificationProblem.held_out_windows`).
        starts: cold starts per window, >= 1.
        passes: the most passes of propagated starts, >= 0.
        keep_rejected: keep the residual even when it is rejected.
        on: what the windows are, for the report and the warning.

    Returns:
        The report of ``metrics.json``'s ``"residual_check"``: ``metric`` (``"one_step_mse"``), ``hybrid`` and
        ``physics`` (mean ``r^2``, NaN when no window solved for both), ``on``, ``windows`` (scored, of
        ``held_out``), ``rejected`` and ``kept`` (the model still has its residual).

    Raises:
        ValueError: for a model without a neural residual.
    """
    model = solver.estimator.model
    r_hybrid, ok_hybrid = window_errors(solver, windows, starts, passes)
    with residual_removed(model):
        r_physics, ok_physics = window_errors(solver, windows, starts, passes)
    ok = ok_hybrid & ok_physics
    hybrid, physics = ((float((r[ok] ** 2).mean()) if bool(ok.any()) else math.nan) for r in (r_hybrid, r_physics))
    rejected = not hybrid <= physics
    report = {"metric": "one_step_mse", "hybrid": hybrid, "physics": physics, "on": on, "windows": int(ok.sum()),
              "held_out": len(windows), "rejected": rejected, "kept": not rejected or keep_rejected}
    if rejected:
        log.warning("residual rejected: on %s the gray-box model predicts worse than its physics alone (one-step "
                    "error %.4g against %.4g, %d windows); %s", on, hybrid, physics, report["windows"],
                    "the residual is kept (residual.keep_rejected)." if keep_rejected else
                    "the run's model is its physics alone (set residual.keep_rejected: true to keep the residual).")
        if not keep_rejected:
            remove_residual(model)
    return report

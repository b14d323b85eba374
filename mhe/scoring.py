"""Scoring a model on a recording: the one-step prediction error of Table 1 (Eq. 9) and the open-loop error.

One scorer for every front-end: ``torch-ude validate`` (`mhe.training.PEMModule.validation_step`), the
benchmarks' Table 1 and Table 2 rows and a user scoring identified values on another recording. Each window's
MHE is solved at the parameters scored (`mhe.estimator.solver.lowest_cost_solve`: the lowest MHE cost of cold
starts, warm starts and passes of propagated starts), then

* the one-step prediction error (`one_step_error`, `solutions_error`): the mean over the windows that solved
  and the outputs of ``r^2``, ``r = h(x^_N, u~_N) - y~_N`` (Eq. 9), in the outputs' units squared;
* the multi-step error (`score_problem` with ``rollout_steps``): from each window's estimate ``x^_{N-1}`` (the
  last one that saw a measurement) the model runs open loop with the logged inputs (`rollouts`), and
  `open_loop_error` takes the mean over rollouts, steps and outputs of the squared output error against the logged
  outputs (`logged_after`).

Values identified on one recording are scored on another by `with_values` (the same problem on that recording
at those values, a trained arrival cost clipped into the box of that data); values trained on other windows of
the same recording are scored on a reference problem's windows by `on_windows_of`.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path

import torch
from torch import Tensor

from .data.windows import Windows
from .estimator.arrival import arrival_bounds
from .estimator.estimator import MovingHorizonEstimator
from .estimator.solver import Start, WindowSolutions, WindowSolver, lowest_cost_solve
from .identification import ArrivalCost, IdentificationProblem
from .models.bounds import BoundedParameters
from .models.model import StateSpaceModel

__all__ = ["logged_after", "on_windows_of", "one_step_error", "open_loop_error", "rollouts", "score_problem",
           "solutions_error", "with_residual", "with_values"]


def solutions_error(estimator: MovingHorizonEstimator, windows: Windows,
                    best: WindowSolutions) -> dict[str, float | int]:
    """The one-step prediction error (Eq. 9) of solved windows.

    Args:
        estimator: the estimator the windows were solved with (its current parameters).
        windows: the M windows.
        best: their MHE solutions (`mhe.estimator.solver.lowest_cost_solve`).

    Returns:
        ``mse``: the mean over the windows that solved and the outputs of ``r^2``, ``r = h(x^_N, u~_N) - y~_N``
        (output units squared; NaN when no window solved); ``max_abs``: the largest ``|r|`` (NaN likewise);
        ``windows``: M; ``failed``: the windows that did not solve.
    """
    r = estimator.prediction_error(best.point.stages(), windows)[best.ok].detach()
    return {"mse": float((r ** 2).mean()), "max_abs": float(r.abs().max()) if r.numel() else float("nan"),
            "windows": len(windows), "failed": best.n_failed}


def one_step_error(solver: WindowSolver, windows: Windows, starts: int, passes: int = 0,
                   warm: list[Start | None] | None = None) -> dict[str, float | int]:
    """The one-step prediction error of Table 1 (Eq. 9) at the solver's estimator's current parameters.

    Each window's MHE is solved from ``starts`` cold starts, the ``warm`` starts if given and up to ``passes``
    passes of propagated starts, the lowest MHE cost kept (`mhe.estimator.solver.lowest_cost_solve`); then
    `solutions_error`. ``torch-ude validate`` logs its ``mse`` as ``val/one_step_mse``.

    Args:
        solver: the window solver (its estimator's current ``alpha``).
        windows: the M windows (of one recording when ``passes > 0``).
        starts: cold starts per window, >= 1.
        passes: the most passes of propagated starts, >= 0.
        warm: per window a warm start or None, or None for no warm solve.

    Returns:
        `solutions_error`'s ``mse``, ``max_abs``, ``windows`` and ``failed``.
    """
    return solutions_error(solver.estimator, windows, lowest_cost_solve(solver, windows, starts, warm, passes))


def with_values(problem: IdentificationProblem, recording: object, physics: Mapping[str, float],
                arrival: tuple[list[float], list[float]] | None) -> IdentificationProblem:
    """``problem`` on another recording at other parameter values, to score values identified elsewhere.

    Args:
        problem: the problem the values belong to (its physics, identified names, bounds, windows and MHE settings
            stay; the physics' parameters become ``physics``).
        recording: the recording (or its source, `mhe.data.recording.RecordingSource`) to score on.
        physics: the physical parameter values, by name (every parameter of ``problem``'s physics).
        arrival: a trained arrival cost (mean (n_x,), std (n_x,), physical units), clipped into the box of
            ``recording``'s windows (`mhe.estimator.arrival.arrival_bounds`) when ``problem``'s arrival cost has a
            box; None: ``problem``'s own.

    Returns:
        The new problem.
    """
    params, phys = problem.physics.params, copy.deepcopy(problem.physics)
    phys.params = BoundedParameters(dict(physics), params.bounds, params.free_names)
    other = problem.replace(recording=recording, physics=phys)
    if arrival is None:
        return other
    a = problem.arrival
    if a.box is None:  # s_bar unbounded, sigma = softplus(rho): nothing to clip into
        return other.replace(arrival=ArrivalCost(tuple(arrival[0]), tuple(arrival[1]), None, a.margin, a.std_range))
    model = other.model()
    hidden = {j: box for j, box in enumerate(a.box) if box is not None}
    means, stds = arrival_bounds(other.windows, model, hidden, a.margin, a.std_range)
    mean = tuple(b.clip(v) for v, b in zip(arrival[0], means))
    std = tuple(b.clip(v) for v, b in zip(arrival[1], stds))
    return other.replace(arrival=ArrivalCost(mean, std, a.box, a.margin, a.std_range))


def with_residual(model: StateSpaceModel, residual: Mapping[str, Tensor] | None) -> StateSpaceModel:
    """``model`` with its neural residual's weights set to ``residual`` (a ``state_dict``; None: unchanged).

    Raises:
        ValueError: for weights given to a model without a residual.
    """
    if residual is not None:
        if model.residual is None:
            raise ValueError("residual weights were given for a problem without a neural residual; give None.")
        model.residual.load_state_dict(dict(residual))
    return model


def rollouts(problem: IdentificationProblem, x0: Tensor, first: Tensor, steps: int,
             residual: Mapping[str, Tensor] | None = None) -> Tensor:
    """Open-loop outputs of ``problem``'s model with the logged inputs.

    Args:
        problem: the model (at its start values) and the recording whose inputs drive it.
        x0: the states the rollouts start from, (M, n_x).
        first: the sample of each ``x0``, (M,) int; step ``k`` uses the input of sample ``first + k``.
        steps: steps per rollout, S.
        residual: the weights (``state_dict``) of ``problem``'s neural residual; None: its start weights.

    Returns:
        The outputs of samples ``first + 1 .. first + S``, (M, S, n_y).
    """
    model, u = with_residual(problem.model(), residual), problem.recording.inputs
    x, out = x0, []
    with torch.no_grad():
        for k in range(steps):
            x = model.step(x, u[first + k], torch.zeros_like(x))
            out.append(model.output(x))
    return torch.stack(out, dim=1)


def open_loop_error(pred: Tensor, meas: Tensor) -> dict[str, float | int | list[float]]:
    """The multi-step error of open-loop outputs ``pred`` against the logged ``meas``, both (M, S, n_y).

    Returns:
        ``mse`` (mean over rollouts, steps and outputs of the squared error, output units squared), ``steps`` S,
        ``rollouts`` M and ``rmse_end`` (the RMSE per output at the last step, (n_y,)).
    """
    err = pred - meas
    return {"mse": float((err ** 2).mean()), "steps": err.shape[1], "rollouts": err.shape[0],
            "rmse_end": (err[:, -1] ** 2).mean(dim=0).sqrt().tolist()}


def score_problem(problem: IdentificationProblem, build: str | Path, starts: int, rollout_steps: int = 0,
          warm: list[Start | None] | None = None, residual: Mapping[str, Tensor] | None = None,
          passes: int = 0) -> tuple[dict, dict[str, Tensor]]:
    """The one-step error and, for ``rollout_steps > 0``, the multi-step error of ``problem`` at its start values.

    The windows are solved once (``starts`` cold starts, the ``warm`` starts and up to ``passes`` passes of
    propagated starts, the lowest MHE cost kept: `one_step_error`'s solve, a new solver in ``build``);
    the rollouts start at each solved window's ``x^_{N-1}`` and run ``rollout_steps`` steps where the
    recording has them without a gap (``recording.breaks``).

    Args:
        problem: the model and windows scored (its start values and arrival cost).
        build: the build folder of the window solver.
        starts: cold starts per window, >= 1.
        rollout_steps: steps of each open-loop rollout, S; 0: none.
        warm: per window a warm start or None, or None for no warm solve.
        residual: the trained weights (``state_dict``) of ``problem``'s neural residual; None: its start weights.
        passes: the most passes of propagated starts, >= 0.

    Returns:
        The metrics (`solutions_error`'s, with ``multi_step``: `open_loop_error`'s when ``rollout_steps > 0``),
        and for plotting ``first``, the sample of each rollout's first prediction, (M',), and ``pred``, its
        outputs, (M', S, n_y) (empty without rollouts).
    """
    est = problem.estimator()
    with_residual(est.model, residual)
    with WindowSolver(est, build) as solver:
        best = lowest_cost_solve(solver, problem.windows, starts, warm, passes)
        out = solutions_error(est, problem.windows, best)
    if rollout_steps < 1:
        return out, {}
    windows, y = problem.windows, problem.recording.outputs
    first = windows.start + windows.horizon - 1  # the sample of x^_{N-1}
    keep = best.ok & (first + rollout_steps < len(y))
    for b in problem.recording.breaks:  # no rollout runs over a gap in the log
        keep &= (b <= first) | (b > first + rollout_steps)
    first = first[keep]
    pred = rollouts(problem, best.point.x[keep, -2].detach(), first, rollout_steps, residual)
    out["multi_step"] = open_loop_error(pred, logged_after(y, first, rollout_steps))
    return out, {"first": first + 1, "pred": pred}


def logged_after(outputs: Tensor, first: Tensor, steps: int) -> Tensor:
    """The logged outputs a rollout from each sample ``first`` predicts: samples ``first + 1 .. first + steps``.

    Args:
        outputs: the recording's outputs, (T, n_y).
        first: the sample each rollout starts from, (M,) int, with ``first + steps < T``.
        steps: steps per rollout, S.

    Returns:
        (M, S, n_y), to compare with the rollouts by `open_loop_error`.
    """
    return outputs[first[:, None] + 1 + torch.arange(steps)[None, :]]


def on_windows_of(problem: IdentificationProblem, reference: IdentificationProblem,
                  warm: list[Start | None]) -> tuple[IdentificationProblem, list[Start | None]]:
    """``problem`` on ``reference``'s windows (its stride and window limit) and the warm starts of those windows.

    A gray-box config may train on more windows (a smaller stride) than the physics-only config; every row
    is scored on the physics-only config's windows so the errors compare.

    Args:
        problem: the problem that trained (its model, recording and settings are kept).
        reference: the problem whose stride and window limit are scored.
        warm: one start per window of ``problem`` (None where it has none).

    Returns:
        The problem on the reference windows, and per scored window the start of the trained window with the
        same first sample, else None.
    """
    same = problem.replace(stride=reference.stride, windows=reference.limit)
    by_sample = {int(s): w for s, w in zip(problem.windows.start, warm)}
    return same, [by_sample.get(int(s)) for s in same.windows.start]

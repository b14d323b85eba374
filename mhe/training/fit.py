"""A config's PEM-MHE run in this process, for scripts that score or compare its result (the papers' tables).

`fit_pem` runs an experiment of `load_experiment` with `mhe.pem.PEMIdentifier`, prints a progress line every few
iterations and leaves the run files ``torch-ude fit`` leaves (`pem_outputs`, `write_pem_outputs`), then hands
back what a table needs: the trained values, arrival cost, residual weights and the warm starts of the training
windows (to score them as the run ended). `held_out_curve` chooses the outer loop on the training data alone: it
fits on most of the windows and scores the one-step error (`mhe.scoring.one_step_error`, Eq. 9) of the others as
it goes.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import torch

from ..estimator.estimator import MovingHorizonEstimator
from ..estimator.solver import WindowSolver
from ..pem import PEMIdentifier
from ..scoring import one_step_error
from .config import PEMExperiment
from .outputs import pem_outputs, write_pem_outputs

__all__ = ["fit_pem", "held_out_curve"]


def fit_pem(exp: PEMExperiment, out: Path, log_every: int,
            track: Callable[[MovingHorizonEstimator], dict[str, float]] | None = None) -> dict:
    """Run PEM-MHE on ``exp`` in this process (`mhe.pem.PEMIdentifier`) and write its run files to ``out``.

    A line ``i J=... failed=... t=...s`` is printed every ``log_every`` iterations and at a stop.

    Args:
        exp: the experiment (`load_experiment`).
        out: the run folder (``field.pt``, ``field.json``, ``metrics.json``).
        log_every: iterations between progress lines, >= 1.
        track: per iteration, further numbers of the estimator for the history and the progress line (e.g. the
            mean relative parameter error where the truth is known); None: none.

    Returns:
        ``row`` (training time, steps, stop reason, failed solves, trained arrival cost and, with a
        two-stage start, its `mhe.outer.noise_fit.NoiseFitReport`), the
        trained ``values`` and ``arrival``, the ``warm`` starts of the training windows, the trained
        ``residual`` weights (None without a residual), the ``history`` of the iterations and the
        loop's ``result`` (`mhe.outer.report.PEMResult`).
    """
    problem = exp.problem
    outputs = pem_outputs(out, problem, {"outer": exp.outer, "solver": exp.solver})
    outputs.start()
    history = []
    with PEMIdentifier(problem, exp.max_steps, exp.outer, exp.solver) as pem:
        est, t0 = pem.estimator, time.perf_counter()

        def record(i, step):
            extra = track(est) if track is not None else {}
            history.append({"iteration": i, "loss": step.loss, "n_failed": step.n_failed, **extra,
                            "wall_s": time.perf_counter() - t0})
            if i % log_every == 0 or step.stop:
                print(f"{i:4d} J={step.loss:.4e}" + "".join(f" {k}={v:.4f}" for k, v in extra.items())
                      + f" failed={step.n_failed} t={history[-1]['wall_s']:.0f}s"
                      f"{' stop: ' + step.stop if step.stop else ''}", flush=True)

        result = pem.fit(record)
        write_pem_outputs(outputs, est, result)
        warm = [pem.loop.starts.get(i) for i in range(len(problem.windows))]
        values = {n: float(v.detach()) for n, v in est.model.physics.params().items()}
        arrival = (est.arrival_mean.detach().tolist(), est.arrival_std().detach().tolist())
        net = est.model.residual
        residual = None if net is None else {k: v.detach().clone() for k, v in net.state_dict().items()}
        noise_fit = pem.loop.noise_fit_report
    row = {"training_s": result.wall_s, "steps": result.counters.steps, "stop": result.stop_reason,
           "failed_window_solves": result.counters.failed, "arrival": arrival}
    if noise_fit is not None:
        row["noise_fit"] = asdict(noise_fit)
    return {"row": row, "values": values, "arrival": arrival, "warm": warm, "residual": residual, "history": history,
            "result": result}


def held_out_curve(exp: PEMExperiment, every_k: int, block: int, starts: int, every: int, log_every: int) -> dict:
    """Choose the outer loop on the training part only: fit on most of its windows, score the others as it goes.

    The config's windows are taken in blocks of ``block`` consecutive windows; every ``every_k``-th block
    is held out (so the held-out windows cover every stretch of the training part: its first half holds
    the slow start and none of the braking of the second), the PEM loop of ``exp`` (its optimizer,
    ``max_steps``, start) runs on the others. Before the first iteration, every ``every`` iterations and
    after the last, the one-step error (`mhe.scoring.one_step_error`'s mean of ``r^2``) of the held-out windows is
    taken at the current ``alpha`` as the validation part is scored: the lowest-cost of ``starts`` cold
    starts per window. The validation part is never read. Progress lines are printed, one every ``log_every``
    iterations between scorings.

    Args:
        exp: the experiment (`load_experiment`; its problem's windows, optimizer, ``max_steps`` and solver).
        every_k: every ``every_k``-th block is held out, >= 2.
        block: consecutive windows per block, >= 1.
        starts: cold starts per held-out window, >= 1.
        every: iterations between scorings, >= 1.
        log_every: iterations between progress lines without a scoring, >= 1.

    Returns:
        The window counts, ``curve``: per scoring the iteration (-1 = the start), the loss ``J`` and failed
        windows of that iteration, the held-out error and failures, wall s; and ``history``: per iteration
        ``J``, failed windows and windows switched to a cold start.

    Raises:
        ValueError: if ``every_k < 2``, or if ``block < 1``.
    """
    if every_k < 2:
        raise ValueError(f"every_k (every k-th block held out) must be >= 2, so that some windows are fitted; got "
                         f"{every_k}.")
    if block < 1:
        raise ValueError(f"block (consecutive windows per block) must be >= 1; got {block}.")
    problem = exp.problem
    m = len(problem.windows)
    held = (torch.arange(m) // block) % every_k == every_k - 1
    fit_index = torch.nonzero(~held).flatten().tolist()
    fit, windows = problem.windows[~held], problem.windows[held]
    curve, history = [], []
    print(f"held-out selection: fit on {len(fit_index)} windows, {len(windows)} held out (blocks of {block}, "
          f"every {every_k}th)", flush=True)
    with PEMIdentifier(problem, exp.max_steps, exp.outer, exp.solver) as pem, \
            WindowSolver(pem.estimator, Path(exp.solver.build_dir) / "held_out") as solver:
        t0 = time.perf_counter()

        def score_held_out(i: int, loss: float, failed: int) -> None:
            err = one_step_error(solver, windows, starts)
            curve.append({"iteration": i, "loss": loss, "n_failed": failed, "held_out": err["mse"],
                          "held_out_failed": err["failed"], "wall_s": time.perf_counter() - t0})
            print(f"{i:4d} J={loss:.4e} failed={failed} held-out {curve[-1]['held_out']:.4e} "
                  f"({100 * (curve[-1]['held_out'] / curve[0]['held_out'] - 1):+.1f} %) t={curve[-1]['wall_s']:.0f}s",
                  flush=True)

        score_held_out(-1, math.nan, 0)
        for i in range(exp.max_steps):
            step = pem.loop.step(fit_index, fit)
            history.append({"iteration": i, "loss": step.loss, "n_failed": step.n_failed, "switched": step.switched})
            last = i == exp.max_steps - 1 or bool(pem.loop.stop_reason)
            if (i + 1) % every == 0 or last:
                score_held_out(i, step.loss, step.n_failed)
            elif i % log_every == 0:
                print(f"{i:4d} J={step.loss:.4e} failed={step.n_failed} t={time.perf_counter() - t0:.0f}s", flush=True)
            if last:
                break
    return {"block": block, "every_k": every_k, "fit_windows": len(fit_index), "held_out_windows": len(windows),
            "starts": starts, "stop": pem.loop.stop_reason, "curve": curve, "history": history}

"""PEM-MHE in one process: an `IdentificationProblem`, its window solver and the `mhe.outer.outer.PEMLoop`.

`PEMIdentifier` holds no iteration logic: it builds the problem's estimator and solver and
runs the loop over all windows (the window solver may use a process pool). The Lightning
module `mhe.training.PEMModule` runs the same loop from the same problem and settings, so
both give the same iterates. Both end a run with `finish`: the output-error refinement of
``outer.criterion: simulation`` (`simulation_criterion`), the trust envelope of a gray-box
model (`envelope_of_windows`) and its residual check (`residual_check_of_run`), which need the problem, the
estimator and its solver together. `compare_refinement` runs PEM-MHE alone and then the refinement on a
simulated recording and scores both models by free run (issue 33's comparison).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import torch
from torch import Tensor
from torch.nn.utils import parameters_to_vector

from .models.envelope import DEFAULT_MARGIN, record_envelope
from .data.input_history import history_names
from .data.windows import Windows
from .estimator.estimator import MovingHorizonEstimator
from .estimator.solver import SolverSettings, WindowSolver, solved_loss
from .identification import IdentificationProblem
from .outer.free_run import (OutputErrorSettings, estimate_initial_states, free_run_rmse, refine_output_error,
                              simulate_free_run)
from .outer.outer import OuterSettings, PEMLoop
from .outer.residual_check import CHECK_PASSES, check_residual
from .outer.report import PEMResult, PEMStep

__all__ = ["PEMIdentifier", "compare_refinement", "envelope_of_windows", "finish", "residual_check_of_run",
           "simulation_criterion"]


class PEMIdentifier:
    """The PEM-MHE loop of Eq. (5) over all windows of a problem, in this process.

    Args:
        problem: what is identified from which data.
        max_steps: the iterations of a run (also the length of Adam's cosine schedule).
        outer: the outer optimizer and its options.
        solver: processes and build folder of the window solver.

    Attributes:
        estimator: the MHE whose parameters ``alpha`` are identified (new, at the problem's start).
        loop: the `PEMLoop` (its ``history``, ``counters``, ``stop_reason``).
    """

    def __init__(self, problem: IdentificationProblem, max_steps: int, outer: OuterSettings = OuterSettings(),
                 solver: SolverSettings = SolverSettings()) -> None:
        self.problem, self.max_steps = problem, max_steps
        self.estimator = problem.estimator()
        self.solver = WindowSolver.from_settings(self.estimator, solver)
        self.loop = PEMLoop(self.estimator, self.solver, outer, max_steps)

    def step(self) -> PEMStep:
        """One PEM iteration over all windows."""
        windows = self.problem.windows
        return self.loop.step(range(len(windows)), windows)

    def fit(self, callback: Callable[[int, PEMStep], None] | None = None) -> PEMResult:
        """Iterate until ``max_steps`` or until a Gauss-Newton stopping test fires; with ``outer.criterion:
        simulation`` then refine on the free-run error (`mhe.pem.simulation_criterion`).

        Args:
            callback: called as ``callback(i, step)`` after iteration ``i``.

        Returns:
            The `PEMResult` (its ``summary()`` is the line a run ends with).
        """
        t0 = time.perf_counter()
        for i in range(self.loop.counters.steps, self.max_steps):
            rec = self.step()
            if callback is not None:
                callback(i, rec)
            if self.loop.stop_reason:
                break
        return finish(self.loop, self.problem, t0)


    def close(self) -> None:
        """Shut the window solver's pool down."""
        self.solver.close()

    def __enter__(self) -> "PEMIdentifier":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def finish(loop: PEMLoop, problem: IdentificationProblem, t0: float) -> PEMResult:
    """The run's `PEMResult`, after the free-run refinement when ``loop.settings.criterion`` is ``"simulation"``,
    with the residual's trust envelope recorded when the problem wants one (`envelope_of_windows` on
    all of the problem's windows at the final parameters; `IdentificationProblem.envelope_wanted`), unless the
    residual has one already (started from a trained field with an envelope, `mhe.models.trained_field`: it keeps that
    one), then the residual check of a gray-box run (`residual_check_of_run`; `IdentificationProblem.checks_residual`).

    Args:
        loop: the loop after its iterations (its estimator is refined in place, its residual given the envelope and
            zeroed where the check rejects it; ``loop.solver``'s NLP keeps no envelope: build a new solver to solve
            with it).
        problem: the identification problem.
        t0: ``time.perf_counter()`` at the run's start.
    """
    est = loop.estimator
    result = loop.result(time.perf_counter() - t0, problem.relative_errors(est))
    recorded = problem.envelope_wanted and est.model.residual.envelope is None
    if recorded:
        physics = est.model.physics
        names = None if physics is None else (list(physics.state_names),
                                              history_names(physics.input_names, problem.residual.input_lags))
        envelope = envelope_of_windows(est, loop.solver, problem.windows, problem.residual.envelope_margin, names)
        result = replace(result, wall_s=time.perf_counter() - t0, envelope=envelope)
    if problem.checks_residual:
        check = residual_check_of_run(loop, problem, new_solver=recorded)
        result = replace(result, wall_s=time.perf_counter() - t0, parameters=est.parameter_values(),
                         rel_errors=problem.relative_errors(est), residual_check=check)
    if loop.settings.criterion != "simulation":
        return result
    criteria = simulation_criterion(problem, est, loop.solver, loop.settings.simulation)
    return replace(result, wall_s=time.perf_counter() - t0, parameters=est.parameter_values(),
                   rel_errors=problem.relative_errors(est), criteria=criteria)


def residual_check_of_run(loop: PEMLoop, problem: IdentificationProblem, new_solver: bool = False) -> dict:
    """The residual check at the end of a gray-box run (`mhe.outer.residual_check.check_residual`): the trained model,
    its physics alone and the physics at the problem's start (``problem.estimator()``'s parameters, the residual
    removed) on the problem's held-back tail (`IdentificationProblem.held_out_windows`), each window from
    ``max(outer.verify_starts, 1)`` cold starts and `CHECK_PASSES` passes of propagated starts, and (with
    ``residual.check_free_run``) by free run over that tail (`IdentificationProblem.held_out_recording`).

    Args:
        loop: the loop after its iterations (its estimator's residual is zeroed where the check rejects it and
            ``residual.keep_rejected`` is off).
        problem: the identification problem (``problem.checks_residual``).
        new_solver: solve with a new solver of the same settings in ``loop.solver.build_dir / "residual_check"``
            instead of ``loop.solver`` (whose NLP does not have an envelope recorded after it was built).

    Returns:
        `check_residual`'s report.
    """
    held, settings, old = problem.held_out_windows, problem.residual, loop.solver
    assert held is not None, "a problem that checks its residual holds its held-out windows back"
    on = f"the last {100 * settings.check_share:.3g} % of the training recording ({len(held)} windows)"
    start = parameters_to_vector(problem.estimator().parameters()).detach()
    args = dict(starts=max(loop.settings.verify_starts, 1), passes=CHECK_PASSES,
                keep_rejected=settings.keep_rejected, on=on, start=start,
                tail=problem.held_out_recording if settings.check_free_run else None)
    if not new_solver:
        return check_residual(old, held, **args)
    with WindowSolver(loop.estimator, old.build_dir / "residual_check", old.workers, batch=old.batch) as solver:
        return check_residual(solver, held, **args)


def envelope_of_windows(estimator: MovingHorizonEstimator, solver: WindowSolver, windows: Windows,
                        margin: float = DEFAULT_MARGIN, names: tuple[list[str], list[str]] | None = None) -> dict:
    """Solve every window's MHE at the current parameters and record the envelope of its estimated states and its
    inputs on the estimator's residual (`record_envelope`); the windows that did not solve are left out.

    Args:
        estimator: the MHE whose model has a neural residual.
        solver: its window solver (built before the envelope exists: its NLP has no fade).
        windows: the training windows.
        margin, names: as `record_envelope`.

    Returns:
        `record_envelope`'s record, with ``"windows"``: the windows it was recorded from.

    Raises:
        ValueError: for a model without a residual, or when no window solved.
    """
    residual = estimator.model.residual
    if residual is None:
        raise ValueError("the trust envelope fades a neural residual; this model has none (set residual.envelope: "
                         "false, or give the problem a residual).")
    sol = solver.solve(windows)
    ok = sol.ok
    record = record_envelope(residual, sol.point.x[ok], windows.u[ok], margin, names)
    return {**record, "windows": int(ok.sum())}


def simulation_criterion(problem: IdentificationProblem, estimator: MovingHorizonEstimator, solver: WindowSolver,
                         settings: OutputErrorSettings = OutputErrorSettings()) -> dict[str, float]:
    """The output-error refinement after PEM (``outer.criterion: simulation``) and both criteria before and after it.

    Refines ``estimator``'s model in place (`refine_output_error` on ``problem.logged``) and scores it.

    Args:
        problem: the identification problem (its recording and windows).
        estimator: the MHE after PEM.
        solver: the window solver of ``estimator`` (for ``J`` at the parameters before and after).
        settings: the refinement's settings.

    Returns:
        ``J_pem`` and ``J_refined`` (Eq. 9 over the problem's windows, cold-started solves),
        ``free_run_rmse_pem`` and ``free_run_rmse_refined`` (mean over outputs of the per-output RMSE, output
        units, initial states estimated), ``free_run_iterations`` and ``free_run_success`` (IPOPT's).
    """
    windows = problem.windows
    j_pem = solved_loss(estimator, windows, solver.solve(windows))
    res = refine_output_error(estimator, problem.logged, settings)
    return {"J_pem": j_pem, "J_refined": solved_loss(estimator, windows, solver.solve(windows)),
            "free_run_rmse_pem": float(res.rmse_before.mean()), "free_run_rmse_refined": float(res.rmse_after.mean()),
            "free_run_iterations": res.iterations, "free_run_success": res.success}


def _free_run_scores(pem: PEMIdentifier, clean: Tensor, initial: Tensor, rmse: Tensor,
                     extra: Callable[[PEMIdentifier], dict] | None) -> dict:
    """The free-run scores of `compare_refinement` of ``pem``'s model now, from the ``initial`` states (S, n_x) whose
    RMSE per output against the measured outputs is ``rmse`` (n_y,)."""
    rec = pem.problem.logged
    with torch.no_grad():
        run = simulate_free_run(pem.estimator.model, initial, rec.inputs, rec.breaks)
    return {"free_run_rmse": float(rmse.mean()), "free_run_rmse_clean": float(free_run_rmse(run, clean).mean()),
            **(extra(pem) if extra is not None else {}), "rel_errors": pem.problem.relative_errors(pem.estimator)}


def compare_refinement(pem: PEMIdentifier, clean: Tensor, extra: Callable[[PEMIdentifier], dict] | None = None
                       ) -> dict[str, dict]:
    """PEM-MHE alone, then the output-error refinement (`refine_output_error`), each model scored by free run.

    Fits ``pem`` (its one-step criterion), scores the model, refines it in place on the free-run error of the
    problem's recording with the run's ``outer.simulation`` settings and scores it again. A model is scored by
    free run from the initial states that fit it best, its parameters fixed
    (`mhe.outer.free_run.estimate_initial_states`), against the measured outputs and against the noise-free ones.

    Args:
        pem: an identifier, not yet fitted, with ``outer.criterion: prediction``.
        clean: the recording's noise-free outputs (T, n_y), output units (a simulated plant's).
        extra: more scores of a model, called with ``pem`` after each free run (e.g. ``J`` of Eq. 9).

    Returns:
        ``pem_mhe`` and ``refined``, each with ``free_run_rmse`` and ``free_run_rmse_clean`` (the mean over
        the outputs of the RMSE against the measured and the noise-free outputs), ``extra``'s scores and
        ``rel_errors`` (`mhe.identification.IdentificationProblem.relative_errors`); ``pem_mhe`` also with the
        PEM run's ``steps``, ``stop`` (reason) and ``wall_s``, ``refined`` with IPOPT's ``success`` and
        ``ipopt_iterations`` and the refinement's ``wall_s`` (seconds).

    Raises:
        ValueError: for a run whose criterion is already the free-run one (``outer.criterion: simulation``).
    """
    settings = pem.loop.settings
    if settings.criterion != "prediction":
        raise ValueError(f"compare_refinement runs the refinement itself; the run's outer.criterion must be "
                         f"'prediction', got {settings.criterion!r}.")
    rec = pem.problem.logged
    t0 = time.perf_counter()
    result = pem.fit()
    pem_s = time.perf_counter() - t0
    x0, rmse = estimate_initial_states(pem.estimator, rec, settings.simulation)
    alone = _free_run_scores(pem, clean, x0, rmse, extra)
    res = refine_output_error(pem.estimator, rec, settings.simulation)
    refined = _free_run_scores(pem, clean, res.initial_states, res.rmse_after, extra)
    return {"pem_mhe": {**alone, "steps": result.counters.steps, "stop": result.stop_reason, "wall_s": pem_s},
            "refined": {**refined, "success": res.success, "ipopt_iterations": res.iterations, "wall_s": res.wall_s}}

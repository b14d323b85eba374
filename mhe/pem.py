"""PEM-MHE in one process: an `IdentificationProblem`, its window solver and the `mhe.outer.PEMLoop`.

`PEMIdentifier` holds no iteration logic: it builds the problem's estimator and solver and
runs the loop over all windows (the window solver may use a process pool). The Lightning
module `mhe.training.PEMModule` runs the same loop from the same problem and settings, so
both give the same iterates.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from .envelope import envelope_of_windows
from .free_run import simulation_criterion
from .input_history import history_names
from .identification import IdentificationProblem
from .outer import OuterSettings, PEMLoop
from .report import PEMResult, PEMStep
from .solver import SolverSettings, WindowSolver

__all__ = ["PEMIdentifier", "finish"]


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
        simulation`` then refine on the free-run error (`mhe.free_run.simulation_criterion`).

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
    with the residual's trust envelope recorded when the problem wants one (`mhe.envelope.envelope_of_windows` on
    all of the problem's windows at the final parameters; `IdentificationProblem.envelope_wanted`), unless the
    residual has one already (started from a trained field with an envelope, `mhe.trained_field`: it keeps that one).

    Args:
        loop: the loop after its iterations (its estimator is refined in place and its residual given the envelope;
            ``loop.solver``'s NLP keeps none: build a new solver to solve with it).
        problem: the identification problem.
        t0: ``time.perf_counter()`` at the run's start.
    """
    est = loop.estimator
    result = loop.result(time.perf_counter() - t0, problem.relative_errors(est))
    if problem.envelope_wanted and est.model.residual.envelope is None:
        physics = est.model.physics
        names = None if physics is None else (list(physics.state_names),
                                              history_names(physics.input_names, problem.residual.input_lags))
        envelope = envelope_of_windows(est, loop.solver, problem.windows, problem.residual.envelope_margin, names)
        result = replace(result, wall_s=time.perf_counter() - t0, envelope=envelope)
    if loop.settings.criterion != "simulation":
        return result
    criteria = simulation_criterion(problem, est, loop.solver, loop.settings.simulation)
    return replace(result, wall_s=time.perf_counter() - t0, parameters=est.parameter_values(),
                   rel_errors=problem.relative_errors(est), criteria=criteria)

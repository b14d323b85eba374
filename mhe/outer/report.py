"""What a PEM run reports, whichever front-end ran it.

One `PEMStep` per iteration of `mhe.outer.outer.PEMLoop`, the run's `PEMCounters` (checkpointed
with the loop) and the `PEMResult` a run ends with, whose `PEMResult.summary` is the last
line the CLI and the benchmarks print. `starts_report` tells at a run's end whether its warm starts still find
the lowest MHE cost that cold starts find (the windows are nonconvex, `mhe.estimator.solver.lower_cost`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from torch import Tensor

if TYPE_CHECKING:
    from ..data.windows import Windows
    from ..estimator.solver import Start, WindowSolver

__all__ = ["PEMStep", "PEMCounters", "PEMResult", "starts_report"]


@dataclass(frozen=True)
class PEMStep:
    """Record of one PEM iteration; counts are over all processes, times are this process's.

    Attributes:
        loss: ``J`` over the windows used (Eq. 9) at the iteration's start (nan if none).
        n_used: windows that entered the step.
        n_failed: windows dropped because their MHE solve failed.
        applied: whether ``alpha`` changed (a finite gradient step; for Gauss-Newton a trial
            that lowered ``J``).
        skipped: the gradient (or residual Jacobian) was non-finite, so nothing was tried.
        grad_norm: 2-norm of ``dJ/dalpha`` (nan when not available).
        solve_s: wall time of the MHE solves and their refinement.
        hypergradient_s: wall time of the hypergradient (of the residual Jacobian for Gauss-Newton).
        iterations: mean IPOPT iterations per window of the solve the step is taken from.
        kkt_residual: largest relative KKT residual of the windows used (nan if none).
        evaluations: MHE solves of all windows in this iteration (line-search trials for
            L-BFGS; for Gauss-Newton the trial steps, their cold-start checks and the final
            check, plus the solve at the current ``alpha`` unless the accepted trial of the
            previous iteration provided it).
        switched: Gauss-Newton with ``cold_check``: windows of the accepted trial whose
            cold-started solution had the lower MHE cost and replaced the warm-started one; Adam
            with ``cold_every``: the same in the iteration's own solve.
        check_rejected: Gauss-Newton: trials that lowered ``J`` on warm-started solutions but
            not after the cold-start check.
        stop: Gauss-Newton: the stopping test that fired and whose final check passed, or ``""``.
        verify_switched: Gauss-Newton: windows that took a lower-cost cold-started solution in
            the final check (the stop is then cancelled).
        trial_failed: Gauss-Newton: window solves that failed in trials, cold-start checks and
            the final check (left out of that one comparison; ``n_failed`` counts the solve the
            step is taken from).
    """

    loss: float
    n_used: int
    n_failed: int
    applied: bool
    skipped: bool
    grad_norm: float
    solve_s: float
    hypergradient_s: float
    iterations: float
    kkt_residual: float
    evaluations: int = 1
    switched: int = 0
    check_rejected: int = 0
    stop: str = ""
    verify_switched: int = 0
    trial_failed: int = 0


@dataclass
class PEMCounters:
    """Totals of a run (checkpointed with the loop).

    Attributes:
        steps: PEM iterations run.
        updates: iterations that changed ``alpha``.
        skipped: iterations with a non-finite gradient or residual Jacobian.
        failed: failed window solves of the solves the steps were taken from.
        failed_trials: failed window solves in Gauss-Newton trials and checks.
    """

    steps: int = 0
    updates: int = 0
    skipped: int = 0
    failed: int = 0
    failed_trials: int = 0


@dataclass(frozen=True)
class PEMResult:
    """What a PEM run ends with, whichever front-end ran it.

    Attributes:
        loss: ``J`` of the last iteration (Eq. 9, at the parameters before its step).
        stop_reason: the Gauss-Newton stopping test that ended the run, or ``""``.
        counters: the run's `PEMCounters`.
        wall_s: wall time of the iterations in seconds.
        parameters: identified physical values and the arrival cost (``s_bar_i``, ``sigma_i``).
        rel_errors: relative error of each identified parameter with a known truth (empty without).
        criteria: with ``outer.criterion: simulation``, both criteria before and after the free-run
            refinement (`mhe.pem.simulation_criterion`); empty otherwise.
        envelope: the residual's trust envelope recorded at the end of the run
            (`mhe.models.envelope.record_envelope`'s record), or None.
        residual_check: the report of a gray-box run's residual check (`mhe.outer.residual_check.check_residual`),
            or None (no check).
    """

    loss: float
    stop_reason: str
    counters: PEMCounters
    wall_s: float
    parameters: dict[str, float]
    rel_errors: dict[str, float]
    criteria: dict[str, float] = field(default_factory=dict)
    envelope: dict | None = None
    residual_check: dict | None = None

    @property
    def residual_rejected(self) -> bool:
        """Whether the residual check rejected the residual and the run's model is its physics alone."""
        return self.residual_check is not None and not self.residual_check["kept"]

    @property
    def mean_rel_error(self) -> float | None:
        """Mean of `rel_errors` (None without a truth)."""
        return sum(self.rel_errors.values()) / len(self.rel_errors) if self.rel_errors else None

    def summary(self, folder: str | Path | None = None) -> str:
        """The one line a run ends with."""
        c = self.counters
        err = (f"mean relative parameter error {100 * self.mean_rel_error:.2f} % ({len(self.rel_errors)} parameters)"
               if self.rel_errors else "no true parameters to compare with")
        stop = f"stop: {self.stop_reason}" if self.stop_reason else "no stopping test fired"
        out = "" if folder is None else f"; outputs in {folder}"
        cr = self.criteria
        free = (f", free-run RMSE {cr['free_run_rmse_pem']:.4g} after PEM -> {cr['free_run_rmse_refined']:.4g} refined "
                f"(J {cr['J_pem']:.4e} -> {cr['J_refined']:.4e})" if cr else "")
        rc = self.residual_check
        verdict = "" if rc is None else "rejected" if rc["rejected"] else "passed"
        start = "" if rc is None or rc.get("start_physics") is None else f", {rc['start_physics']:.4e} its start"
        exported = {"physics": "; physics alone exported", "start_physics": "; the start's physics exported"}
        fr = None if rc is None else rc.get("free_run")
        free_check = "" if not fr else (
            f"; free-run {fr['hybrid']:.4e} vs {fr['physics']:.4e}"
            + (f", {fr['start_physics']:.4e}" if fr.get("start_physics") is not None else ""))
        check = "" if rc is None else (
            f", residual check {verdict} (one-step error {rc['hybrid']:.4e} gray-box vs {rc['physics']:.4e} physics "
            f"alone{start}{free_check}{exported.get(rc.get('model'), '') if self.residual_rejected else ''})")
        return (f"PEM-MHE: {err}, J = {self.loss:.4e}, {c.steps} steps ({c.updates} applied, {c.skipped} skipped), "
                f"{stop}, failed window solves {c.failed} (+{c.failed_trials} in trials and checks), "
                f"{self.wall_s:.1f} s{free}{check}{out}")


def _differ(a: Tensor, b: Tensor) -> int:
    """Windows whose ``J^(i)`` differ by more than 1e-8 relative."""
    return int(((a - b).abs() > 1e-8 * a.abs().clamp_min(1e-12)).sum())


def starts_report(solver: WindowSolver, windows: Windows, warm: list[Start | None] | None = None,
                  starts: int = 1) -> dict[str, float | int]:
    """``J`` of Eq. (9) at the solver's estimator's current parameters from warm starts, one cold start and
    ``starts`` cold starts (`mhe.estimator.solver.cold_solve`), each over the windows that solved.

    Args:
        solver: the window solver (its estimator's current ``alpha``).
        windows: the M windows.
        warm: per window the run's warm start or None (start cold), or None for no warm solve.
        starts: cold starts per window, >= 1 (more than one needs an arrival box on the unmeasured states).

    Returns:
        ``J_cold_start``, ``n_failed_cold_start``, ``J_cold_multistart``, ``report_starts`` and
        ``n_failed_multistart``; given ``warm`` also ``J_warm``, ``n_failed_warm``, ``J_lower_cost`` (per window
        the lower MHE cost of the warm and the multistart solution, `mhe.estimator.solver.lower_cost`),
        ``windows_cold_lower_cost`` (the windows where the multistart one was lower) and
        ``windows_J_differ_warm_cold`` and ``windows_J_differ_warm_multistart`` (windows whose ``J^(i)`` differ
        by more than 1e-8 relative).
    """
    from ..estimator.kkt import prediction_loss
    from ..estimator.solver import cold_solve, lower_cost, solved_loss  # loads CasADi; the records above do not

    est = solver.estimator
    cold = solver.solve(windows)
    multi = cold_solve(solver, windows, starts)[0] if starts > 1 else cold
    out = {"J_cold_start": solved_loss(est, windows, cold), "n_failed_cold_start": cold.n_failed,
           "J_cold_multistart": solved_loss(est, windows, multi), "report_starts": starts,
           "n_failed_multistart": multi.n_failed}
    if warm is not None:
        last = solver.solve(windows, warm)
        both, took = lower_cost(est, windows, last, multi)
        lw, lc, lm = (prediction_loss(est, s.point.stages(), windows)[0] for s in (last, cold, multi))
        out.update({"J_warm": solved_loss(est, windows, last), "n_failed_warm": last.n_failed,
                    "J_lower_cost": solved_loss(est, windows, both), "windows_cold_lower_cost": int(took.sum()),
                    "windows_J_differ_warm_cold": _differ(lw, lc), "windows_J_differ_warm_multistart": _differ(lw, lm)})
    return out

"""The outer PEM problem (Eq. 5): Adam on the unconstrained ``alpha`` with exact hypergradients.

One PEM iteration solves the M MHE windows at the current ``alpha``
(`mhe.solver.WindowSolver`), drops failed windows, evaluates ``J`` and ``dJ/dalpha``
on the others (adjoint-VJP by default, explicit for comparison) and applies the
gradient with ``torch.optim.Adam`` unless it is non-finite, in which case the step is
skipped, logged and counted. `hypergradient_step` and `apply_hypergradient` are the
pieces the Lightning module reuses. Because every iteration uses all windows, ``J`` is
deterministic, and `PEMIdentifier` also offers ``torch.optim.LBFGS`` with a strong-Wolfe
line search (each line-search trial re-solves the windows) for comparison, and a
Gauss-Newton step (Levenberg-Marquardt, `mhe.gauss_newton`) on the least-squares
structure of ``J``: each trial step re-solves the windows (warm-started) and is accepted
only if ``J`` decreases on the windows that succeeded both before and after it; with
``cold_check`` (default) a trial that passes is re-solved from cold starts, each window
keeps the solution of lower MHE cost (`mhe.solver.lower_cost`), and the step must lower
``J`` of those solutions too. Gauss-Newton stops when a `GaussNewtonStopping` test fires
and the current solutions pass a final check: re-solved from ``verify_starts`` cold starts
(`mhe.solver.cold_solve`), no window may reach a lower MHE cost; if one does, it takes that
solution and the iterations go on.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from .estimator import MovingHorizonEstimator
from .gauss_newton import GaussNewtonStopping, LevenbergMarquardt, levenberg_marquardt_step, residual_jacobian
from .kkt import Hypergradient, hypergradient_adjoint, hypergradient_explicit, prediction_loss
from .solver import Start, WindowSolutions, WindowSolver, cold_solve, lower_cost
from .windows import Windows

__all__ = ["HYPERGRADIENTS", "OPTIMIZERS", "PEMStep", "hypergradient_step", "apply_hypergradient", "PEMIdentifier"]

log = logging.getLogger(__name__)

HYPERGRADIENTS: dict[str, Callable[..., Hypergradient]] = {
    "adjoint": hypergradient_adjoint,
    "explicit": hypergradient_explicit,
}
"""The two hypergradient forms: adjoint-VJP (Prop. 1) and explicit (Eq. 11)."""

OPTIMIZERS = ("adam", "lbfgs", "gauss_newton")
"""Outer optimizers of `PEMIdentifier`."""


@dataclass(frozen=True)
class PEMStep:
    """Record of one PEM iteration.

    Attributes:
        loss: ``J`` over the windows used (Eq. 9).
        n_used: windows that entered the step.
        n_failed: windows dropped because their MHE solve failed.
        applied: whether the gradient was applied (finite and at least one window; for
            Gauss-Newton: whether a trial step lowered ``J``).
        grad_norm: 2-norm of ``dJ/dalpha`` (nan when not available).
        solve_s: wall time of the M MHE solves and their refinement.
        hypergradient_s: wall time of the hypergradient (of the residual Jacobian for Gauss-Newton).
        iterations: mean IPOPT iterations per window.
        evaluations: MHE solves of all windows in this iteration (line-search trials for
            L-BFGS; for Gauss-Newton the trial steps and their cold-start checks, plus the
            solve at the current ``alpha`` unless the accepted trial of the previous
            iteration provided it).
        switched: Gauss-Newton with ``cold_check``: windows of the accepted trial whose
            cold-started solution had the lower MHE cost and replaced the warm-started one.
        check_rejected: Gauss-Newton: trials that lowered ``J`` on warm-started solutions
            but not after the cold-start check.
        stop: Gauss-Newton: the stopping test that fired after this iteration and whose final
            check passed, or ``""``.
        verify_switched: Gauss-Newton: windows that took a lower-cost cold-started solution in
            the final check after a stopping test fired (the stop is then cancelled).
        trial_failed: Gauss-Newton: window solves that failed in the trial steps, their
            cold-start checks and the final check (such a window is left out of that one
            comparison; ``n_failed`` counts the solve the step is taken from).
    """

    loss: float
    n_used: int
    n_failed: int
    applied: bool
    grad_norm: float
    solve_s: float
    hypergradient_s: float
    iterations: float
    evaluations: int = 1
    switched: int = 0
    check_rejected: int = 0
    stop: str = ""
    verify_switched: int = 0
    trial_failed: int = 0


def hypergradient_step(estimator: MovingHorizonEstimator, solutions: WindowSolutions, windows: Windows,
                       method: str = "adjoint") -> tuple[Hypergradient | None, float]:
    """``J`` and ``dJ/dalpha`` over the windows whose MHE succeeded.

    Returns:
        The `Hypergradient` (None when no window succeeded) and its wall time in seconds.

    Raises:
        ValueError: for an unknown ``method``.
    """
    if method not in HYPERGRADIENTS:
        raise ValueError(f"method must be one of {sorted(HYPERGRADIENTS)}; got {method!r}.")
    t0 = time.perf_counter()
    ok = solutions.ok
    if not bool(ok.any()):
        return None, 0.0
    hg = HYPERGRADIENTS[method](estimator, solutions.point[ok].stages(), windows[ok])
    return hg, time.perf_counter() - t0


def apply_hypergradient(estimator: MovingHorizonEstimator, optimizer: torch.optim.Optimizer,
                        grads: dict[str, Tensor]) -> bool:
    """Write ``grads`` into ``p.grad`` and step ``optimizer``, unless any entry is non-finite.

    Returns:
        True if the step was applied; False (logged) if the gradient was non-finite.
    """
    if not all(bool(torch.isfinite(g).all()) for g in grads.values()):
        bad = [n for n, g in grads.items() if not bool(torch.isfinite(g).all())]
        log.warning("Non-finite hypergradient in %s; the step is skipped and alpha is left unchanged.", bad)
        return False
    for name, p in estimator.named_parameters():
        p.grad = grads[name].clone()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return True


@dataclass
class PEMIdentifier:
    """The PEM-MHE loop of Eq. (5) in one process (the solver may use a pool).

    Attributes:
        estimator: the MHE whose parameters ``alpha`` are identified.
        windows: the data set of Eq. (3).
        solver: the window solver for ``estimator``.
        lr: learning rate on the unconstrained parameters (Adam), or L-BFGS's initial step;
            unused by Gauss-Newton.
        method: ``"adjoint"`` or ``"explicit"`` (Adam and L-BFGS; Gauss-Newton always uses
            the adjoint residual Jacobian).
        optimizer_name: ``"adam"`` (the method's choice), ``"lbfgs"`` or ``"gauss_newton"``.
        damping: Gauss-Newton's initial Levenberg-Marquardt damping relative to
            ``max(diag(J^T J))`` (`mhe.gauss_newton.LevenbergMarquardt`'s ``tau``).
        max_trials: Gauss-Newton trial steps per iteration before it gives up (alpha
            unchanged, ``mu`` raised).
        cold_check: Gauss-Newton: re-solve a trial that lowered ``J`` from cold starts,
            keep per window the solution of lower MHE cost and accept the step only if
            ``J`` of those is lower too (one more solve of all windows per iteration).
        stopping: Gauss-Newton's stopping tests (`fit` ends when one fires and the final check passes).
        verify_starts: Gauss-Newton: cold starts per window of the final check (0: none; more
            than 1 needs bounded ``s_bar`` for the unmeasured states, `mhe.solver.cold_guesses`).
        history: one `PEMStep` per iteration.
        skipped: iterations whose gradient (or Gauss-Newton step) was non-finite and not applied.
        stop_reason: the Gauss-Newton stopping test that fired, or ``""``.
    """

    estimator: MovingHorizonEstimator
    windows: Windows
    solver: WindowSolver
    lr: float = 1e-2
    method: str = "adjoint"
    optimizer_name: str = "adam"
    damping: float = 1e-3
    max_trials: int = 10
    cold_check: bool = True
    stopping: GaussNewtonStopping = field(default_factory=GaussNewtonStopping)
    verify_starts: int = 1
    history: list[PEMStep] = field(default_factory=list)
    skipped: int = 0
    stop_reason: str = ""

    def __post_init__(self) -> None:
        if self.method not in HYPERGRADIENTS:
            raise ValueError(f"method must be one of {sorted(HYPERGRADIENTS)}; got {self.method!r}.")
        if self.optimizer_name not in OPTIMIZERS:
            raise ValueError(f"optimizer_name must be one of {OPTIMIZERS}; got {self.optimizer_name!r}.")
        if self.max_trials < 1 or self.verify_starts < 0:
            raise ValueError(f"max_trials must be >= 1 and verify_starts >= 0; got {self.max_trials} and "
                             f"{self.verify_starts}.")
        params = self.estimator.parameters()
        self.optimizer: torch.optim.Optimizer | None = None
        if self.optimizer_name == "adam":
            self.optimizer = torch.optim.Adam(params, lr=self.lr)
        elif self.optimizer_name == "lbfgs":
            self.optimizer = torch.optim.LBFGS(params, lr=self.lr, max_iter=1, history_size=20,
                                               line_search_fn="strong_wolfe")
        self.lm = LevenbergMarquardt(self.damping)
        self.starts: list[Start | None] = [None] * len(self.windows)
        self._solved: tuple[Tensor, WindowSolutions] | None = None
        self._losses: list[float] = []

    def step(self) -> PEMStep:
        """One PEM iteration: M MHE solves, hypergradient, optimizer step."""
        if self.optimizer_name == "lbfgs":
            return self._lbfgs_step()
        if self.optimizer_name == "gauss_newton":
            return self._gauss_newton_step()
        sol = self.solver.solve(self.windows, self.starts)
        self.starts = sol.starts
        hg, hyper_s = hypergradient_step(self.estimator, sol, self.windows, self.method)
        applied, loss, norm = False, float("nan"), float("nan")
        if hg is not None:
            loss = float(hg.loss.sum())
            norm = float(torch.sqrt(sum((g * g).sum() for g in hg.grads.values())))
            applied = apply_hypergradient(self.estimator, self.optimizer, hg.grads)
        self.skipped += int(hg is not None and not applied)
        rec = PEMStep(loss, int(sol.ok.sum()), sol.n_failed, applied, norm, sol.wall_s, hyper_s,
                      float(sol.iterations.double().mean()))
        self.history.append(rec)
        return rec

    def _alpha(self) -> Tensor:
        return parameters_to_vector(self.estimator.parameters()).detach().clone()

    def _set_alpha(self, alpha: Tensor) -> None:
        with torch.no_grad():
            vector_to_parameters(alpha, self.estimator.parameters())

    def _gauss_newton_step(self) -> PEMStep:
        alpha = self._alpha()
        solves: list[WindowSolutions] = []
        if self._solved is not None and torch.equal(self._solved[0], alpha):
            sol = self._solved[1]
        else:
            sol = self.solver.solve(self.windows, self.starts)
            self.starts = sol.starts
            solves.append(sol)
        t0 = time.perf_counter()
        ok = sol.ok
        rj = residual_jacobian(self.estimator, sol.point[ok].stages(), self.windows[ok]) if bool(ok.any()) else None
        hyper_s = time.perf_counter() - t0
        if rj is not None and not self._losses:
            self._losses.append(float(rj.loss.sum()))
        step, switched = None, 0
        if rj is not None and not rj.is_finite():
            log.warning("Non-finite residual Jacobian; the Gauss-Newton step is skipped and alpha is left unchanged.")
            self.skipped += 1
        elif rj is not None:
            trials: list[WindowSolutions] = []
            taken: list[Tensor] = []

            def loss_of(s: WindowSolutions) -> Tensor:
                return torch.where(s.ok, prediction_loss(self.estimator, s.point.stages(), self.windows)[0],
                                   torch.nan)[ok]

            def evaluate(delta: Tensor) -> Tensor:
                self._set_alpha(alpha + delta)
                trials.append(self.solver.solve(self.windows, self.starts))
                solves.append(trials[-1])
                return loss_of(trials[-1])

            def check() -> Tensor:
                solves.append(self.solver.solve(self.windows))
                trials[-1], took = lower_cost(self.estimator, self.windows, trials[-1], solves[-1])
                taken.append(took)
                return loss_of(trials[-1])

            step = levenberg_marquardt_step(self.lm, rj, torch.ones(len(rj.loss), dtype=torch.bool), evaluate,
                                            self.max_trials, check if self.cold_check else None)
            if step.delta is not None:
                self.starts, self._solved = trials[-1].starts, (self._alpha(), trials[-1])
                self._losses.append(float(loss_of(trials[-1]).nansum()))
                switched = int(taken[-1].sum()) if self.cold_check else 0
            else:
                self._set_alpha(alpha)
        applied = step is not None and step.delta is not None
        verify_switched, extra = 0, 0
        if rj is not None and rj.is_finite():
            self.stop_reason = self.stopping.reason(self._losses, step.delta if applied else None, self.lm)
            if self.stop_reason and self.verify_starts > 0:
                verify_switched = self._final_check(self._solved[1] if applied else sol, solves)
                extra = self.verify_starts - 1  # cold_solve's solves are one entry of ``solves``
        rec = PEMStep(float("nan") if rj is None else float(rj.loss.sum()), int(ok.sum()), sol.n_failed, applied,
                      float("nan") if rj is None else float(rj.gradient.norm()), sum(t.wall_s for t in solves),
                      hyper_s, float(sol.iterations.double().mean()), len(solves) + extra, switched,
                      0 if step is None else step.check_rejected, self.stop_reason, verify_switched,
                      sum(s.n_failed for s in solves if s is not sol))
        self.history.append(rec)
        return rec

    def _final_check(self, current: WindowSolutions, solves: list[WindowSolutions]) -> int:
        """Compare ``current`` with `cold_solve`; windows of lower cost switch and cancel the stop."""
        cold, _ = cold_solve(self.solver, self.windows, self.verify_starts)
        solves.append(cold)
        best, took = lower_cost(self.estimator, self.windows, current, cold)
        if bool(took.any()):
            log.info("Final check: %d windows reached a lower MHE cost from cold starts; Gauss-Newton goes on.",
                     int(took.sum()))
            self.starts, self._solved, self.stop_reason = best.starts, (self._alpha(), best), ""
            self._losses[-1] = float(prediction_loss(self.estimator, best.point[best.ok].stages(),
                                                     self.windows[best.ok])[0].sum())
        return int(took.sum())

    def _lbfgs_step(self) -> PEMStep:
        trials: list[tuple[float, WindowSolutions, float, float]] = []

        def closure() -> Tensor:
            sol = self.solver.solve(self.windows, self.starts)
            self.starts = sol.starts
            hg, hyper_s = hypergradient_step(self.estimator, sol, self.windows, self.method)
            finite = hg is not None and all(bool(torch.isfinite(g).all()) for g in hg.grads.values())
            for name, p in self.estimator.named_parameters():
                p.grad = hg.grads[name].clone() if finite else torch.zeros_like(p)
            loss = float(hg.loss.sum()) if finite else float("inf")
            norm = float(torch.sqrt(sum((g * g).sum() for g in hg.grads.values()))) if finite else float("nan")
            trials.append((loss, sol, hyper_s, norm))
            return torch.tensor(loss, dtype=torch.float64)

        self.optimizer.step(closure)
        loss, sol, hyper_s, norm = trials[0]
        applied = len(trials) > 1 or loss != float("inf")
        if loss == float("inf"):
            log.warning("Non-finite hypergradient or no usable window; the L-BFGS step is skipped.")
            self.skipped += 1
            applied = False
        rec = PEMStep(loss, int(sol.ok.sum()), sol.n_failed, applied, norm, sum(t[1].wall_s for t in trials),
                      sum(t[2] for t in trials), float(sol.iterations.double().mean()), len(trials))
        self.history.append(rec)
        return rec

    def fit(self, iterations: int, callback: Callable[[int, PEMStep], None] | None = None) -> list[PEMStep]:
        """Run up to ``iterations`` PEM iterations; ``callback(i, step)`` after each.

        Gauss-Newton ends earlier when a stopping test fires (``stop_reason``).
        """
        for i in range(iterations):
            rec = self.step()
            if callback is not None:
                callback(i, rec)
            if self.stop_reason:
                break
        return self.history

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
only if ``J`` decreases on the windows that succeeded both before and after it.
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
from .gauss_newton import LevenbergMarquardt, levenberg_marquardt_step, residual_jacobian
from .kkt import Hypergradient, hypergradient_adjoint, hypergradient_explicit, prediction_loss
from .solver import Start, WindowSolutions, WindowSolver
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
            L-BFGS; for Gauss-Newton the trial steps, plus the solve at the current ``alpha``
            unless the accepted trial of the previous iteration provided it).
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
        history: one `PEMStep` per iteration.
        skipped: iterations whose gradient (or Gauss-Newton step) was non-finite and not applied.
    """

    estimator: MovingHorizonEstimator
    windows: Windows
    solver: WindowSolver
    lr: float = 1e-2
    method: str = "adjoint"
    optimizer_name: str = "adam"
    damping: float = 1e-3
    max_trials: int = 10
    history: list[PEMStep] = field(default_factory=list)
    skipped: int = 0

    def __post_init__(self) -> None:
        if self.method not in HYPERGRADIENTS:
            raise ValueError(f"method must be one of {sorted(HYPERGRADIENTS)}; got {self.method!r}.")
        if self.optimizer_name not in OPTIMIZERS:
            raise ValueError(f"optimizer_name must be one of {OPTIMIZERS}; got {self.optimizer_name!r}.")
        if self.max_trials < 1:
            raise ValueError(f"max_trials must be >= 1; got {self.max_trials}.")
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
        applied = False
        if rj is not None and not rj.is_finite():
            log.warning("Non-finite residual Jacobian; the Gauss-Newton step is skipped and alpha is left unchanged.")
            self.skipped += 1
        elif rj is not None:
            trials: list[WindowSolutions] = []

            def evaluate(delta: Tensor) -> Tensor:
                self._set_alpha(alpha + delta)
                trials.append(self.solver.solve(self.windows, self.starts))
                loss = prediction_loss(self.estimator, trials[-1].point.stages(), self.windows)[0]
                return torch.where(trials[-1].ok, loss, torch.nan)[ok]

            applied = levenberg_marquardt_step(self.lm, rj, torch.ones(len(rj.loss), dtype=torch.bool), evaluate,
                                               self.max_trials) is not None
            solves += trials
            if applied:
                self.starts, self._solved = trials[-1].starts, (self._alpha(), trials[-1])
            else:
                self._set_alpha(alpha)
        rec = PEMStep(float("nan") if rj is None else float(rj.loss.sum()), int(ok.sum()), sol.n_failed, applied,
                      float("nan") if rj is None else float(rj.gradient.norm()), sum(t.wall_s for t in solves),
                      hyper_s, float(sol.iterations.double().mean()), len(solves))
        self.history.append(rec)
        return rec

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
        """Run ``iterations`` PEM iterations; ``callback(i, step)`` after each."""
        for i in range(iterations):
            rec = self.step()
            if callback is not None:
                callback(i, rec)
        return self.history

"""The outer PEM problem (Eq. 5): Adam on the unconstrained ``alpha`` with exact hypergradients.

One PEM iteration solves the M MHE windows at the current ``alpha``
(`mhe.solver.WindowSolver`), drops failed windows, evaluates ``J`` and ``dJ/dalpha``
on the others (adjoint-VJP by default, explicit for comparison) and applies the
gradient with ``torch.optim.Adam`` unless it is non-finite, in which case the step is
skipped, logged and counted. `hypergradient_step` and `apply_hypergradient` are the
pieces the Lightning module reuses. Because every iteration uses all windows, ``J`` is
deterministic, and `PEMIdentifier` also offers ``torch.optim.LBFGS`` with a strong-Wolfe
line search (each line-search trial re-solves the windows) for comparison.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from .estimator import MovingHorizonEstimator
from .kkt import Hypergradient, hypergradient_adjoint, hypergradient_explicit
from .solver import Start, WindowSolutions, WindowSolver
from .windows import Windows

__all__ = ["HYPERGRADIENTS", "OPTIMIZERS", "PEMStep", "hypergradient_step", "apply_hypergradient", "PEMIdentifier"]

log = logging.getLogger(__name__)

HYPERGRADIENTS: dict[str, Callable[..., Hypergradient]] = {
    "adjoint": hypergradient_adjoint,
    "explicit": hypergradient_explicit,
}
"""The two hypergradient forms: adjoint-VJP (Prop. 1) and explicit (Eq. 11)."""

OPTIMIZERS = ("adam", "lbfgs")
"""Outer optimizers of `PEMIdentifier`."""


@dataclass(frozen=True)
class PEMStep:
    """Record of one PEM iteration.

    Attributes:
        loss: ``J`` over the windows used (Eq. 9).
        n_used: windows that entered the step.
        n_failed: windows dropped because their MHE solve failed.
        applied: whether the gradient was applied (finite and at least one window).
        grad_norm: 2-norm of ``dJ/dalpha`` (nan when not available).
        solve_s: wall time of the M MHE solves and their refinement.
        hypergradient_s: wall time of the hypergradient.
        iterations: mean IPOPT iterations per window.
        evaluations: evaluations of ``J`` in this iteration (line-search trials for L-BFGS).
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
        lr: learning rate on the unconstrained parameters (Adam), or L-BFGS's initial step.
        method: ``"adjoint"`` or ``"explicit"``.
        optimizer_name: ``"adam"`` (the method's choice) or ``"lbfgs"``.
        history: one `PEMStep` per iteration.
        skipped: iterations whose gradient was non-finite and not applied.
    """

    estimator: MovingHorizonEstimator
    windows: Windows
    solver: WindowSolver
    lr: float = 1e-2
    method: str = "adjoint"
    optimizer_name: str = "adam"
    history: list[PEMStep] = field(default_factory=list)
    skipped: int = 0

    def __post_init__(self) -> None:
        if self.method not in HYPERGRADIENTS:
            raise ValueError(f"method must be one of {sorted(HYPERGRADIENTS)}; got {self.method!r}.")
        if self.optimizer_name not in OPTIMIZERS:
            raise ValueError(f"optimizer_name must be one of {OPTIMIZERS}; got {self.optimizer_name!r}.")
        params = self.estimator.parameters()
        self.optimizer = torch.optim.Adam(params, lr=self.lr) if self.optimizer_name == "adam" else \
            torch.optim.LBFGS(params, lr=self.lr, max_iter=1, history_size=20, line_search_fn="strong_wolfe")
        self.starts: list[Start | None] = [None] * len(self.windows)

    def step(self) -> PEMStep:
        """One PEM iteration: M MHE solves, hypergradient, optimizer step."""
        if self.optimizer_name == "lbfgs":
            return self._lbfgs_step()
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

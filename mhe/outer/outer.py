"""The outer PEM problem (Eq. 5): one loop for every front-end.

`PEMLoop.step` is one PEM iteration over the windows a process holds. It solves their MHEs
(warm-started, `mhe.estimator.solver.WindowSolver`), drops failed windows and updates ``alpha`` with
the optimizer of `OuterSettings`:

* ``"adam"``, the paper's choice: the exact hypergradient (adjoint-VJP, Prop. 1, or explicit,
  Eq. 11), summed over windows and processes, applied by ``torch.optim.AdamW`` on the
  unconstrained ``alpha`` with a cosine schedule from ``lr`` to ``lr_min`` over ``max_steps``
  (its decoupled ``weight_decay`` only on a neural residual's weights, 0 by default: plain Adam);
  a non-finite gradient is not applied but logged and counted. With ``cold_every`` the windows
  are also solved from ``verify_starts`` cold starts every ``cold_every`` iterations and each
  keeps the solution of lower MHE cost (`mhe.estimator.solver.lower_cost`) for the gradient and as its
  next warm start: warm starts follow the local minimum they came from, and without the check
  Adam may fit the predictions of branches that are not the MHE's lowest-cost solutions (which
  the cold-started evaluation of a trained model then does not find);
* ``"lbfgs"``: ``torch.optim.LBFGS`` with a strong-Wolfe line search; every iteration uses all
  windows, so ``J`` is deterministic, and each line-search trial re-solves the windows;
* ``"gauss_newton"``: a Levenberg-Marquardt step on the residual Jacobian
  (`mhe.outer.gauss_newton`). Each trial step re-solves the windows (warm-started) and is accepted
  only if ``J`` decreases on the windows that succeeded before and after it; with
  ``cold_check`` a trial that passes is re-solved from cold starts, each window keeps the
  solution of lower MHE cost (`mhe.estimator.solver.lower_cost`) and the step must lower ``J`` of those
  too. When a `mhe.outer.gauss_newton.GaussNewtonStopping` test fires, the current solutions are
  compared with ``verify_starts`` cold starts per window (`mhe.estimator.solver.cold_solve`); a window
  that reaches a lower MHE cost takes that solution and the iterations go on, otherwise
  `PEMLoop.stop_reason` names the test.

The loop holds every decision; a front-end passes the window solver, the windows with their
global indices (the keys of the warm starts) and a `Collective` that sums and gathers over
processes. The in-process `mhe.pem.PEMIdentifier` passes all windows and the identity
`LOCAL`; the Lightning module (`mhe.training.PEMModule`) passes each DDP process's shard and
Lightning's all-reduce and all-gather, so every process takes the same step. The dense
Gauss-Newton step costs O(M n_y n_alpha^2), so it is for physics and small gray-box models.
"""
from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

import torch
from torch import Tensor
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from ..models.checks import require
from ..data.windows import Windows
from ..estimator.estimator import MovingHorizonEstimator
from ..estimator.kkt import Hypergradient, hypergradient_adjoint, hypergradient_explicit, prediction_loss
from ..estimator.solver import Start, WindowSolutions, WindowSolver, cold_solve, lower_cost
from .free_run import CRITERIA, OutputErrorSettings
from .gauss_newton import GaussNewtonStopping, LevenbergMarquardt, ResidualJacobian, levenberg_marquardt_step
from .gauss_newton import residual_jacobian
from .noise_fit import NoiseFitReport, NoiseFitSettings, fit_to_process_noise
from .report import PEMCounters, PEMResult, PEMStep

__all__ = ["OPTIMIZERS", "HYPERGRADIENTS", "OuterSettings", "Collective", "LOCAL", "PEMLoop"]

log = logging.getLogger(__name__)

OPTIMIZERS = ("adam", "lbfgs", "gauss_newton")
"""The outer optimizers."""

HYPERGRADIENTS: dict[str, Callable[..., Hypergradient]] = {
    "adjoint": hypergradient_adjoint,
    "explicit": hypergradient_explicit,
}
"""The two hypergradient forms: adjoint-VJP (Prop. 1) and explicit (Eq. 11)."""


@dataclass(frozen=True)
class OuterSettings:
    """Settings of the outer loop, validated once; the same names in every front-end.

    Attributes:
        optimizer: ``"adam"`` (the paper's), ``"lbfgs"`` or ``"gauss_newton"``.
        lr: Adam's learning rate on the unconstrained ``alpha``, or L-BFGS's first step.
        lr_min: Adam's final learning rate (cosine schedule over ``max_steps``).
        method: hypergradient of Adam and L-BFGS, ``"adjoint"`` (Prop. 1) or ``"explicit"``
            (Eq. 11); Gauss-Newton always uses the adjoint residual Jacobian.
        damping: Gauss-Newton's first Levenberg-Marquardt damping relative to ``max(diag(J^T J))``.
        max_trials: Gauss-Newton trial steps per iteration before it gives up (alpha unchanged).
        cold_check: Gauss-Newton: verify a trial that lowered ``J`` with cold-started solves.
        verify_starts: cold starts per window of Gauss-Newton's final check before stopping and of
            Adam's ``cold_every`` checks (0: no final check; more than 1 needs a two-sided ``s_bar``
            box for the unmeasured states).
        cold_every: Adam: iterations ``cold_every``, ``2 cold_every``, ... (counted from 1) also
            solve every window from ``max(verify_starts, 1)`` cold starts, and each window keeps
            the solution of lower MHE cost (0: never).
        weight_decay: Adam: decoupled (AdamW) weight decay of the neural residual's weights, which pulls
            them towards zero (the physics, for the last layer); the physical parameters and the arrival
            cost are never decayed (0: plain Adam).
        stopping: Gauss-Newton's stopping tests.
        noise_fit: the two-stage start of a gray-box model (`mhe.outer.noise_fit`): before the first
            iteration, solve the windows from ``max(verify_starts, 1)`` cold starts and fit the
            residual to their process noise (off unless ``noise_fit.steps > 0``; any optimizer).
        criterion: what the run optimises: ``"prediction"``, the one-step prediction error of PEM (Eq. 5)
            alone, or ``"simulation"``, PEM followed by the output-error refinement on the free-run error
            of the whole recording (`mhe.pem.simulation_criterion`; physics and output-map
            parameters), both criteria before and after it in the run's metrics.
        simulation: settings of that refinement (`mhe.outer.free_run.OutputErrorSettings`).
    """

    optimizer: str = "adam"
    lr: float = 0.05
    lr_min: float = 5e-4
    method: str = "adjoint"
    damping: float = 1e-3
    max_trials: int = 10
    cold_check: bool = True
    verify_starts: int = 1
    cold_every: int = 0
    weight_decay: float = 0.0
    stopping: GaussNewtonStopping = field(default_factory=GaussNewtonStopping)
    noise_fit: NoiseFitSettings = field(default_factory=NoiseFitSettings)
    criterion: str = "prediction"
    simulation: OutputErrorSettings = field(default_factory=OutputErrorSettings)

    def __post_init__(self) -> None:
        if self.criterion not in CRITERIA:
            raise ValueError(f"outer.criterion must be one of {CRITERIA} (the one-step PEM criterion alone, or PEM then "
                             f"the free-run refinement); got {self.criterion!r}.")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}; got {self.optimizer!r}.")
        if self.method not in HYPERGRADIENTS:
            raise ValueError(f"method must be one of {sorted(HYPERGRADIENTS)}; got {self.method!r}.")
        require([(self.lr > 0, f"outer.lr must be > 0; got {self.lr}."),
                 (0 <= self.lr_min <= self.lr, f"outer.lr_min must lie in [0, lr = {self.lr}]; got {self.lr_min}."),
                 (self.damping > 0, f"outer.damping must be > 0; got {self.damping}."),
                 (self.max_trials >= 1, f"outer.max_trials must be >= 1; got {self.max_trials}."),
                 (self.verify_starts >= 0, f"outer.verify_starts must be >= 0; got {self.verify_starts}."),
                 (self.cold_every >= 0, f"outer.cold_every must be >= 0; got {self.cold_every}.")])
        if self.weight_decay < 0 or (self.weight_decay and self.optimizer != "adam"):
            raise ValueError(f"weight_decay must be >= 0 and is an option of Adam; got weight_decay="
                             f"{self.weight_decay} with optimizer={self.optimizer!r}.")
        if self.cold_every and self.optimizer != "adam":
            raise ValueError(f"cold_every is an option of Adam (Gauss-Newton checks its trials with cold_check); "
                             f"got cold_every={self.cold_every} with optimizer={self.optimizer!r}.")


def _same(value: Tensor) -> Tensor:
    return value


@dataclass(frozen=True)
class Collective:
    """How the processes of a data-parallel run combine their numbers; the identity in one process.

    Attributes:
        reduce: the sum of a tensor over all processes (the same shape on each).
        gather: the rows of a tensor from all processes, rank-major: (R, ...) on each process
            gives (world R, ...).
    """

    reduce: Callable[[Tensor], Tensor] = _same
    gather: Callable[[Tensor], Tensor] = _same


LOCAL = Collective()
"""One process: nothing to sum or gather."""


class PEMLoop:
    """The PEM iterations of Eq. (5) and their state (optimizer, damping, warm starts, counters).

    Args:
        estimator: the MHE whose parameters ``alpha`` are identified.
        solver: solves the windows this process holds at the estimator's current ``alpha``.
        settings: the optimizer and its options.
        max_steps: the iterations of the run (the length of Adam's cosine schedule).
        collective: sums and gathers over processes (`LOCAL` in one process).

    Raises:
        ValueError: for Adam with ``max_steps < 1`` (its schedule needs a length), or a two-stage
            start (``settings.noise_fit.steps > 0``) or weight decay for a model without a neural residual.
    """

    def __init__(self, estimator: MovingHorizonEstimator, solver: WindowSolver, settings: OuterSettings,
                 max_steps: int, collective: Collective = LOCAL) -> None:
        if settings.optimizer == "adam" and max_steps < 1:
            raise ValueError(f"Adam's cosine schedule runs over max_steps iterations, so max_steps must be >= 1 "
                             f"(trainer.max_steps under the CLI); got {max_steps}.")
        net = estimator.model.residual
        if net is None and (settings.noise_fit.steps > 0 or settings.weight_decay > 0):
            raise ValueError(f"outer.noise_fit and outer.weight_decay act on the neural residual, and this model has "
                             f"none; set noise_fit.steps: 0 (got {settings.noise_fit.steps}) and weight_decay: 0 (got "
                             f"{settings.weight_decay}) or add a residual.")
        self.estimator, self.solver, self.settings, self.collective = estimator, solver, settings, collective
        self.optimizer: torch.optim.Optimizer | None = None
        self.schedule: torch.optim.lr_scheduler.LRScheduler | None = None
        if settings.optimizer == "adam":
            decayed = set() if net is None else {id(p) for p in net.parameters()}
            groups = [{"params": [p for p in estimator.parameters() if id(p) not in decayed], "weight_decay": 0.0},
                      {"params": [p for p in estimator.parameters() if id(p) in decayed],
                       "weight_decay": settings.weight_decay}]
            self.optimizer = torch.optim.AdamW([g for g in groups if g["params"]], lr=settings.lr)
            self.schedule = torch.optim.lr_scheduler.CosineAnnealingLR(self.optimizer, max_steps,
                                                                       eta_min=settings.lr_min)
        elif settings.optimizer == "lbfgs":
            self.optimizer = torch.optim.LBFGS(estimator.parameters(), lr=settings.lr, max_iter=1, history_size=20,
                                               line_search_fn="strong_wolfe")
        self.lm = LevenbergMarquardt(settings.damping)
        self.losses: list[float] = []
        self.counters = PEMCounters()
        self.history: list[PEMStep] = []
        self.stop_reason = ""
        self.starts: dict[int, Start | None] = {}
        self._solved: tuple[Tensor, list[int], WindowSolutions] | None = None
        self.noise_fit_report: NoiseFitReport | None = None

    # ----- one iteration ---------------------------------------------------------------------
    def step(self, index: Sequence[int], windows: Windows, rows: int | None = None) -> PEMStep:
        """One PEM iteration over the windows of this process.

        Args:
            index: global indices of ``windows`` (the keys of their warm starts), the same
                windows at every call.
            windows: the windows of this process.
            rows: rows this process contributes to each gather, the same on every process
                (at least ``len(index)``; padded rows count as failed windows). Default ``len(index)``.

        The first iteration of a fresh run (not of a resumed one) begins with the two-stage
        start when ``settings.noise_fit.steps > 0`` (its report in `noise_fit_report`).

        Returns:
            The `PEMStep` (also appended to `history`).

        Raises:
            ValueError: if ``index`` and ``windows`` differ in length or ``rows`` is too small.
        """
        index = [int(i) for i in index]
        rows = len(index) if rows is None else int(rows)
        if len(index) != len(windows) or rows < len(index):
            raise ValueError(f"index needs one entry per window and rows >= len(index); got {len(index)} indices, "
                             f"{len(windows)} windows and rows={rows}.")
        if self.settings.noise_fit.steps > 0 and self.counters.steps == 0 and self.noise_fit_report is None:
            self.noise_fit_report = self._noise_fit(index, windows, rows)
        run = {"adam": self._adam, "lbfgs": self._lbfgs, "gauss_newton": self._gauss_newton}[self.settings.optimizer]
        rec = run(index, windows, rows)
        c = self.counters
        c.steps, c.updates, c.skipped = c.steps + 1, c.updates + int(rec.applied), c.skipped + int(rec.skipped)
        c.failed, c.failed_trials = c.failed + rec.n_failed, c.failed_trials + rec.trial_failed
        self.history.append(rec)
        return rec

    def _noise_fit(self, index: list[int], windows: Windows, rows: int) -> NoiseFitReport:
        """The two-stage start on the solved windows of all processes (each fits the same rows alike)."""
        cold, _ = cold_solve(self.solver, windows, max(self.settings.verify_starts, 1))
        self.starts.update(zip(index, cold.starts))
        ok = self._gather_rows(cold.ok.to(torch.float64), rows) > 0.5
        x, w, u, y, start = (self._gather_rows(v, rows)[ok]
                             for v in (cold.point.x, cold.point.w, windows.u, windows.y, windows.start))
        return fit_to_process_noise(self.estimator, x, w, Windows(u, y, start), self.settings.noise_fit)

    def _gather_rows(self, value: Tensor, rows: int, fill: float = 0.0) -> Tensor:
        """This process's rows ``value`` (one per window, (M, ...)) padded with ``fill`` to ``rows`` and gathered
        over processes, (world rows, ...)."""
        out = value.new_full((rows, *value.shape[1:]), fill)
        out[:len(value)] = value
        return self.collective.gather(out)

    def _solve(self, index: list[int], windows: Windows) -> WindowSolutions:
        sol = self.solver.solve(windows, [self.starts.get(i) for i in index])
        self.starts.update(zip(index, sol.starts))
        return sol

    def _count(self, n: int) -> int:
        return int(self.collective.reduce(torch.tensor(float(n), dtype=torch.float64)))

    def _alpha(self) -> Tensor:
        return parameters_to_vector(self.estimator.parameters()).detach().clone()

    def _set_alpha(self, alpha: Tensor) -> None:
        with torch.no_grad():
            vector_to_parameters(alpha, self.estimator.parameters())

    def _hypergradient(self, sol: WindowSolutions, windows: Windows) -> tuple[Tensor, Tensor, int, int, float]:
        """``dJ/dalpha`` (flat, summed over processes), ``J``, windows used and failed, local time."""
        t0 = time.perf_counter()
        ok, params = sol.ok, list(self.estimator.named_parameters())
        if bool(ok.any()):
            hg = HYPERGRADIENTS[self.settings.method](self.estimator, sol.point[ok].stages(), windows[ok])
            flat, loss = torch.cat([hg.grads[n].reshape(-1) for n, _ in params]), hg.loss.sum()
        else:
            flat = torch.cat([torch.zeros_like(p).reshape(-1) for _, p in params])
            loss = torch.zeros((), dtype=flat.dtype)
        hyper_s = time.perf_counter() - t0
        counts = torch.tensor([float(ok.sum()), float(sol.n_failed)], dtype=flat.dtype)
        reduce = self.collective.reduce
        flat, loss, counts = reduce(flat), reduce(loss), reduce(counts)
        return flat, loss, int(counts[0]), int(counts[1]), hyper_s

    def _write_grad(self, flat: Tensor) -> None:
        for p, g in zip(self.estimator.parameters(), flat.split([p.numel() for p in self.estimator.parameters()])):
            p.grad = g.reshape(p.shape).clone()

    def _adam(self, index: list[int], windows: Windows, rows: int) -> PEMStep:
        sol, st, switched, evaluations = self._solve(index, windows), self.settings, 0, 1
        if st.cold_every and (self.counters.steps + 1) % st.cold_every == 0:
            cold, _ = cold_solve(self.solver, windows, max(st.verify_starts, 1))
            sol, took = lower_cost(self.estimator, windows, sol, cold)
            self.starts.update(zip(index, sol.starts))
            switched, evaluations = self._count(int(took.sum())), 1 + max(st.verify_starts, 1)
        flat, loss, n_used, n_failed, hyper_s = self._hypergradient(sol, windows)
        applied = False
        if n_used > 0:
            if bool(torch.isfinite(flat).all()):
                self._write_grad(flat)
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
                self.schedule.step()
                applied = True
            else:
                log.warning("Non-finite hypergradient; the step is skipped and alpha is left unchanged.")
        return PEMStep(float(loss) if n_used else math.nan, n_used, n_failed, applied, n_used > 0 and not applied,
                       float(flat.norm()), sol.wall_s, hyper_s, _mean_iterations(sol), _kkt_max(sol), evaluations,
                       switched)

    def _lbfgs(self, index: list[int], windows: Windows, rows: int) -> PEMStep:
        trials: list[tuple[float, WindowSolutions, float, float, int, int]] = []

        def closure() -> Tensor:
            sol = self._solve(index, windows)
            flat, loss, n_used, n_failed, hyper_s = self._hypergradient(sol, windows)
            finite = n_used > 0 and bool(torch.isfinite(flat).all()) and bool(torch.isfinite(loss))
            self._write_grad(flat if finite else torch.zeros_like(flat))
            value = float(loss) if finite else math.inf
            trials.append((value, sol, hyper_s, float(flat.norm()) if finite else math.nan, n_used, n_failed))
            return torch.tensor(value, dtype=torch.float64)

        self.optimizer.step(closure)
        loss, sol, _, norm, n_used, n_failed = trials[0]
        applied = loss != math.inf
        if not applied and n_used > 0:
            log.warning("Non-finite hypergradient; the L-BFGS step is skipped and alpha is left unchanged.")
        return PEMStep(loss if applied else math.nan, n_used, n_failed, applied, n_used > 0 and not applied, norm,
                       sum(t[1].wall_s for t in trials), sum(t[2] for t in trials), _mean_iterations(sol),
                       _kkt_max(sol), len(trials))

    def _gauss_newton(self, index: list[int], windows: Windows, rows: int) -> PEMStep:
        est, st = self.estimator, self.settings
        alpha = self._alpha()
        solves: list[WindowSolutions] = []
        if self._solved is not None and self._solved[1] == index and torch.equal(self._solved[0], alpha):
            sol = self._solved[2]
        else:
            sol = self._solve(index, windows)
            solves.append(sol)
        t0 = time.perf_counter()
        rj, ok = self._residual_jacobian(sol, windows, rows)
        hyper_s = time.perf_counter() - t0
        n_used, n_failed, finite = int(ok.sum()), self._count(sol.n_failed), rj.is_finite()
        if n_used > 0 and not self.losses:
            self.losses.append(float(rj.loss.sum()))
        step, switched = None, 0
        if not finite:
            log.warning("Non-finite residual Jacobian; the Gauss-Newton step is skipped and alpha is left unchanged.")
        elif n_used > 0:
            trials: list[WindowSolutions] = []
            taken: list[Tensor] = []

            def loss_of(s: WindowSolutions) -> Tensor:
                loss = torch.where(s.ok, prediction_loss(est, s.point.stages(), windows)[0], math.nan)
                return self._gather_rows(loss, rows, math.nan)

            def evaluate(delta: Tensor) -> Tensor:
                self._set_alpha(alpha + delta)
                trials.append(self.solver.solve(windows, [self.starts.get(i) for i in index]))
                solves.append(trials[-1])
                return loss_of(trials[-1])

            def check() -> Tensor:
                solves.append(self.solver.solve(windows))
                trials[-1], took = lower_cost(est, windows, trials[-1], solves[-1])
                taken.append(took)
                return loss_of(trials[-1])

            step = levenberg_marquardt_step(self.lm, rj, ok, evaluate, st.max_trials, check if st.cold_check else None)
            if step.delta is not None:
                self.starts.update(zip(index, trials[-1].starts))
                self._solved = (self._alpha(), index, trials[-1])
                after = loss_of(trials[-1])
                self.losses.append(float(after[ok & torch.isfinite(after)].sum()))
                switched = self._count(int(taken[-1].sum())) if st.cold_check else 0
            else:
                self._set_alpha(alpha)
        applied = step is not None and step.delta is not None
        verify_switched = extra = 0
        if finite and n_used > 0:
            self.stop_reason = st.stopping.reason(self.losses, step.delta if applied else None, self.lm)
            if self.stop_reason and st.verify_starts > 0:
                verify_switched = self._final_check(index, windows, rows, self._solved[2] if applied else sol, solves)
                extra = st.verify_starts - 1  # the cold starts of the final check are one entry of ``solves``
        return PEMStep(float(rj.loss.sum()) if n_used else math.nan, n_used, n_failed, applied, not finite,
                       float(rj.gradient.norm()), sum(s.wall_s for s in solves), hyper_s, _mean_iterations(sol),
                       _kkt_max(sol), len(solves) + extra, switched, 0 if step is None else step.check_rejected,
                       self.stop_reason, verify_switched, self._count(sum(s.n_failed for s in solves if s is not sol)))

    def _residual_jacobian(self, sol: WindowSolutions, windows: Windows, rows: int) -> tuple[ResidualJacobian, Tensor]:
        """The residual Jacobian of all processes' windows (zero rows where failed or padded) and their mask."""
        est = self.estimator
        n_alpha = sum(p.numel() for p in est.parameters())
        res = torch.zeros(len(windows), est.model.n_y, dtype=torch.float64)
        jac = torch.zeros(len(windows), est.model.n_y, n_alpha, dtype=torch.float64)
        if bool(sol.ok.any()):
            local = residual_jacobian(est, sol.point[sol.ok].stages(), windows[sol.ok])
            at = torch.nonzero(sol.ok).flatten()
            res[at], jac[at] = local.residual, local.jacobian
        ok = self._gather_rows(sol.ok.to(torch.float64), rows) > 0.5
        return ResidualJacobian(self._gather_rows(res, rows), self._gather_rows(jac, rows)), ok

    def _final_check(self, index: list[int], windows: Windows, rows: int, current: WindowSolutions,
                     solves: list[WindowSolutions]) -> int:
        """Compare ``current`` with `cold_solve`; a switch in any window of any process cancels the stop.

        Returns:
            The windows (over all processes) that took a cold-started solution.
        """
        est = self.estimator
        cold, _ = cold_solve(self.solver, windows, self.settings.verify_starts)
        solves.append(cold)
        best, took = lower_cost(est, windows, current, cold)
        switched = self._count(int(took.sum()))
        if switched == 0:
            return 0
        log.info("Final check: %d windows reached a lower MHE cost from cold starts; Gauss-Newton goes on.", switched)
        self.starts.update(zip(index, best.starts))
        self._solved = (self._alpha(), index, best)
        loss = torch.where(best.ok, prediction_loss(est, best.point.stages(), windows)[0], 0.0)
        self.losses[-1] = float(self._gather_rows(loss, rows).sum())
        self.stop_reason = ""
        return switched

    # ----- end of a run and checkpoints ----------------------------------------------------------
    def result(self, wall_s: float, rel_errors: Mapping[str, float]) -> PEMResult:
        """The `PEMResult` of the iterations so far.

        Args:
            wall_s: wall time of the run in seconds.
            rel_errors: relative errors of the identified parameters
                (`mhe.identification.IdentificationProblem.relative_errors`).
        """
        loss = self.history[-1].loss if self.history else math.nan
        return PEMResult(loss, self.stop_reason, PEMCounters(**asdict(self.counters)), wall_s,
                         self.estimator.parameter_values(), dict(rel_errors))

    def state_dict(self) -> dict:
        """Optimizer, schedule, damping, the ``J`` of the accepted steps, counters and stop reason.

        The warm starts are not saved: after a resume each window starts cold once.
        """
        return {"optimizer": None if self.optimizer is None else self.optimizer.state_dict(),
                "schedule": None if self.schedule is None else self.schedule.state_dict(),
                "levenberg_marquardt": {"mu": self.lm.mu, "nu": self.lm.nu, "scale": self.lm.scale},
                "losses": list(self.losses), "counters": asdict(self.counters), "stop_reason": self.stop_reason}

    def load_state_dict(self, state: dict) -> None:
        """Restore what `state_dict` saved, so a resumed run goes on where it stopped."""
        if self.optimizer is not None and state.get("optimizer") is not None:
            self.optimizer.load_state_dict(state["optimizer"])
        if self.schedule is not None and state.get("schedule") is not None:
            self.schedule.load_state_dict(state["schedule"])
        lm = state["levenberg_marquardt"]
        self.lm.mu, self.lm.nu, self.lm.scale = lm["mu"], lm["nu"], lm["scale"]
        self.losses, self.counters = list(state["losses"]), PEMCounters(**state["counters"])
        self.stop_reason = state["stop_reason"]


def _mean_iterations(sol: WindowSolutions) -> float:
    return float(sol.iterations.double().mean())


def _kkt_max(sol: WindowSolutions) -> float:
    return float(sol.kkt_residual[sol.ok].max()) if bool(sol.ok.any()) else math.nan

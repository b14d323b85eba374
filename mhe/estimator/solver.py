"""Solve the M independent MHE windows, in-process or in a process pool, and verify each solution.

Parallelism (measured in ``benchmarks/mhe/pem_iteration.py``, see RESULTS.md): a
persistent pool of ``workers`` processes, each holding its own CasADi model (and, for
neural models, its own L4CasADi library in ``build_dir/worker-<pid>``), receives
contiguous chunks of windows with their warm starts and the current ``alpha``;
``workers=1`` solves in the calling process with the same code. Within a process,
``batch`` windows can be stacked into one NLP ("one batched problem"). The default is
one window per NLP: a failed window then fails alone and keeps its own warm start, and
the IPOPT iteration count stays that of a single window. The batched NLP was ~1.4x
faster per iteration at M = 200 on the 2 shared cores measured, but its build time grows
with M and its iteration count is the worst window's (5 -> 12 at M = 200).

After IPOPT, each solution is polished by Newton steps on the float64 torch KKT system
(`mhe.estimator.kkt.refine`); a window counts as failed, and is dropped from the step with a
logged warning, when IPOPT does not succeed, returns non-finite numbers, or its
relative KKT residual after refinement exceeds ``settings.kkt_tol``.

The window problems are nonconvex, and a warm start follows the local minimum it came
from. `lower_cost` keeps, per window, whichever of two verified solutions (e.g. the
warm-started one and a cold start from `MovingHorizonEstimator.initial_point`) has the
lower MHE cost (4a), i.e. the better approximation of the ``argmin`` of Eq. (5b).
`cold_solve` solves from several cold starts (the unmeasured states of the first guess at
``s_bar``, of the others spread over the ``s_bar`` box) and keeps the lowest cost per window:
one cold start from ``s_bar`` is not always enough (racing benchmark: in 2 of 199 windows it
ended at an MHE cost of 1747-2252 where another start reached 9-12).
`propagated_solve` then restarts each window from its predecessor's estimate, carried through
the model, as an MHE running along the recording would (the first window from its successor's):
where the vehicle's speed crosses zero (BayesRace's ETHZMobil spin-out) no cold start reached the
minimum that this start reaches (MHE cost 916,033 against 22.4 in one window).
"""
from __future__ import annotations

import logging
import multiprocessing as mp
import os
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from ..models.casadi_model import CasadiDynamics
from ..models.checks import require
from ..data.windows import Windows
from .kkt import prediction_loss, refine
from .point import KKTPoint
from .problem import MHEProblem, MHESolution, OuterValues
from .estimator import MovingHorizonEstimator

__all__ = ["SolverSettings", "WindowSolutions", "WindowSolver", "lower_cost", "cold_guesses", "cold_solve",
           "propagated_guess", "propagated_solve", "lowest_cost_solve", "solved_loss"]

log = logging.getLogger(__name__)

Start = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class SolverSettings:
    """How the windows are solved (not what is solved): processes, build folder, windows per NLP.

    Attributes:
        workers: solver processes (1: in the calling process, no pool).
        build_dir: folder of L4CasADi's generated code (per worker and per DDP process a subfolder).
        batch: windows stacked into one NLP (1: one NLP per window).
        num_threads: torch intra-op threads of the calling process, set when the solver is
            made (None leaves torch's setting); the per-window tensors are small, so one
            thread is fastest and does not stall when other processes load the cores.
    """

    workers: int = 1
    build_dir: str = "build/l4casadi/pem"
    batch: int = 1
    num_threads: int | None = 1

    def __post_init__(self) -> None:
        require([(self.workers >= 1, f"solver.workers must be >= 1; got {self.workers}."),
                 (self.batch >= 1, f"solver.batch must be >= 1; got {self.batch}."),
                 (self.num_threads is None or self.num_threads >= 1,
                  f"solver.num_threads must be >= 1 or null; got {self.num_threads}.")])


@dataclass(frozen=True)
class WindowSolutions:
    """Verified MHE solutions of M windows.

    Attributes:
        point: refined KKT points; failed windows keep their initial guess, shape M.
        ok: which windows succeeded, bool (M,).
        starts: warm starts for the next solve (None for a failed window: it restarts cold).
        status: IPOPT's return status per window.
        iterations: IPOPT iterations per window, (M,).
        kkt_residual: relative torch KKT residual after refinement (`mhe.estimator.kkt.refine`), (M,).
        wall_s: wall time of the whole solve (IPOPT and refinement), seconds.
        ipopt_s: the part of ``wall_s`` spent in the (possibly parallel) IPOPT solves.
    """

    point: KKTPoint
    ok: Tensor
    starts: list[Start | None]
    status: list[str]
    iterations: Tensor
    kkt_residual: Tensor
    wall_s: float
    ipopt_s: float

    @property
    def n_failed(self) -> int:
        """Number of failed windows."""
        return int((~self.ok).sum())


class _Problems:
    """The NLPs of one process: a shared CasADi model and one `MHEProblem` per batch size."""

    def __init__(self, estimator: MovingHorizonEstimator, build_dir: Path, name: str, batch: int) -> None:
        self.estimator, self.batch = estimator, batch
        self.dynamics = CasadiDynamics(estimator.model, build_dir, name)
        self.problems: dict[int, MHEProblem] = {}

    def get(self, size: int) -> MHEProblem:
        if size not in self.problems:
            self.problems[size] = MHEProblem(self.estimator, self.dynamics, size)
        return self.problems[size]

    def solve(self, values: OuterValues, u: np.ndarray, y: np.ndarray, starts: list[Start | None],
              guesses: list[Start]) -> list[MHESolution]:
        out = []
        for a in range(0, u.shape[0], self.batch):
            b = min(a + self.batch, u.shape[0])
            prob = self.get(b - a)
            prob.set_outer(values)
            full = [starts[i] if starts[i] is not None else prob.start_from(u[i], *guesses[i]) for i in range(a, b)]
            out += prob.solve(u[a:b], y[a:b], full)
        return out


_WORKER: dict[str, _Problems] = {}


def _init_worker(estimator: MovingHorizonEstimator, build_dir: str, name: str, batch: int) -> None:
    torch.set_num_threads(1)
    _WORKER["problems"] = _Problems(estimator, Path(build_dir) / f"worker-{os.getpid()}", name, batch)


def _solve_chunk(values: OuterValues, u: np.ndarray, y: np.ndarray, starts: list[Start | None],
                 guesses: list[Start]) -> list[MHESolution]:
    return _WORKER["problems"].solve(values, u, y, starts, guesses)


class WindowSolver:
    """Solves the MHE windows of one estimator; parallel over windows with ``workers > 1``.

    Args:
        estimator: the torch MHE; the solver reads its current ``alpha`` at every `solve`.
        build_dir: L4CasADi build folder (per worker a subfolder).
        workers: processes (1: in-process, no pool).
        name: name of the compiled residual library.
        batch: windows stacked into one NLP (1: one NLP per window).

    Attributes:
        estimator, workers, build_dir, batch: the arguments (a solver for the same estimator after its NLP changed,
            e.g. a trust envelope recorded, is built with them in a subfolder of ``build_dir``).

    Raises:
        ValueError: if ``workers < 1`` or ``batch < 1``.
    """

    def __init__(self, estimator: MovingHorizonEstimator, build_dir: str | Path, workers: int = 1,
                 name: str = "residual", batch: int = 1) -> None:
        if workers < 1 or batch < 1:
            raise ValueError(f"workers and batch must be >= 1; got workers={workers}, batch={batch}.")
        self.estimator, self.workers, self.build_dir, self.batch = estimator, workers, Path(build_dir), batch
        self._pool: ProcessPoolExecutor | None = None
        self._local: _Problems | None = None
        if workers == 1:
            self._local = _Problems(estimator, Path(build_dir) / "local", name, batch)
        else:
            self._pool = ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn"), initializer=_init_worker,
                                             initargs=(estimator, str(build_dir), name, batch))
        self._values: OuterValues | None = None

    @classmethod
    def from_settings(cls, estimator: MovingHorizonEstimator, settings: SolverSettings,
                      build_dir: str | Path | None = None) -> "WindowSolver":
        """The solver of ``settings``; ``build_dir`` overrides ``settings.build_dir`` (e.g. one folder per process).

        Sets the process's torch threads (``settings.num_threads``). Both PEM front-ends make
        their solver here, so they compute with the same settings.
        """
        if settings.num_threads is not None:
            torch.set_num_threads(settings.num_threads)
        return cls(estimator, settings.build_dir if build_dir is None else build_dir, workers=settings.workers,
                   batch=settings.batch)

    def _snapshot(self) -> OuterValues:
        new = OuterValues.of(self.estimator, 0 if self._values is None else self._values.version)
        old = self._values
        same = old is not None and all(np.array_equal(getattr(old, f), getattr(new, f))
                                       for f in ("arrival_mean", "arrival_precision", "physics", "output"))
        if same and old.residual is not None:
            same = all(torch.equal(old.residual[k], new.residual[k]) for k in old.residual)
        if not same:
            new = replace(new, version=new.version + 1)
            self._values = new
        return self._values

    def solve(self, windows: Windows, starts: list[Start | None] | None = None,
              guess: KKTPoint | None = None) -> WindowSolutions:
        """Solve, refine and verify the MHE of every window at the estimator's current ``alpha``.

        Args:
            windows: the M windows.
            starts: per window a warm start from a previous `WindowSolutions.starts`, or None
                (start from ``guess``).
            guess: the cold start of the M windows (default `MovingHorizonEstimator.initial_point`).

        Returns:
            The `WindowSolutions`.
        """
        t0 = time.perf_counter()
        m, est = len(windows), self.estimator
        starts = [None] * m if starts is None else list(starts)
        if len(starts) != m:
            raise ValueError(f"starts must hold one entry per window ({m}); got {len(starts)}.")
        guess = est.initial_point(windows) if guess is None else guess
        gv, gmu = guess.primal().numpy(), guess.dual().numpy()
        guesses = [(gv[i], gmu[i]) for i in range(m)]
        u, y = windows.u.numpy(), windows.y.numpy()
        values = self._snapshot()
        if self._pool is None:
            sols = self._local.solve(values, u, y, starts, guesses)
        else:
            bounds = np.linspace(0, m, min(self.workers, m) + 1).astype(int)
            futures = [self._pool.submit(_solve_chunk, values, u[a:b], y[a:b], starts[a:b], guesses[a:b])
                       for a, b in zip(bounds[:-1], bounds[1:])]
            sols = [s for f in futures for s in f.result()]
        ipopt_s = time.perf_counter() - t0
        ok = torch.tensor([s.success for s in sols])
        v = torch.tensor(np.stack([s.v if s.success else guesses[i][0] for i, s in enumerate(sols)]))
        mu = torch.tensor(np.stack([s.mu if s.success else guesses[i][1] for i, s in enumerate(sols)]))
        z = KKTPoint.from_flat(v, mu, est.layout).stages()
        residual = torch.full((m,), float("inf"), dtype=z.dtype)
        if bool(ok.any()):
            z_ok, res_ok = refine(est, z[ok], windows[ok], est.settings.refine_steps)
            z[ok] = torch.where(torch.isfinite(z_ok), z_ok, z[ok])
            residual[ok] = torch.nan_to_num(res_ok, nan=float("inf"))
        ok = ok & (residual <= est.settings.kkt_tol)
        new_starts = [s.start if s.success else None for s in sols]
        status = [s.status for s in sols]
        if not bool(ok.all()):
            reasons = Counter(status[i] if sols[i].success is False else "kkt residual above kkt_tol"
                              for i in torch.nonzero(~ok).flatten().tolist())
            log.warning("%d of %d MHE windows failed and are dropped from this step: %s", int((~ok).sum()), m,
                        dict(reasons))
        return WindowSolutions(KKTPoint.from_stages(z, est.layout), ok, new_starts, status,
                               torch.tensor([s.iterations for s in sols]), residual, time.perf_counter() - t0,
                               ipopt_s)

    def close(self) -> None:
        """Shut the worker pool down (no-op in-process)."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def __enter__(self) -> "WindowSolver":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def solved_loss(estimator: MovingHorizonEstimator, windows: Windows, solutions: WindowSolutions) -> float:
    """``J`` of Eq. (9), ``sum_i 1/2 ||r_i||^2``, over the windows whose solve succeeded.

    Args:
        estimator: the MHE the windows were solved with (its current ``alpha``).
        windows: the M windows.
        solutions: their solutions.

    Returns:
        ``J`` (output units squared; 0.0 when no window solved).
    """
    return float(prediction_loss(estimator, solutions.point.stages(), windows)[0][solutions.ok].sum())


def lower_cost(estimator: MovingHorizonEstimator, windows: Windows, first: WindowSolutions,
               second: WindowSolutions, rtol: float = 1e-9) -> tuple[WindowSolutions, Tensor]:
    """Per window the solution with the lower MHE cost (4a); ``first`` unless ``second`` is clearly lower.

    A window takes ``second`` where that solve succeeded and either ``first`` failed or
    ``second``'s cost is below ``first``'s by more than ``rtol`` relative (ties keep ``first``,
    e.g. the warm-started branch).

    Args:
        estimator: the MHE (its current ``alpha`` must be the one both solutions were solved at).
        windows: the M windows.
        first: solutions of the M windows (e.g. warm-started).
        second: solutions of the same windows (e.g. cold-started).
        rtol: relative cost difference below which ``first`` is kept.

    Returns:
        The combined `WindowSolutions` (point, status, starts, iterations and KKT residual of
        the chosen solve per window; ``wall_s`` and ``ipopt_s`` summed) and the bool mask (M,)
        of the windows that took ``second``.
    """
    z1, z2 = first.point.stages(), second.point.stages()
    with torch.no_grad():
        c1, c2 = estimator.objective(z1, windows), estimator.objective(z2, windows)
    better = c2 < c1 - rtol * c1.abs()
    take = second.ok & (~first.ok | better)
    pick = take.tolist()
    z = torch.where(take[:, None, None], z2, z1)
    return WindowSolutions(
        KKTPoint.from_stages(z, estimator.layout), first.ok | second.ok,
        [b if t else a for a, b, t in zip(first.starts, second.starts, pick)],
        [b if t else a for a, b, t in zip(first.status, second.status, pick)],
        torch.where(take, second.iterations, first.iterations), torch.where(take, second.kkt_residual,
                                                                             first.kkt_residual),
        first.wall_s + second.wall_s, first.ipopt_s + second.ipopt_s), take


def cold_guesses(estimator: MovingHorizonEstimator, windows: Windows, count: int) -> list[KKTPoint]:
    """``count`` cold starts: `MovingHorizonEstimator.initial_point`, then with the unmeasured states moved.

    Guess ``k = 1..count-1`` puts every unmeasured state, at all stages, at the fraction
    ``(2k - 1) / (2 (count - 1))`` of its ``s_bar`` bound (e.g. 1/4 and 3/4 for ``count = 3``);
    the measured states come from the data as in ``initial_point``.

    Raises:
        ValueError: if ``count < 1``, or ``count > 1`` while an unmeasured state's ``s_bar`` is
            not bounded on both sides (see `mhe.estimator.arrival.arrival_bounds`).
    """
    first = estimator.initial_point(windows)
    hidden = [j for j in range(estimator.model.n_x) if j not in estimator.model.measured]
    bounds = estimator.arrival_mean_bounds
    open_ = [j for j in hidden if bounds[j].lower is None or bounds[j].upper is None]
    if count < 1 or (count > 1 and open_):
        raise ValueError(f"count must be >= 1, and more than one cold start needs two-sided s_bar bounds of the "
                         f"unmeasured states (data.problem.arrival.box, mhe.estimator.arrival.arrival_bounds); got count={count}, "
                         f"unbounded states {open_}.")
    out = [first]
    for k in range(1, count):
        x = first.x.clone()
        for j in hidden:
            b = bounds[j]
            x[..., j] = b.lower + (b.upper - b.lower) * (2 * k - 1) / (2 * (count - 1))
        out.append(KKTPoint(x, first.w, first.eta, first.mu_w, first.mu_eta))
    return out


def cold_solve(solver: WindowSolver, windows: Windows, count: int = 1) -> tuple[WindowSolutions, Tensor]:
    """Solve the windows from the ``count`` `cold_guesses` and keep the lowest MHE cost per window.

    Returns:
        The combined `WindowSolutions` and the index (M,) of the guess each window kept.
    """
    est = solver.estimator
    guesses = cold_guesses(est, windows, count)
    best = solver.solve(windows, guess=guesses[0])
    which = torch.zeros(len(windows), dtype=torch.long)
    for k, guess in enumerate(guesses[1:], start=1):
        best, took = lower_cost(est, windows, best, solver.solve(windows, guess=guess))
        which[took] = k
    return best, which


def propagated_guess(estimator: MovingHorizonEstimator, windows: Windows, solutions: WindowSolutions) -> KKTPoint:
    """A start for every window from the estimate of a neighbouring window: the one before it, propagated
    through the model, or else the one after it.

    Windows must come from one recording (``Windows.start`` indexes it). The predecessor of
    window ``i`` is the window with the latest start ``s_j < s_i <= s_j + N`` that solved; the
    guess takes the unmeasured states at ``s_i`` from its estimate and simulates the model over
    window ``i`` with the recorded inputs and zero process noise. A window without one takes its
    successor, the window with the earliest start ``s_i < s_j <= s_i + N`` that solved: the
    unmeasured states from ``s_j`` on are the successor's estimate, those before it its estimate
    at ``s_j`` (explicit simulation backwards in time diverges). The measured states of all stages
    come from the data as in `MovingHorizonEstimator.initial_point`; a window with neither
    neighbour gets ``initial_point``.

    Args:
        estimator: the MHE (float64).
        windows: the M windows.
        solutions: verified solutions of the same windows (e.g. from `cold_solve`).

    Returns:
        The `KKTPoint` guess of the M windows: states (M, N + 1, n_x), zero noise and multipliers.
    """
    first = estimator.initial_point(windows)
    model, n = estimator.model, windows.horizon
    measured = list(model.measured)
    hidden = [j for j in range(model.n_x) if j not in measured]
    start = windows.start.long()
    order = torch.argsort(start, stable=True)
    earlier, later = order[:-1], order[1:]
    near = (start[earlier] < start[later]) & (start[later] <= start[earlier] + n)
    pred, succ = torch.full_like(start, -1), torch.full_like(start, -1)
    forward, backward = near & solutions.ok[earlier], near & solutions.ok[later]
    pred[later[forward]] = earlier[forward]
    succ[earlier[backward]] = later[backward]
    x = first.x.clone()
    if not hidden:
        return first
    with torch.no_grad():
        has = (pred >= 0).nonzero().flatten()
        if len(has):
            j = pred[has]
            state = solutions.point.x[j, start[has] - start[j]].clone()
            state[:, measured] = first.x[has, 0][:, measured]
            path, w = [state], state.new_zeros(len(has), model.n_w)
            for k in range(n):
                path.append(model.step(path[-1], windows.u[has, k], w))
            sub = x[has]
            sub[..., hidden] = torch.stack(path, dim=1)[..., hidden]
            x[has] = sub
        for i in ((pred < 0) & (succ >= 0)).nonzero().flatten().tolist():
            j, off = int(succ[i]), int(start[succ[i]] - start[i])
            x[i, off:, hidden] = solutions.point.x[j, : n + 1 - off][:, hidden]
            x[i, :off, hidden] = solutions.point.x[j, 0, hidden]
    return KKTPoint(x, first.w, first.eta, first.mu_w, first.mu_eta)


def propagated_solve(solver: WindowSolver, windows: Windows, best: WindowSolutions,
                     passes: int = 3) -> tuple[WindowSolutions, int]:
    """Improve ``best`` by solving from `propagated_guess` until no window's MHE cost falls.

    Each pass solves every window from the estimates of the current ``best`` and keeps the lower
    cost per window (`lower_cost`); a pass repairs the window after each repaired one, so a run of
    ``r`` consecutive windows in a wrong local minimum needs ``r`` passes.

    Args:
        solver: the window solver (its estimator's current ``alpha``).
        windows: the M windows of one recording.
        best: verified solutions of the same windows.
        passes: the most passes, >= 1.

    Returns:
        The combined `WindowSolutions` and the number of windows that took a propagated start.

    Raises:
        ValueError: if ``passes < 1``.
    """
    if passes < 1:
        raise ValueError(f"passes must be >= 1; got {passes}.")
    taken = 0
    for _ in range(passes):
        guess = propagated_guess(solver.estimator, windows, best)
        best, took = lower_cost(solver.estimator, windows, best, solver.solve(windows, guess=guess))
        if not bool(took.any()):
            break
        taken += int(took.sum())
    return best, taken


def lowest_cost_solve(solver: WindowSolver, windows: Windows, starts: int, warm: list[Start | None] | None = None,
                      passes: int = 0) -> WindowSolutions:
    """Each window's lowest-cost MHE solution of ``starts`` cold starts (`cold_solve`), the ``warm`` starts if
    given (kept on ties), then up to ``passes`` passes of `propagated_solve` (0: none): how a trained model's
    windows are solved to score it (``torch-ude validate``, the benchmarks' one-step errors).

    Args:
        solver: the window solver (its estimator's current ``alpha``).
        windows: the M windows (of one recording when ``passes > 0``).
        starts: cold starts per window, >= 1.
        warm: per window a warm start or None (start cold), or None for no warm solve.
        passes: the most passes of propagated starts, >= 0.

    Returns:
        The combined `WindowSolutions`.
    """
    best = cold_solve(solver, windows, starts)[0]
    if warm is not None:
        best = lower_cost(solver.estimator, windows, solver.solve(windows, warm), best)[0]
    if passes:
        best = propagated_solve(solver, windows, best, passes)[0]
    return best

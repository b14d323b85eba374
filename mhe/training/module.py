"""The outer PEM loop (Eq. 5) as a LightningModule with manual optimization.

The data module (e.g. `mhe.training.data.RacingWindows`) provides ``windows``,
``horizon`` and optionally ``truth`` (true physical values, for logging errors); its
items are window indices, so under DDP every process solves and differentiates its own
shard of windows. `training_step` = one PEM iteration: solve the local MHE windows
(warm-started), drop failed ones, compute the local ``J`` and ``dJ/dalpha``
(adjoint-VJP), **sum** them over processes (``J`` is a sum over windows, Eq. 9), then
every process applies the same Adam step unless the summed gradient is non-finite.

With ``optimizer="gauss_newton"`` a step is one Levenberg-Marquardt iteration
(`mhe.gauss_newton.levenberg_marquardt_step`): every process computes the residual
Jacobian rows of its windows, the rows are **gathered** so that every process solves the
same damped least-squares problem, and each trial step re-solves the local windows and
gathers their ``J^(i)``; with ``cold_check`` a trial that lowered ``J`` is re-solved from
cold starts on every process and accepted only if ``J`` of the per-window lower-cost
solutions is lower too. When a `mhe.gauss_newton.GaussNewtonStopping` test fires (the same
decision on every process, from gathered numbers) and no window reaches a lower MHE cost
from ``verify_starts`` cold starts (`mhe.solver.cold_solve`; otherwise those windows switch
and the iterations go on), the module sets ``trainer.should_stop``; ``max_steps`` stays the
cap. The dense step costs O(M n_y n_alpha^2), so this is for physics
and small gray-box models.

``arrival_box`` bounds ``s_bar`` and ``sigma`` (`mhe.arrival.arrival_bounds`): one entry per
state, ``[lo, hi]`` or null for a measured state whose range comes from the data.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path

import lightning as L
import torch
from torch import Tensor
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from ..arrival import arrival_bounds
from ..estimator import MHESettings, MovingHorizonEstimator
from ..gauss_newton import (GaussNewtonStopping, LevenbergMarquardt, ResidualJacobian, levenberg_marquardt_step,
                            residual_jacobian)
from ..kkt import prediction_loss
from ..model import NeuralResidual, PhysicsField, StateSpaceModel
from ..pem import HYPERGRADIENTS, apply_hypergradient, hypergradient_step
from ..solver import Start, WindowSolutions, WindowSolver, cold_solve, lower_cost
from ..windows import Windows
from .outputs import write_pem_outputs

__all__ = ["PEMModule"]

log = logging.getLogger(__name__)


class _IterationCounter(torch.optim.Optimizer):
    """A no-op optimizer for the Gauss-Newton path, which sets ``alpha`` itself.

    Lightning counts ``trainer.global_step`` (and so ``max_steps``) in optimizer steps;
    stepping this once per Levenberg-Marquardt iteration keeps that count.
    """

    def __init__(self, params) -> None:
        super().__init__(params, {})

    def step(self, closure=None) -> None:
        return None


class PEMModule(L.LightningModule):
    """PEM-MHE identification of physics, neural or gray-box models.

    Args:
        physics: the known physics with its start values (None: neural only).
        residual_width: hidden width of a neural residual (None: physics only).
        residual_in_scale: typical magnitudes of ``[x, u]`` for the residual.
        residual_out_scale: typical magnitudes of the residual ``dx/dt``.
        n_x: state dimension (needed without physics).
        n_u: input dimension (needed without physics).
        measured: measured state indices (C selects them).
        dt: sample time in seconds.
        process_std: MHE weight ``Q = diag(q^2)`` (a tuning choice).
        measurement_std: MHE weight ``R = diag(r^2)``.
        arrival_mean: start of ``s_bar``.
        arrival_std: start of ``sigma`` (Sigma = diag(sigma^2)).
        arrival_box: per state ``[lo, hi]`` of ``s_bar`` or None (a measured state: the range
            of its output in the data); None for the whole list leaves ``s_bar`` unbounded and
            ``sigma = softplus(rho)``.
        arrival_margin: widening of each ``s_bar`` box on both sides (fraction of its width).
        arrival_std_range: ``sigma`` within these multiples of the ``s_bar`` box width.
        lr: Adam's learning rate on the unconstrained parameters.
        lr_min: final learning rate of the cosine schedule over ``trainer.max_steps``.
        method: hypergradient, ``"adjoint"`` (Prop. 1) or ``"explicit"`` (Eq. 11), for Adam.
        optimizer: ``"adam"`` or ``"gauss_newton"`` (Levenberg-Marquardt; ``lr`` unused).
        damping: Gauss-Newton's first damping relative to ``max(diag(J^T J))``.
        max_trials: Gauss-Newton trial steps per iteration.
        cold_check: Gauss-Newton: verify a trial that lowered ``J`` with cold-started solves.
        ftol: Gauss-Newton stops when ``J`` fell by less than ``ftol * J`` over ``patience``
            accepted steps (0: off).
        patience: accepted steps of the ``ftol`` test.
        xtol: Gauss-Newton stops after an accepted step with all components below ``xtol``.
        max_damping: Gauss-Newton stops when ``mu > max_damping * max(diag(J^T J))``.
        verify_starts: Gauss-Newton: cold starts per window of the final check before stopping
            (0: none; more than 1 needs ``arrival_box``).
        workers: MHE solver processes per training process.
        build_dir: L4CasADi build folder (one subfolder per process).
        max_iter: IPOPT iteration limit.
        refine_steps: torch Newton steps after each solve.
        kkt_tol: relative KKT residual above which a window counts as failed.
    """

    def __init__(self, physics: PhysicsField | None = None, residual_width: int | None = None,
                 residual_in_scale: list[float] | None = None, residual_out_scale: list[float] | None = None,
                 n_x: int | None = None, n_u: int | None = None, measured: list[int] = (0,), dt: float = 0.02,
                 process_std: list[float] = (1.0,), measurement_std: list[float] = (1.0,),
                 arrival_mean: list[float] = (0.0,), arrival_std: list[float] = (1.0,),
                 arrival_box: list[list[float] | None] | None = None, arrival_margin: float = 0.1,
                 arrival_std_range: list[float] = (0.05, 10.0), lr: float = 0.05,
                 lr_min: float = 5e-4, method: str = "adjoint", optimizer: str = "adam", damping: float = 1e-3,
                 max_trials: int = 10, cold_check: bool = True, ftol: float = 1e-4, patience: int = 3,
                 xtol: float = 1e-6, max_damping: float = 1e8, verify_starts: int = 1, workers: int = 1,
                 build_dir: str = "build/l4casadi/pem", max_iter: int = 200, refine_steps: int = 2,
                 kkt_tol: float = 1e-8) -> None:
        super().__init__()
        if method not in HYPERGRADIENTS:
            raise ValueError(f"method must be one of {sorted(HYPERGRADIENTS)}; got {method!r}.")
        if optimizer not in ("adam", "gauss_newton") or max_trials < 1 or verify_starts < 0:
            raise ValueError(f"optimizer must be 'adam' or 'gauss_newton', max_trials >= 1 and verify_starts >= 0; "
                             f"got {optimizer!r}, {max_trials} and {verify_starts}.")
        self.save_hyperparameters(ignore=["physics"])
        self.automatic_optimization = False
        residual = None
        nx = physics.n_x if physics is not None else n_x
        nu = physics.n_u if physics is not None else n_u
        if residual_width is not None:
            residual = NeuralResidual(nx, nu, residual_width, residual_in_scale, residual_out_scale)
        self.model = StateSpaceModel(physics, residual, dt=dt, measured=measured, n_x=n_x, n_u=n_u)
        self.estimator: MovingHorizonEstimator | None = None
        self.solver: WindowSolver | None = None
        self.starts: dict[int, Start | None] = {}
        self.totals = {"failed": 0, "failed_trials": 0, "skipped": 0, "updates": 0}
        self.lm = LevenbergMarquardt(damping)
        self.stopping = GaussNewtonStopping(ftol, patience, xtol, max_damping)
        self.losses: list[float] = []
        self.stop_reason = ""
        self._solved: tuple[Tensor, list[int], WindowSolutions] | None = None
        self._t0 = 0.0
        self.last_loss = float("nan")

    def setup(self, stage: str) -> None:
        if self.estimator is not None:
            return
        dm = self.trainer.datamodule
        dm.setup(stage)
        hp = self.hparams
        settings = MHESettings(dm.horizon, tuple(hp.process_std), tuple(hp.measurement_std), max_iter=hp.max_iter,
                               refine_steps=hp.refine_steps, kkt_tol=hp.kkt_tol)
        bounds: tuple = (None, None)
        if hp.arrival_box is not None:
            if len(hp.arrival_box) != self.model.n_x:
                raise ValueError(f"arrival_box needs one entry ([lo, hi] or null) per state, {self.model.n_x}; got "
                                 f"{hp.arrival_box}.")
            hidden = {j: box for j, box in enumerate(hp.arrival_box) if box is not None}
            bounds = arrival_bounds(dm.windows, self.model, hidden, hp.arrival_margin, hp.arrival_std_range)
        self.estimator = MovingHorizonEstimator(self.model, settings, hp.arrival_mean, hp.arrival_std, *bounds)

    def configure_optimizers(self):
        if self.hparams.optimizer == "gauss_newton":
            return _IterationCounter(self.estimator.parameters())
        opt = torch.optim.Adam(self.estimator.parameters(), lr=self.hparams.lr)
        steps = max(int(self.trainer.max_steps), 1)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps, eta_min=self.hparams.lr_min)
        return {"optimizer": opt, "lr_scheduler": sched}

    def on_train_start(self) -> None:
        folder = Path(self.hparams.build_dir) / f"rank{self.global_rank}"
        self.solver = WindowSolver(self.estimator, folder, workers=self.hparams.workers)
        self._t0 = time.perf_counter()

    def _reduce(self, value: Tensor, op: str = "sum") -> Tensor:
        return self.trainer.strategy.reduce(value, reduce_op=op) if self.trainer.world_size > 1 else value

    def _gather(self, value: Tensor) -> Tensor:
        """Rows of all processes, rank-major (``value`` has the same shape on every process)."""
        return self.trainer.strategy.all_gather(value).flatten(0, 1) if self.trainer.world_size > 1 else value

    def training_step(self, batch: Tensor, batch_idx: int) -> None:
        dm, world, rank = self.trainer.datamodule, self.trainer.world_size, self.global_rank
        keep = rank + torch.arange(len(batch)) * world < len(dm.windows)  # drop the sampler's padding
        idx = batch[keep].tolist()
        windows = dm.windows[idx]
        if self.hparams.optimizer == "gauss_newton":
            self._gauss_newton_step(idx, windows, len(batch))
            return
        sol = self.solver.solve(windows, [self.starts.get(i) for i in idx])
        self.starts.update(zip(idx, sol.starts))
        hg, hyper_s = hypergradient_step(self.estimator, sol, windows, self.hparams.method)
        names = [n for n, _ in self.estimator.named_parameters()]
        params = dict(self.estimator.named_parameters())
        local = [torch.zeros_like(params[n]) if hg is None else hg.grads[n] for n in names]
        flat = torch.cat([g.reshape(-1) for g in local])
        loss = torch.zeros((), dtype=flat.dtype) if hg is None else hg.loss.sum()
        counts = torch.tensor([float(sol.ok.sum()), float(sol.n_failed)], dtype=flat.dtype)
        flat, loss, counts = self._reduce(flat), self._reduce(loss), self._reduce(counts)
        n_used, n_failed = int(counts[0]), int(counts[1])
        grads = dict(zip(names, (t.reshape(params[n].shape) for n, t in zip(names, flat.split([params[n].numel()
                                                                                              for n in names])))))
        applied = False
        if n_used > 0:
            applied = apply_hypergradient(self.estimator, self.optimizers(), grads)
            if applied:
                self.lr_schedulers().step()
        self.totals["failed"] += n_failed
        self.totals["skipped"] += int(n_used > 0 and not applied)
        self.totals["updates"] += int(applied)
        self.last_loss = float(loss)
        self._log_step(loss, flat, n_used, n_failed, sol, hyper_s)

    def _gauss_newton_step(self, idx: list[int], windows: Windows, rows: int) -> None:
        """One Levenberg-Marquardt iteration; local windows padded to the ``rows`` of every process."""
        est = self.estimator
        alpha = parameters_to_vector(est.parameters()).detach().clone()
        if self._solved is not None and self._solved[1] == idx and torch.equal(self._solved[0], alpha):
            sol = self._solved[2]
        else:
            sol = self.solver.solve(windows, [self.starts.get(i) for i in idx])
            self.starts.update(zip(idx, sol.starts))
        t0 = time.perf_counter()
        ok = torch.zeros(rows, dtype=alpha.dtype)
        ok[:len(idx)] = sol.ok.to(alpha.dtype)
        res, jac = alpha.new_zeros(rows, est.model.n_y), alpha.new_zeros(rows, est.model.n_y, alpha.numel())
        if bool(sol.ok.any()):
            local = residual_jacobian(est, sol.point[sol.ok].stages(), windows[sol.ok])
            at = torch.nonzero(sol.ok).flatten()
            res[at], jac[at] = local.residual, local.jacobian
        rj, ok = ResidualJacobian(self._gather(res), self._gather(jac)), self._gather(ok) > 0.5
        hyper_s = time.perf_counter() - t0
        n_used, n_failed = int(ok.sum()), int(self._reduce(torch.tensor(float(sol.n_failed))))
        if n_used > 0 and not self.losses:
            self.losses.append(float(rj.loss.sum()))
        applied, step, trial_failed = False, None, []
        if not rj.is_finite():
            log.warning("Non-finite residual Jacobian; the Gauss-Newton step is skipped and alpha is left unchanged.")
        elif n_used > 0:
            trials: list[WindowSolutions] = []

            def loss_of(s: WindowSolutions) -> Tensor:
                after = alpha.new_full((rows,), float("nan"))
                after[:len(idx)] = torch.where(s.ok, prediction_loss(est, s.point.stages(), windows)[0], torch.nan)
                return self._gather(after)

            def evaluate(delta: Tensor) -> Tensor:
                with torch.no_grad():
                    vector_to_parameters(alpha + delta, est.parameters())
                trials.append(self.solver.solve(windows, [self.starts.get(i) for i in idx]))
                trial_failed.append(trials[-1].n_failed)
                return loss_of(trials[-1])

            def check() -> Tensor:
                cold = self.solver.solve(windows)
                trial_failed.append(cold.n_failed)
                trials[-1] = lower_cost(est, windows, trials[-1], cold)[0]
                return loss_of(trials[-1])

            step = levenberg_marquardt_step(self.lm, rj, ok, evaluate, self.hparams.max_trials,
                                            check if self.hparams.cold_check else None)
            applied = step.delta is not None
            if applied:
                self.starts.update(zip(idx, trials[-1].starts))
                self._solved = (parameters_to_vector(est.parameters()).detach().clone(), idx, trials[-1])
                after = loss_of(trials[-1])
                self.losses.append(float(after[ok & torch.isfinite(after)].sum()))
            else:
                with torch.no_grad():
                    vector_to_parameters(alpha, est.parameters())
        if rj.is_finite() and n_used > 0:
            self.stop_reason = self.stopping.reason(self.losses, step.delta if applied else None, self.lm)
            if self.stop_reason and self.hparams.verify_starts > 0:
                trial_failed.append(self._final_check(idx, windows, rows, self._solved[2] if applied else sol))
            if self.stop_reason:
                log.info("Gauss-Newton stops: the %s test fired after %d accepted steps.", self.stop_reason,
                         len(self.losses) - 1)
                self.trainer.should_stop = True
        self.optimizers().step()
        self.totals["failed"] += n_failed
        self.totals["failed_trials"] += int(self._reduce(torch.tensor(float(sum(trial_failed)))))
        self.totals["skipped"] += int(not rj.is_finite())
        self.totals["updates"] += int(applied)
        loss = rj.loss.sum()
        self.last_loss = float(loss)
        self._log_step(loss, rj.gradient, n_used, n_failed, sol, hyper_s)

    def _final_check(self, idx: list[int], windows: Windows, rows: int, current: WindowSolutions) -> int:
        """Compare the local ``current`` solutions with `cold_solve`; any switch on any process cancels the stop.

        Returns:
            The local windows whose cold-started solves all failed.
        """
        est = self.estimator
        cold, _ = cold_solve(self.solver, windows, self.hparams.verify_starts)
        best, took = lower_cost(est, windows, current, cold)
        switched = int(self._reduce(took.sum().to(torch.float64)))
        if switched == 0:
            return cold.n_failed
        log.info("Final check: %d windows reached a lower MHE cost from cold starts; Gauss-Newton goes on.", switched)
        self.starts.update(zip(idx, best.starts))
        self._solved = (parameters_to_vector(est.parameters()).detach().clone(), idx, best)
        after = torch.zeros(rows, dtype=torch.float64)
        after[:len(idx)] = torch.where(best.ok, prediction_loss(est, best.point.stages(), windows)[0], 0.0)
        self.losses[-1] = float(self._gather(after).sum())
        self.stop_reason = ""
        return cold.n_failed

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        """Add the Levenberg-Marquardt state and the run's counters (failed windows, skipped steps)."""
        checkpoint["levenberg_marquardt"] = {"mu": self.lm.mu, "nu": self.lm.nu, "scale": self.lm.scale,
                                             "losses": list(self.losses)}
        checkpoint["pem_totals"] = dict(self.totals)

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        """Restore what `on_save_checkpoint` added, so a resumed run keeps counting where it stopped."""
        state = checkpoint.get("levenberg_marquardt")
        if state is not None:
            self.lm.mu, self.lm.nu = state["mu"], state["nu"]
            self.lm.scale, self.losses = state.get("scale"), list(state.get("losses", []))
        self.totals.update(checkpoint.get("pem_totals", {}))

    def _log_step(self, loss: Tensor, grad: Tensor, n_used: int, n_failed: int, sol, hyper_s: float) -> None:
        stats = {"train/J": float(loss), "train/grad_norm": float(grad.norm()), "train/n_used": float(n_used),
                 "train/n_failed": float(n_failed), "train/failed_total": float(self.totals["failed"]),
                 "train/failed_trials_total": float(self.totals["failed_trials"]),
                 "train/skipped_total": float(self.totals["skipped"]),
                 "solver/wall_s": sol.wall_s, "solver/hypergradient_s": hyper_s,
                 "solver/ipopt_iterations": float(sol.iterations.double().mean()),
                 "solver/kkt_residual_max":
                     float(sol.kkt_residual[sol.ok].max()) if bool(sol.ok.any()) else float("nan")}
        if self.hparams.optimizer == "gauss_newton":
            stats["train/lm_mu"] = float("nan") if self.lm.mu is None else self.lm.mu
            stats["train/stopped"] = float(bool(self.stop_reason))
        else:
            stats["train/lr"] = float(self.optimizers().param_groups[0]["lr"])
        stats.update({f"param/{k}": v for k, v in self.parameter_values().items()})
        truth = getattr(self.trainer.datamodule, "truth", None)
        errors = self.relative_errors(truth)
        if errors:
            stats["param/mean_rel_error"] = sum(errors.values()) / len(errors)
        self.log_dict(stats, on_step=True, prog_bar=False, batch_size=max(n_used, 1))

    def parameter_values(self) -> dict[str, float]:
        """Current values of the identified physical parameters and of the arrival cost."""
        out = {}
        if self.model.physics is not None:
            values = self.model.physics.params()
            out.update({n: float(values[n].detach()) for n in self.model.physics.params.free_names})
        out.update({f"s_bar_{i}": float(v) for i, v in enumerate(self.estimator.arrival_mean.detach())})
        out.update({f"sigma_{i}": float(v) for i, v in enumerate(self.estimator.arrival_std().detach())})
        return out

    def relative_errors(self, truth: dict[str, float] | None) -> dict[str, float]:
        """``|theta^ - theta*| / |theta*|`` of the identified physical parameters (empty without truth)."""
        if truth is None or self.model.physics is None:
            return {}
        values = self.model.physics.params()
        return {n: abs(float(values[n].detach()) - truth[n]) / abs(truth[n])
                for n in self.model.physics.params.free_names if n in truth}

    def on_train_end(self) -> None:
        wall = time.perf_counter() - self._t0
        if self.global_rank == 0:
            truth = getattr(self.trainer.datamodule, "truth", None)
            write_pem_outputs(self.trainer.default_root_dir, self, wall, self.relative_errors(truth))

    def teardown(self, stage: str) -> None:
        if self.solver is not None:
            self.solver.close()
            self.solver = None

"""The outer PEM loop (Eq. 5) as a LightningModule with manual optimization.

The data module (e.g. `mhe.training.data.RacingWindows`) provides ``windows``,
``horizon`` and optionally ``truth`` (true physical values, for logging errors); its
items are window indices, so under DDP every process solves and differentiates its own
shard of windows. `training_step` = one PEM iteration: solve the local MHE windows
(warm-started), drop failed ones, compute the local ``J`` and ``dJ/dalpha``
(adjoint-VJP), **sum** them over processes (``J`` is a sum over windows, Eq. 9), then
every process applies the same Adam step unless the summed gradient is non-finite.
"""
from __future__ import annotations

import time
from pathlib import Path

import lightning as L
import torch
from torch import Tensor

from ..estimator import MHESettings, MovingHorizonEstimator
from ..model import NeuralResidual, PhysicsField, StateSpaceModel
from ..pem import HYPERGRADIENTS, apply_hypergradient, hypergradient_step
from ..solver import Start, WindowSolver
from .outputs import write_pem_outputs

__all__ = ["PEMModule"]


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
        lr: Adam's learning rate on the unconstrained parameters.
        lr_min: final learning rate of the cosine schedule over ``trainer.max_steps``.
        method: hypergradient, ``"adjoint"`` (Prop. 1) or ``"explicit"`` (Eq. 11).
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
                 arrival_mean: list[float] = (0.0,), arrival_std: list[float] = (1.0,), lr: float = 0.05,
                 lr_min: float = 5e-4, method: str = "adjoint", workers: int = 1,
                 build_dir: str = "build/l4casadi/pem", max_iter: int = 200, refine_steps: int = 2,
                 kkt_tol: float = 1e-8) -> None:
        super().__init__()
        if method not in HYPERGRADIENTS:
            raise ValueError(f"method must be one of {sorted(HYPERGRADIENTS)}; got {method!r}.")
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
        self.totals = {"failed": 0, "skipped": 0, "updates": 0}
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
        self.estimator = MovingHorizonEstimator(self.model, settings, hp.arrival_mean, hp.arrival_std)

    def configure_optimizers(self):
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

    def training_step(self, batch: Tensor, batch_idx: int) -> None:
        dm, world, rank = self.trainer.datamodule, self.trainer.world_size, self.global_rank
        keep = rank + torch.arange(len(batch)) * world < len(dm.windows)  # drop the sampler's padding
        idx = batch[keep].tolist()
        windows = dm.windows[idx]
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

    def _log_step(self, loss: Tensor, grad: Tensor, n_used: int, n_failed: int, sol, hyper_s: float) -> None:
        stats = {"train/J": float(loss), "train/grad_norm": float(grad.norm()), "train/n_used": float(n_used),
                 "train/n_failed": float(n_failed), "train/failed_total": float(self.totals["failed"]),
                 "train/skipped_total": float(self.totals["skipped"]),
                 "solver/wall_s": sol.wall_s, "solver/hypergradient_s": hyper_s,
                 "solver/ipopt_iterations": float(sol.iterations.double().mean()),
                 "solver/kkt_residual_max": float(sol.kkt_residual[sol.ok].max()) if bool(sol.ok.any()) else float("nan"),
                 "train/lr": float(self.optimizers().param_groups[0]["lr"])}
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

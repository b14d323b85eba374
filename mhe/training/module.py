"""The PEM outer loop (Eq. 5) as a LightningModule with manual optimization.

The data module (`mhe.training.data.IdentificationData`) holds the `IdentificationProblem`;
its items are window indices, so under DDP every process solves and differentiates its own
shard of windows. `training_step` is one iteration of `mhe.outer.outer.PEMLoop` over the local
windows, with Lightning's all-reduce and all-gather as its `mhe.outer.outer.Collective` (every
process then takes the same step), then one step of a no-op optimizer so that
``trainer.global_step`` (and ``max_steps``) counts PEM iterations. When a Gauss-Newton
stopping test fires the module sets ``trainer.should_stop``. The loop's state (optimizer,
damping, counters, accepted losses) and its warm starts (`mhe.training.resume`) are saved in
checkpoints, with the iterate ``alpha`` in the state dict and the physical arrival cost, so a
resumed run takes the iterates the uninterrupted run takes; ``torch-ude fit`` saves one after
every iteration (`checkpoint_every`) and resumes a killed run from the newest
(`torch_ude.cli`). The run ends with the run files (`mhe.training.outputs.write_pem_outputs`)
and a one-line summary.

``torch-ude validate --ckpt_path RUN.ckpt`` scores a trained run on the data module's problem,
typically another recording given on the command line
(``--data.problem.recording.init_args.path OTHER``): `validation_step` solves every window's MHE
at the checkpoint's parameters from ``validation_starts`` cold starts and up to
``validation_passes`` passes of propagated starts (`mhe.estimator.solver.propagated_solve`: each window
from its neighbour's estimate, among the windows of one validation batch; lowest cost per window:
`mhe.estimator.solver.lowest_cost_solve`)
and logs the one-step prediction error of Table 1 (`mhe.scoring.one_step_error`), ``val/one_step_mse`` = the mean
over the windows that solved and the outputs of ``r^2``, ``r = C x^_N - y~_N`` (Eq. 9), with
``val/failed`` and ``val/windows``. The arrival cost's bounds come from the data (`mhe.estimator.arrival`),
so the checkpoint also holds the physical ``s_bar`` and ``sigma``; outside a fit they are clipped
into the box of the data being validated (the raw values would mean other numbers there), and the config's
starting arrival cost is not checked against that box (the checkpoint's replaces it). The checkpoint also
records the training recording: another file keeps no ``part`` of the config that was the training file's
(e.g. IAC's ``[0.0, 0.7]``): it is scored whole, and the log says so; a ``part`` given for it is kept. A fit
does not validate (each PEM iteration is one Lightning epoch and a validation pass solves every
window from cold starts): `setup` sets the trainer's ``limit_val_batches`` to 0 for ``fit``. A gray-box fit holds
the tail of its recording back for its residual check (`mhe.outer.residual_check`); outside a fit `setup` turns
the check off, so ``validate`` scores every window of the recording it is given.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import asdict, replace
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities import rank_zero_info
from torch import Tensor

from torch_ude.training.outputs import RunOutputs

from ..estimator.estimator import MovingHorizonEstimator
from ..estimator.solver import SolverSettings, WindowSolver
from ..identification import IdentificationProblem
from ..outer.outer import LOCAL, Collective, OuterSettings, PEMLoop
from ..outer.report import PEMResult, PEMStep
from ..pem import finish
from ..scoring import one_step_error
from .outputs import pem_outputs, write_pem_outputs
from .resume import restore_warm_state, warm_state

__all__ = ["PEMModule"]

log = logging.getLogger(__name__)


class _IterationCounter(torch.optim.Optimizer):
    """A no-op optimizer: `mhe.outer.outer.PEMLoop` sets ``alpha`` itself.

    Lightning counts ``trainer.global_step`` (and so ``max_steps``) in optimizer steps;
    stepping this once per PEM iteration keeps that count.
    """

    def __init__(self, params: Iterable[Tensor]) -> None:
        super().__init__(params, {})

    def step(self, closure: None = None) -> None:
        """Count one PEM iteration (nothing to update)."""
        return None


class PEMModule(L.LightningModule):
    """PEM-MHE identification of physics, neural or gray-box models (the problem comes from the data module).

    Args:
        outer: the outer optimizer and its options (the same settings as `mhe.pem.PEMIdentifier`).
        solver: processes and build folder of each process's window solver (one subfolder per process).
        validation_starts: cold starts per window when validating (``torch-ude validate``), >= 1.
        validation_passes: the most passes of propagated starts when validating, >= 0 (0: none).

    Raises:
        ValueError: for ``validation_starts < 1`` or ``validation_passes < 0``.
    """

    #: ``torch-ude fit`` checkpoints after every PEM iteration: one takes seconds to minutes, and
    #: the checkpoint (``alpha``, the loop's state and warm starts) is small next to that.
    checkpoint_every = 1

    def __init__(self, outer: OuterSettings = OuterSettings(), solver: SolverSettings = SolverSettings(),
                 validation_starts: int = 3, validation_passes: int = 3) -> None:
        super().__init__()
        if validation_starts < 1 or validation_passes < 0:
            raise ValueError(f"validation_starts must be >= 1 (cold starts per window when validating) and "
                             f"validation_passes >= 0; got {validation_starts} and {validation_passes}.")
        self.save_hyperparameters()
        self.automatic_optimization = False
        self.outer, self.solver_settings, self.validation_starts = outer, solver, validation_starts
        self.validation_passes = validation_passes
        self.estimator: MovingHorizonEstimator | None = None
        self.problem: IdentificationProblem | None = None
        self.solver: WindowSolver | None = None
        self.loop: PEMLoop | None = None
        self.result: PEMResult | None = None
        self._restored: dict | None = None
        self.outputs: RunOutputs | None = None
        self._t0 = 0.0

    def setup(self, stage: str) -> None:
        """Build the estimator of the data module's problem (once); a fit does not validate."""
        if stage == TrainerFn.FITTING:
            self.trainer.limit_val_batches = 0
        if self.estimator is not None:
            return
        dm = self.trainer.datamodule
        dm.setup(stage)
        if stage != TrainerFn.FITTING and dm.problem.checks_residual:  # a fit's held-back tail is the fit's business
            dm.problem = dm.problem.replace(residual=replace(dm.problem.residual, check=False))
        self.problem = dm.problem
        # outside a fit the checkpoint's trained arrival cost replaces the start (on_load_checkpoint)
        self.estimator = self.problem.estimator(clip_start=stage != TrainerFn.FITTING)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        """The iteration counter (the loop owns the real optimizer)."""
        return _IterationCounter(self.estimator.parameters())

    def on_train_start(self) -> None:
        """Start this process's window solver and the loop (restored from a checkpoint if one was loaded)."""
        folder = Path(self.solver_settings.build_dir) / f"rank{self.global_rank}"
        self.solver = WindowSolver.from_settings(self.estimator, self.solver_settings, folder)
        collective = Collective(self._reduce, self._gather) if self.trainer.world_size > 1 else LOCAL
        self.loop = PEMLoop(self.estimator, self.solver, self.outer, self.trainer.max_steps, collective)
        if self._restored is not None:
            self.loop.load_state_dict(self._restored)
            restore_warm_state(self.loop, self._restored.get("warm", {}))
            if self.loop.stop_reason:  # killed after a stopping test fired and before the run files were written
                self.trainer.should_stop = True
        self.outputs = pem_outputs(self.trainer.default_root_dir, self.problem,
                                   {"outer": self.outer, "solver": self.solver_settings})
        if self.global_rank == 0:
            self.outputs.start()  # an earlier run's files go; metrics.json says "running"
        self._t0 = time.perf_counter()

    def _reduce(self, value: Tensor) -> Tensor:
        return self.trainer.strategy.reduce(value, reduce_op="sum")

    def _gather(self, value: Tensor) -> Tensor:
        """Rows of all processes, rank-major (``value`` has the same shape on every process)."""
        return self.trainer.strategy.all_gather(value).flatten(0, 1)

    def training_step(self, batch: Tensor, batch_idx: int) -> None:
        """One PEM iteration over this process's windows (the sampler's padding dropped)."""
        index = self._local(batch)
        step = self.loop.step(index, self.problem.windows[index], rows=len(batch))
        self.optimizers().step()
        if self.loop.stop_reason:
            log.info("Gauss-Newton stops: the %s test fired after %d accepted steps.", self.loop.stop_reason,
                     len(self.loop.losses) - 1)
            self.trainer.should_stop = True
        self._log_step(step)

    def _local(self, batch: Tensor) -> list[int]:
        """This process's window indices of ``batch`` (the DDP sampler's padding dropped)."""
        world, rank = self.trainer.world_size, self.global_rank
        keep = rank + torch.arange(len(batch)) * world < len(self.problem.windows)
        return batch[keep].tolist()

    def on_validation_start(self) -> None:
        """Start this process's window solver for validation (its own build subfolder)."""
        folder = Path(self.solver_settings.build_dir) / f"validate_rank{self.global_rank}"
        self.solver = WindowSolver.from_settings(self.estimator, self.solver_settings, folder)

    def validation_step(self, batch: Tensor, batch_idx: int) -> None:
        """The one-step prediction error of the windows at the current parameters (module docstring)."""
        index = self._local(batch)
        error = one_step_error(self.solver, self.problem.windows[index], self.validation_starts, self.validation_passes)
        self.log_dict({"val/one_step_mse": error["mse"], "val/failed": float(error["failed"]),
                       "val/windows": float(len(index))}, batch_size=max(error["windows"] - error["failed"], 1))

    def _log_step(self, step: PEMStep) -> None:
        c = self.loop.counters
        stats = {"train/J": step.loss, "train/grad_norm": step.grad_norm, "train/n_used": float(step.n_used),
                 "train/n_failed": float(step.n_failed), "train/failed_total": float(c.failed),
                 "train/failed_trials_total": float(c.failed_trials), "train/skipped_total": float(c.skipped),
                 "train/evaluations": float(step.evaluations),
                 "solver/wall_s": step.solve_s, "solver/hypergradient_s": step.hypergradient_s,
                 "solver/ipopt_iterations": step.iterations, "solver/kkt_residual_max": step.kkt_residual}
        if self.outer.optimizer == "gauss_newton":
            stats["train/lm_mu"] = float("nan") if self.loop.lm.mu is None else self.loop.lm.mu
            stats["train/stopped"] = float(bool(self.loop.stop_reason))
        elif self.outer.optimizer == "adam":
            stats["train/lr"] = float(self.loop.optimizer.param_groups[0]["lr"])
        report = self.loop.noise_fit_report
        if report is not None and c.steps == 1:
            stats.update({f"noise_fit/{k}": float(v) for k, v in asdict(report).items()})
        stats.update({f"param/{k}": v for k, v in self.estimator.parameter_values().items()})
        errors = self.problem.relative_errors(self.estimator)
        if errors:
            stats["param/mean_rel_error"] = sum(errors.values()) / len(errors)
        self.log_dict(stats, on_step=True, prog_bar=False, batch_size=max(step.n_used, 1))

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        """Add the loop's state (optimizer, damping, counters, warm starts) and the physical arrival cost."""
        if self.loop is not None:
            checkpoint["pem_loop"] = {**self.loop.state_dict(), "warm": warm_state(self.loop)}
        if self.estimator is not None:
            checkpoint["arrival"] = {"mean": self.estimator.arrival_mean.detach().tolist(),
                                     "std": self.estimator.arrival_std().detach().tolist()}
        if self.problem is not None:
            checkpoint["recording"] = self.problem.describe()["recording"]

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        """Keep the loop's saved state for `on_train_start`, so a resumed run goes on where it stopped; outside a
        fit, put the saved physical arrival cost into this data's bounds (module docstring)."""
        self._restored = checkpoint.get("pem_loop")
        trainer, arrival = self._trainer, checkpoint.get("arrival")
        if self.estimator is None or (trainer is not None and trainer.state.fn == TrainerFn.FITTING):
            return
        self._whole_other_file(checkpoint.get("recording"))
        if arrival is None:
            return
        est, state = self.estimator, checkpoint["state_dict"]
        for key, values, bounds in (("estimator.arrival_mean_raw", arrival["mean"], est.arrival_mean_bounds),
                                    ("estimator.arrival_std_raw", arrival["std"], est.arrival_std_bounds)):
            state[key] = torch.tensor([b.to_raw(b.clip(v)) for v, b in zip(values, bounds)], dtype=torch.float64)

    def _whole_other_file(self, trained: object) -> None:
        """Outside a fit, score a recording other than the trained one whole: the config's ``part`` (e.g. the
        training split ``[0.0, 0.7]``) names a part of the training file, so an unchanged one is not carried over
        to another file (said in the log); a ``part`` given for it (another than the training one) is kept."""
        source = self.problem.source
        part = getattr(source, "part", None)
        if not isinstance(trained, dict) or part is None or not hasattr(source, "with_part"):
            return
        whole = (0.0, 1.0)
        same_file = trained.get("path") == getattr(source, "path", None)
        if same_file or tuple(part) != tuple(trained.get("part", ())) or tuple(part) == whole:
            return
        rank_zero_info(f"Scoring the whole of {source.path}: the config's part {list(part)} is the training file's "
                       f"({trained.get('path')}); give --data.problem.recording.init_args.part to score a part of it.")
        self.problem = self.problem.replace(recording=source.with_part(whole))
        self.trainer.datamodule.problem = self.problem
        self.estimator = self.problem.estimator(clip_start=True)

    def on_train_end(self) -> None:
        """Write the run files and end with the one-line summary; ``last.ckpt`` is written again, since the checkpoint
        callback saved it before what `mhe.pem.finish` adds (the free-run refinement's parameters, a trust envelope
        recorded at the end, `mhe.models.envelope`, a residual the residual check zeroed,
        `mhe.outer.residual_check`): the checkpoint and ``field.pt`` hold the same model."""
        self.result = finish(self.loop, self.problem, self._t0)  # with the free-run refinement if outer.criterion asks
        last = getattr(self.trainer.checkpoint_callback, "last_model_path", "")
        if last:
            self.trainer.save_checkpoint(last)  # (every process calls it; rank 0 writes)
        if self.global_rank == 0:
            paths = write_pem_outputs(self.outputs, self.estimator, self.result)
            rank_zero_info(self.result.summary(paths["metrics"].parent))

    def teardown(self, stage: str) -> None:
        """Shut the window solver down."""
        if self.solver is not None:
            self.solver.close()
            self.solver = None

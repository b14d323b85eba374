"""The solver baseline under the ``torch-ude`` CLI: a data module of shooting windows and a module.

``torch-ude fit --config configs/baseline_pendulum_case_a.yaml`` trains it on a simulated plant,
``torch-ude fit --config configs/baseline_dfki_pendulum.yaml`` on recorded logs
(`RecordedShootingDataModule`: the files of a jet-matching config, scored on its validation files
by prediction errors, `torch_ude.prediction`); each
training step is one full-batch Adam iteration (`baselines.optimize.ShootingAdam`),
so ``trainer.max_steps`` is the iteration count. A run writes the same files as
every trainer of the project (``field.pt``, ``field.json``, ``metrics.json``, see
`torch_ude.training.outputs`) and logs ``train/...`` and ``eval/...`` scalars to its
logger. Checkpoints hold the shooting states, the rejection count and the schedule,
so a killed run resumes exactly (``--ckpt_path``).
"""
from __future__ import annotations

import copy
import itertools
import math
import time

import lightning as L
import torch
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities import rank_zero_info
from torch.utils.data import DataLoader, IterableDataset

from torch_ude.calibration import Calibration, calibrate, noise_adaptive_weight_decay
from torch_ude.field import HybridField
from torch_ude.metrics import evaluate_field, evaluation_states
from torch_ude.systems.base import System
from torch_ude.systems.pendulum import SinglePendulum
from torch_ude.systems.simulate import SimulatedStream, simulate
from torch_ude.training.data import run_seed
from torch_ude.training.outputs import RunOutputs, residual_figure, tensor_bytes
from torch_ude.training.recorded import RecordedDataModule
from torch_ude.training.resume import check_extends

from .initialization import initial_field, stream_calibration
from .optimize import ShootingAdam
from .shooting import ShootingObjective
from .windows import ShootingWindows, observe, recorded_observations, shooting_windows

__all__ = ["ShootingDataModule", "RecordedShootingDataModule", "ShootingModule"]


class _Iterations(IterableDataset):
    """An endless sequence of iteration numbers: the whole batch lives in the module."""

    def __iter__(self):
        return itertools.count()


class ShootingDataModule(L.LightningDataModule):
    """The simulated stream, observed at ``rate``, cut into shooting windows.

    The stream is the one jet matching streams for the same plant, duration, noise
    and seed (`torch_ude.systems.simulate`). The training loader yields iteration
    numbers forever (stop with ``trainer.max_steps``); the validation and test
    loaders yield the evaluation states once, ``{"grid": (G, n), "visited": (V, n)}``.

    Args:
        system: the plant (chosen in YAML by ``class_path``).
        case: known-model case.
        duration: stream length in s (60 single pendulum, 20 double pendulum).
        fs: stream rate in Hz.
        noise: sensor noise relative to each channel's RMS (>= 0).
        rate: observation rate in Hz; must divide ``fs`` (50 reference, 100 sensitivity).
        steps: ``K``, RK4 steps per window (>= 1).
        n_windows: ``B``, windows (>= 1).
        seed: stream seed; None uses the run seed (``seed_everything``).
    """

    def __init__(self, system: System | None = None, case: str = "A", duration: float = 60.0, fs: float = 1000.0,
                 noise: float = 0.01, rate: float = 50.0, steps: int = 40, n_windows: int = 128,
                 seed: int | None = None) -> None:
        super().__init__()
        self.system = system if system is not None else SinglePendulum()
        self.case = self.system.check_case(case)
        if not (math.isfinite(duration) and duration > 0):
            raise ValueError(f"duration must be positive (seconds); got {duration!r}.")
        if not (math.isfinite(noise) and noise >= 0):
            raise ValueError(f"noise must be >= 0 (relative to channel RMS); got {noise!r}.")
        self.duration, self.fs, self.noise, self.rate = float(duration), float(fs), float(noise), float(rate)
        self.steps, self.n_windows, self._seed = steps, n_windows, seed
        self.recording: SimulatedStream | None = None
        self.windows: ShootingWindows | None = None
        self._states: dict | None = None

    @property
    def seed(self) -> int:
        """The stream seed (the run seed unless set explicitly)."""
        return run_seed() if self._seed is None else int(self._seed)

    def config(self) -> dict:
        """The data settings of the run (recorded in its output files)."""
        return {"system": self.system, "case": self.case, "duration": self.duration, "fs": self.fs,
                "noise": self.noise, "rate": self.rate, "steps": self.steps, "n_windows": self.n_windows,
                "seed": self.seed}

    def setup(self, stage: str) -> None:
        """Simulate the stream and choose the windows (once)."""
        if self.recording is None:
            self.recording = simulate(self.system, self.duration, fs=self.fs, noise=self.noise, seed=self.seed)
            self.windows = shooting_windows(observe(self.recording, self.rate), self.steps, self.n_windows)

    def initial_field(self, hidden: tuple[int, ...], linear: bool, input_affine: bool,
                      periodic: bool) -> tuple[HybridField, Calibration]:
        """The field jet matching starts from (`baselines.initialization.initial_field`) and the calibration of
        the stream's head that set its scales."""
        if input_affine:
            raise ValueError("model.input_affine needs a known model with recorded inputs "
                             "(baselines.training.RecordedShootingDataModule); a simulated plant has none.")
        cal = stream_calibration(self.recording)
        field = initial_field(self.system, self.case, self.recording, self.seed, hidden=hidden, cal=cal,
                              linear=linear, periodic=self.system.periodic if periodic else ())
        return field, cal

    def evaluate(self, field: HybridField, states: dict[str, torch.Tensor] | None = None) -> dict:
        """Field error and recovered damping (`torch_ude.metrics.evaluate_field`)."""
        return evaluate_field(field.evaluate, self.system, self.case,
                              states if states is not None else self.evaluation_states())

    def evaluation_states(self) -> dict[str, torch.Tensor]:
        """The states metrics are computed on (cached), as for jet matching."""
        if self._states is None:
            self._states = evaluation_states(self.system, duration=self.duration, seed=self.seed, fs=self.fs)
        return self._states

    def train_dataloader(self) -> DataLoader:
        """Iteration numbers, endlessly."""
        return DataLoader(_Iterations(), batch_size=None)

    def val_dataloader(self) -> DataLoader:
        """One batch of evaluation states."""
        return DataLoader([self.evaluation_states()], batch_size=None)

    def test_dataloader(self) -> DataLoader:
        """Same as the validation loader."""
        return self.val_dataloader()


class RecordedShootingDataModule(RecordedDataModule):
    """Recorded logs (`torch_ude.training.RecordedDataModule`, the same settings) observed at ``rate`` and cut
    into shooting windows inside one segment (`baselines.windows.recorded_observations`); validated on the
    validation files by one-step and open-loop prediction errors, as jet matching on the same config.

    The field's scales come from the calibration of the first ``calibration_s`` seconds of the training
    stream at ``fs`` (states and inputs, `torch_ude.calibration.calibrate`), as jet matching measures its own.

    Args:
        rate: observation rate in Hz; must divide ``fs``.
        steps: ``K``, RK4 steps per window (>= 1).
        n_windows: ``B``, windows (>= 1).
        calibration_s: the head of the training stream the scales are measured on, in s (jet matching's
            ``model.stream.calibration_s`` of the same config: its first window needs 400 samples).
        **kwargs: the `RecordedDataModule` settings (known, files, val_files, time, states, inputs, fs, ...).
    """

    def __init__(self, rate: float = 50.0, steps: int = 40, n_windows: int = 128, calibration_s: float = 5.0,
                 **kwargs) -> None:
        super().__init__(**kwargs)
        if not (math.isfinite(calibration_s) and calibration_s > 0):
            raise ValueError(f"data.calibration_s must be a positive number of seconds; got {calibration_s!r}.")
        self.rate, self.steps, self.n_windows = float(rate), int(steps), int(n_windows)
        self.calibration_s = float(calibration_s)
        self.windows = shooting_windows(recorded_observations(self.train_logs, self.rate), self.steps,
                                        self.n_windows)

    def config(self) -> dict:
        """The data settings of the run (`RecordedDataModule.config`) and the windows'."""
        return super().config() | {"rate": self.rate, "steps": self.steps, "n_windows": self.n_windows,
                                   "calibration_s": self.calibration_s}

    def setup(self, stage: str) -> None:
        """Nothing to do: the logs were read and the windows chosen at construction."""

    def initial_field(self, hidden: tuple[int, ...], linear: bool, input_affine: bool,
                      periodic: bool) -> tuple[HybridField, Calibration]:
        """A seeded field on the known model (`HybridField.from_seed`) with the plant's periodic and invariant
        states, scaled by the calibration of the training stream's head (class doc)."""
        head = int(round(self.calibration_s * self.fs))
        n = self.system.known.n_states
        cal = calibrate(self._y[:head], self.fs, self._segment[:head], n_states=n)
        field = HybridField.from_seed(copy.deepcopy(self.system.known), self.seed, hidden=hidden, linear=linear,
                                      input_affine=input_affine,
                                      periodic=self.system.periodic if periodic else (),
                                      invariant=self.system.invariant)
        field.set_scales(cal.x_rms[:n], cal.s1[:n], cal.x_rms[n:] if field.n_inputs else None)
        return field, cal

    def train_dataloader(self) -> DataLoader:
        """Iteration numbers, endlessly."""
        return DataLoader(_Iterations(), batch_size=None)


class ShootingModule(L.LightningModule):
    """RK4 multiple shooting with the hand-derived discrete adjoint and full-batch Adam.

    The field starts from `HybridField.from_seed` with the run seed and the scales of
    the calibration of the stream's first 3 s, as jet matching's does. Float64.

    A run in which every iteration was rejected (all rollouts diverged) has no trained
    model: it fails with a `RuntimeError`, ``metrics.json`` says ``"status": "failed"``
    with the reason, and no ``field.pt``/``field.json`` is written. Checkpoints resume
    exactly. Resuming with a ``trainer.max_steps`` other than the checkpoint's continues
    on the schedule of the new iteration count (`ShootingAdam.lr_factor` is closed-form
    in the iteration); it must exceed the iterations the checkpoint has run.

    Args:
        hidden: hidden widths of the tanh MLP.
        linear: add the zero-initialised linear term to the residual (`HybridField`),
            as jet matching's ``linear``.
        input_affine: the tanh layers read the states only and the inputs enter through the linear
            term (`HybridField`), as jet matching's ``input_affine``; recorded logs with inputs only.
        periodic: read the plant's periodic states (angles) as ``(sin, cos)``, as jet
            matching's ``periodic``.
        lr: initial Adam learning rate of the network.
        lr_final: final rate of the cosine decay over ``trainer.max_steps``, or None
            for a constant rate.
        fit_states: estimate the windows' shooting states along with the network.
        states_lr: initial rate of the shooting states, or None for ``lr``.
        normalize: weight each channel's squared error by ``1 / x_rms^2`` (the
            calibrated state RMS); False is the plain mean squared error.
        betas: Adam's moment decay rates; a second-moment decay of 0.99 rather than
            torch's 0.999 lets the step size recover as the gradients shrink by orders
            of magnitude during the run (see RESULTS.md).
        backoff: learning-rate factor after a rejected (diverging) step.
        weight_decay: decoupled weight decay of the network weights (AdamW) per unit
            learning rate; 0 is Adam.
        weight_decay_full_at: relative noise from which the full ``weight_decay``
            applies; below it the decay falls like the squared measured noise
            (`torch_ude.calibration.noise_adaptive_weight_decay`, jet matching's rule,
            with sigma_rel of the stream's calibration). None keeps ``weight_decay``
            constant.
        num_threads: torch intra-op threads set at start-up (None leaves torch's setting).
    """

    def __init__(self, hidden: tuple[int, ...] = (16, 16), linear: bool = False, input_affine: bool = False,
                 periodic: bool = True,
                 lr: float = 4e-2, lr_final: float | None = 1e-3,
                 fit_states: bool = True, states_lr: float | None = None, normalize: bool = True,
                 betas: tuple[float, float] = (0.9, 0.99), backoff: float = 0.5, weight_decay: float = 0.0,
                 weight_decay_full_at: float | None = None, num_threads: int | None = 1) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.hidden, self.linear, self.lr, self.lr_final = tuple(hidden), bool(linear), float(lr), lr_final
        self.input_affine = bool(input_affine)
        self.periodic = bool(periodic)
        self.fit_states, self.states_lr, self.normalize = bool(fit_states), states_lr, bool(normalize)
        self.betas, self.backoff, self.num_threads = (float(betas[0]), float(betas[1])), float(backoff), num_threads
        if weight_decay_full_at is not None and not weight_decay_full_at > 0:
            raise ValueError(f"weight_decay_full_at must be positive or null; got {weight_decay_full_at}.")
        self.weight_decay, self.weight_decay_full_at = float(weight_decay), weight_decay_full_at
        self.save_hyperparameters()
        self.field = None
        self.objective: ShootingObjective | None = None
        self.adam: ShootingAdam | None = None
        self._fit_t0: float | None = None
        self.wall_s: float | None = None
        self.outputs: RunOutputs | None = None
        self._evaluated: tuple[tuple[int, int], dict] | None = None  # (iteration, metrics) of `evaluate`

    def setup(self, stage: str) -> None:
        """Build the field, the objective and the optimizer for the data module's stream."""
        if self.num_threads is not None:
            torch.set_num_threads(self.num_threads)
        if self.field is not None:
            return
        dm = self.trainer.datamodule
        dm.setup(stage)
        field, cal = dm.initial_field(self.hidden, self.linear, self.input_affine, self.periodic)
        decay = noise_adaptive_weight_decay(cal.sigma_rel, self.weight_decay, self.weight_decay_full_at)
        self.field = field
        self.objective = ShootingObjective(field, dm.windows, field.in_scale.clone() if self.normalize else None)
        iterations = self.trainer.max_steps
        if iterations is None or iterations < 1:
            raise ValueError("the baseline needs trainer.max_steps (the number of Adam iterations) >= 1.")
        self.adam = ShootingAdam(self.objective, lr=self.lr, iterations=iterations, lr_final=self.lr_final,
                                 fit_states=self.fit_states, states_lr=self.states_lr, backoff=self.backoff,
                                 betas=self.betas, weight_decay=decay)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        """The Adam optimizer of `ShootingAdam` (its schedule is stepped by `ShootingAdam.step`)."""
        return self.adam.optimizer

    def on_fit_start(self) -> None:
        """Start the run's wall clock and mark the run folder's outputs as running."""
        self._fit_t0 = time.perf_counter()
        self.outputs = RunOutputs.of(self, "rk4_shooting")
        self.outputs.start()

    def training_step(self, batch: int, batch_idx: int) -> None:
        """One full-batch iteration: rollouts, adjoint gradient, Adam step (or a counted rejection).

        Lightning counts accepted steps only; the run stops once accepted plus rejected
        iterations reach ``trainer.max_steps``, as `ShootingAdam.run` does. The scalars
        are written every ``trainer.log_every_n_steps`` steps.
        """
        result = self.adam.step(optimizer=self.optimizers())
        if self.trainer.global_step + self.adam.skipped >= self.trainer.max_steps:
            self.trainer.should_stop = True  # rejected iterations count towards the limit too
        self.log_dict({"train/loss": result.loss, "train/lr": result.lr, "train/skipped": float(self.adam.skipped)},
                      on_step=True, on_epoch=False, batch_size=1)

    def evaluate(self, states: dict[str, torch.Tensor] | None = None) -> dict:
        """The data module's metrics of the field: field error and recovered damping on a simulated plant
        (`torch_ude.metrics.evaluate_field`), prediction errors on recorded logs (`torch_ude.prediction`).
        On the data module's own states (``states`` empty or None) computed once per iteration: the last
        validation and ``metrics.json`` share it (seconds of rollouts on a long validation log)."""
        key = None if states else (self.trainer.global_step, self.adam.skipped if self.adam is not None else 0)
        if key is not None and self._evaluated is not None and self._evaluated[0] == key:
            return dict(self._evaluated[1])
        out = self.trainer.datamodule.evaluate(self.field, states)
        if key is not None:
            self._evaluated = (key, dict(out))
        return out

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        """Log ``val/e_field``, ``val/e_field_visited`` and ``val/c_hat``."""
        self._log_eval("val", batch)

    def test_step(self, batch: dict, batch_idx: int) -> None:
        """Log ``test/...`` metrics."""
        self._log_eval("test", batch)

    def _eval_keys(self) -> tuple[str, ...]:
        return getattr(self.trainer.datamodule, "eval_keys", ("e_field", "e_field_visited", "c_hat"))

    def _log_eval(self, prefix: str, states: dict) -> None:
        out = self.evaluate(states or None)
        self.log_dict({f"{prefix}/{k}": out[k] for k in self._eval_keys() if out[k] is not None}, batch_size=1)

    def run_metrics(self) -> dict:
        """The keys every trainer reports in ``metrics.json`` (null where they do not apply), plus the baseline's."""
        dm, windows = self.trainer.datamodule, self.trainer.datamodule.windows
        out = self.evaluate()
        out.update({
            "sigma_hat": None, "m": None, "lambda2": None, "reject_rate": None,
            "updates": int(self.trainer.global_step), "wall_s": self.wall_s,
            "skipped_steps": self.adam.skipped, "tape_bytes": self.objective.tape.nbytes,
            "weight_decay": self.adam.optimizer.param_groups[0]["weight_decay"],
            # trained tensors twice: the weights and states, and their gradients (same sizes)
            "state_bytes": tensor_bytes(self.objective.tape, self.objective.windows, self.adam.params,
                                        self.adam.params, self.adam.optimizer.state_dict()["state"],
                                        self.adam.last_finite),
            "steps": windows.steps, "n_windows": windows.batch, "rate": dm.rate,
            "window_candidates": windows.candidates, "window_positions_straddling": windows.straddling,
            "final_loss": float(self.objective.loss()),
        })
        if self.field.physical:  # (trained with the residual; field.json records them too, RunOutputs.finish)
            out["physical_parameters"] = self.field.known.values()
        return out

    def on_train_end(self) -> None:
        """Stop the wall clock, then write ``field.pt``, ``field.json`` and ``metrics.json``.

        Raises:
            RuntimeError: if no iteration was accepted; ``metrics.json`` then records
                ``"status": "failed"`` and the reason, and no field is written.
        """
        self.wall_s = time.perf_counter() - self._fit_t0
        dm = self.trainer.datamodule
        metrics = self.run_metrics()
        if metrics["updates"] == 0:
            reason = (f"the baseline made 0 accepted iterations: all {self.adam.skipped} were rejected because the "
                      f"rollouts diverged, so the network is untrained; lower model.lr or data.steps (K), or check "
                      f"the known model.")
            self.outputs.fail(reason, metrics)
            raise RuntimeError(reason)
        paths = self.outputs.finish(self.field, metrics)
        recorded = getattr(dm, "recorded", False)
        scores = dm.summary(metrics) if recorded else (
            f"e_field = {metrics['e_field']:.5f} (visited states {metrics['e_field_visited']:.5f}), c_hat = "
            f"{metrics['c_hat']:.4f}")
        rank_zero_info(
            f"RK4 shooting baseline (K = {metrics['steps']}, B = {metrics['n_windows']}): {scores}, "
            f"{metrics['updates']} iterations ({metrics['skipped_steps']} rejected) in "
            f"{metrics['wall_s']:.1f} s; outputs in {paths['metrics'].parent}")
        logger = self.logger
        if recorded and logger is not None and hasattr(logger.experiment, "add_scalar"):
            for k in self._eval_keys():
                if metrics.get(k) is not None:
                    logger.experiment.add_scalar(f"eval/{k}", metrics[k], global_step=self.global_step)
        elif logger is not None and hasattr(logger.experiment, "add_figure"):
            fig = residual_figure(self.field, dm.system, dm.case, dm.evaluation_states()["visited"])
            logger.experiment.add_figure("eval/residual", fig, global_step=self.global_step)
            for k in ("e_field", "e_field_visited", "c_hat"):
                logger.experiment.add_scalar(f"eval/{k}", metrics[k], global_step=self.global_step)

    # ----- checkpoints -------------------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict) -> None:
        """Add what the weights and Adam's state do not hold: shooting states, rollback copy,
        rejection count and schedule position."""
        checkpoint["shooting"] = {
            "states": self.objective.shooting_states.detach().clone(),
            "last_finite": [t.clone() for t in self.adam.last_finite],
            "skipped": self.adam.skipped, "scheduler": self.adam.scheduler.state_dict(),
        }

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        """Restore what `on_save_checkpoint` added (after `setup` built the objective).

        When fitting with a ``trainer.max_steps`` other than the checkpoint's, the learning
        rate of the next iteration is set to the new schedule's (`ShootingAdam.lr_factor`).

        Raises:
            ValueError: if ``trainer.max_steps`` does not exceed the checkpoint's iterations,
                or when fitting from a checkpoint that lacks this state (written before it
                was saved; such a checkpoint can still be validated and tested).
        """
        self._evaluated = None  # new weights
        fitting = self._trainer is not None and self._trainer.state.fn == TrainerFn.FITTING
        saved = checkpoint.get("shooting")
        if saved is None:
            if fitting:
                raise ValueError("the checkpoint holds no shooting states and schedule (it predates resumable baseline "
                                 "checkpoints); validate or test with it, or start a new run.")
            return
        with torch.no_grad():
            self.objective.shooting_states.copy_(saved["states"])
            for t, s in zip(self.adam.last_finite, saved["last_finite"]):
                t.copy_(s)
        self.adam.skipped = int(saved["skipped"])
        self.adam.scheduler.load_state_dict(saved["scheduler"])
        if not fitting:
            return
        check_extends(int(checkpoint["global_step"]) + self.adam.skipped, self._trainer.max_steps, "iterations")
        factor = self.adam.lr_factor(self.adam.scheduler.last_epoch)
        for group, base in zip(checkpoint["optimizer_states"][0]["param_groups"], self.adam.scheduler.base_lrs):
            group["lr"] = base * factor

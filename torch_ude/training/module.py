"""Streaming jet matching (Algorithm 1) as a LightningModule with manual optimization."""
from __future__ import annotations

import copy
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import lightning as L
import torch
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities import rank_zero_info, rank_zero_warn
from torch.optim.swa_utils import AveragedModel

from ..calibration import Calibration, calibration_notes
from ..envelope import DEFAULT_MARGIN, install_span
from ..field import HybridField
from ..jet import JetLoss, JetResult
from ..physical import physical_report, refit_physical_parameters
from ..prediction import held_out_metric
from ..reservoir import jet_arguments
from ..stream import StreamEstimator, StreamSettings, reject_rate
from ..update import ExponentialAverage, apply_calibration, due_updates, flatten_parameters, jet_update, link_gradients
from .outputs import RunOutputs, tensor_bytes
from .quality import stream_quality
from .resume import check_extends, extend_cosine_schedule

__all__ = ["JetMatchingModule", "StreamStatus"]


@dataclass
class StreamStatus:
    """What the module reports of its streaming estimator, whichever engine runs it.

    Attributes:
        calibration: the `Calibration`, or None before it finished.
        counters: the event counts of `torch_ude.stream` (windows, accepted, ...).
        fill: jets in the sample buffer (0 before calibration).
        capacity: the buffer capacity B.
        seen: jets offered to the buffer so far.
    """

    calibration: Calibration | None
    counters: dict
    fill: int
    capacity: int
    seen: int

    @property
    def full(self) -> bool:
        """True once the buffer holds ``capacity`` jets."""
        return self.fill >= self.capacity


def _log_scalars(logger, values: dict[str, float], step: int) -> None:
    """``logger.log_metrics(values, step=step)``, with the scalars of a TensorBoard logger in one event.

    Lightning's `TensorBoardLogger` writes one event per scalar (``SummaryWriter.add_scalar``);
    here one event holds a ``Summary`` with every value (the tags, float32 values and step that
    ``add_scalar`` writes, read back alike by TensorBoard), a seventh of the writer's work for
    the 14 scalars of an update's log. Any other logger, a logger with a prefix, or a writer
    without ``_get_file_writer`` (private to torch's ``SummaryWriter``) takes ``log_metrics``.
    """
    from lightning.pytorch.loggers import TensorBoardLogger

    new_event = None
    if isinstance(logger, TensorBoardLogger) and not logger._prefix:
        new_event = getattr(logger.experiment, "_get_file_writer", None)
    if new_event is None:
        logger.log_metrics(values, step=step)
        return
    from tensorboard.compat.proto.summary_pb2 import Summary

    new_event().add_summary(Summary(value=[Summary.Value(tag=k, simple_value=v) for k, v in values.items()]), step)


class JetMatchingModule(L.LightningModule):
    """Noise-adaptive Lie-Taylor jet matching on a live stream (Algorithm 1).

    Each training step takes one chunk of the stream (one training tick at
    ``train_rate``), pushes it through the `StreamEstimator` and, once the buffer is
    full, performs the due updates: a minibatch from the buffer, the hand-written
    jet gradient written into ``.grad``, gradient-norm clipping, ``torch.optim.Adam``,
    the cosine schedule and the EMA of the weights (`torch_ude.update.ExponentialAverage`,
    torch's ``AveragedModel`` EMA).
    After the stream, each replay chunk drives ``replay_updates`` updates until ``trainer.max_steps``
    updates (the iteration limit) have been made.

    The updates of a chunk step the torch optimizer itself, and are added to Lightning's
    count of optimizer steps (``trainer.global_step``, which ``trainer.max_steps``, the
    progress bar, checkpoints and callbacks read) once per chunk (`_count_updates`):
    Lightning's per-step wrapper and its ``on_before_optimizer_step`` hooks do not run
    per update. The weights, gradients, Adam moments and EMA are flat vectors
    (`torch_ude.update.flatten_parameters`): the optimizer holds one tensor.

    The plant, case and seed come from the data module; the network's initial
    weights from `HybridField.from_seed` with the run seed. Float64 throughout.

    When the stream ends before the buffer is full, replay trains on what the buffer
    holds if that is at least ``batch_size`` jets: a warning names the fill, and
    ``metrics.json`` and the closing summary line say ``buffer_full: false`` with the
    ``buffer_fill``. A run never writes an untrained model: if the calibration phase did
    not finish, or the run ends with 0 updates (a buffer with fewer than ``batch_size``
    jets, ``replay: false`` before the buffer filled, or every update skipped), it fails
    with a `RuntimeError` naming the cause, ``metrics.json`` says ``"status": "failed"``
    and the reason, and no ``field.pt``/``field.json`` is written (see
    `torch_ude.training.outputs`).

    Resuming from a checkpoint (``--ckpt_path``) continues the run exactly. With a
    ``trainer.max_steps`` N other than the checkpoint's schedule horizon, the cosine
    schedule is recomputed for N: from the resumed update k on, the learning rate is
    that of an N-update run at update k. N must exceed k.

    Args:
        hidden: hidden widths of the tanh MLP.
        linear: add the zero-initialised linear term to the residual
            (`torch_ude.field.HybridField`; for a known model with a gain error).
        input_affine: the network's tanh layers read the states only and the recorded
            inputs enter the residual through the linear term alone (needs ``linear`` and a
            plant with inputs; `torch_ude.field.HybridField`).
        periodic: read the states the plant declares periodic (angles) as ``(sin q, cos q)``
            (`torch_ude.input_map`); False reads them scaled like the others.
        invariant: leave out of the network's input the states the plant declares invariant
            (cyclic coordinates its dynamics do not depend on); False reads them too.
        envelope: fade the trained residual to zero outside the region of the network's
            inputs that training saw (`torch_ude.envelope`; recorded at the end of the run from
            every jet offered to the sample buffer): True, False, or None (default) for on
            with recorded logs and off with a simulated plant.
        envelope_margin: the envelope's fade band as a fraction of its width per input column.
        residual_check: at the end, score the hybrid field and its physics alone on held-out
            data (validation logs, or a held-back simulated stretch) and export the physics
            alone, with status ``"residual rejected"``, if the residual predicts worse
            (`check_residual`).
        keep_rejected_residual: export the hybrid field even when the check rejects its residual.
        physics_first: for a known model that trains physical parameters
            (`torch_ude.systems.parameters`), the share of ``trainer.max_steps`` during which
            they train alone, the network held at its initial weights: the physics then explains
            what it can before the residual, which could imitate a physical term, starts
            learning what is left. In [0, 1]; 1 trains the physical parameters alone for the whole
            run with the residual switched off (zero), a gray-box fit of the known model's form
            whose exported field is the physics alone (no residual check).
        physics_refit: where the run exports its physics alone (``physics_first`` 1, or a residual
            the check rejected) and the known model trains physical parameters, refit them at
            the end to the exact minimum of the jet loss on the sample buffer, within their
            bounds (`torch_ude.physical.refit_physical_parameters`): the run's own objective,
            solved by least squares instead of ended at its minibatch descent (and, after a
            rejected residual, without the residual that took a share of the physics). The
            report (``metrics.json``: ``physics_refit``) holds the loss before and after and the
            values it started from.
        stream: streaming-estimator settings (phase sampling, calibration, gates, buffer).
        batch_size: minibatch size (64; v1: 32).
        lr: Adam learning rate (initial value of the cosine schedule).
        lr_min: final learning rate of the cosine schedule.
        schedule: ``"cosine"`` or ``"constant"`` (v1).
        ema_decay: EMA decay beta, or None for no weight averaging (v1).
        weight_decay: decoupled weight decay of the network weights per unit learning
            rate (``torch.optim.AdamW``, our addition to the paper's Adam); 0 is plain Adam.
        weight_decay_full_at: relative noise from which the full ``weight_decay``
            applies; below it the decay falls like the squared measured noise
            (`torch_ude.calibration.noise_adaptive_weight_decay`), set at calibration.
            None keeps ``weight_decay`` constant.
        grad_clip: gradient-norm clip.
        lambda1: first-order loss weight.
        log_every: log training scalars every this many updates.
        replay: after the stream ends, keep updating on the buffer until
            ``trainer.max_steps`` (Algorithm 1, line 19); False stops with the stream (v1).
        replay_updates: updates per replay chunk (fewer trips through the training
            loop's per-batch machinery; the update sequence does not depend on it).
        chunks_per_step: live chunks of the stream consumed per training step, each
            followed by its due updates (fewer trips through Lightning's per-batch
            machinery; the update sequence does not depend on it). The default 25 is one
            second of stream at the default 25 Hz training rate; callbacks that follow the
            update count (`torch_ude.training.FieldEvaluation`, `PeriodicCheckpoint`) then
            fire at the end of the step that crossed their period.
        num_threads: torch intra-op threads set at start-up (None leaves torch's
            setting); the per-update tensors are tiny, so one thread is fastest and
            immune to contention from other processes.
    """

    trainer_name = "jet_matching"  # recorded in the run's output files

    def __init__(self, hidden: tuple[int, ...] = (16, 16), linear: bool = False, input_affine: bool = False,
                 periodic: bool = True, invariant: bool = True, envelope: bool | None = None,
                 envelope_margin: float = DEFAULT_MARGIN,
                 residual_check: bool = True, keep_rejected_residual: bool = False, physics_first: float = 0.25,
                 physics_refit: bool = True,
                 stream: StreamSettings | None = None,
                 batch_size: int = 64, lr: float = 5e-3, lr_min: float = 5e-5,
                 schedule: Literal["cosine", "constant"] = "cosine", ema_decay: float | None = 0.995,
                 weight_decay: float = 0.0, weight_decay_full_at: float | None = None, grad_clip: float = 5.0,
                 lambda1: float = 1.0, log_every: int = 50, replay: bool = True, replay_updates: int = 25,
                 chunks_per_step: int = 25, num_threads: int | None = 1) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.stream_settings = stream if stream is not None else StreamSettings()
        self.stream_settings.validate()
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1; got {batch_size}.")
        if self.stream_settings.capacity < batch_size:
            raise ValueError(
                f"the buffer capacity B = {self.stream_settings.capacity} is smaller than the minibatch size "
                f"{batch_size}; raise model.stream.capacity or lower model.batch_size.")
        if not lr > 0 or lr_min < 0 or grad_clip <= 0:
            raise ValueError(f"need lr > 0, lr_min >= 0, grad_clip > 0; got {lr}, {lr_min}, {grad_clip}.")
        if not weight_decay >= 0:
            raise ValueError(f"weight_decay must be >= 0; got {weight_decay}.")
        if weight_decay_full_at is not None and not weight_decay_full_at > 0:
            raise ValueError(f"weight_decay_full_at must be positive or null; got {weight_decay_full_at}.")
        if ema_decay is not None and not 0.0 < ema_decay < 1.0:
            raise ValueError(f"ema_decay must be in (0, 1) or null; got {ema_decay}.")
        self.hidden, self.batch_size, self.lr, self.lr_min = tuple(hidden), int(batch_size), float(lr), float(lr_min)
        self.linear, self.input_affine = bool(linear), bool(input_affine)
        for name, value in (("periodic", periodic), ("invariant", invariant), ("envelope", envelope)):
            if not (isinstance(value, bool) or (name == "envelope" and value is None)):
                raise TypeError(f"model.{name} must be true or false{' or null' if name == 'envelope' else ''}; "
                                f"got {value!r}.")
        if isinstance(envelope_margin, bool) or not (isinstance(envelope_margin, (int, float)) and
                                                     math.isfinite(envelope_margin) and envelope_margin > 0):
            raise ValueError(f"model.envelope_margin must be a positive fraction of the envelope's width; got "
                             f"{envelope_margin!r}.")
        self.periodic, self.envelope, self.envelope_margin = periodic, envelope, float(envelope_margin)
        self.invariant = invariant
        self.residual_check, self.keep_rejected_residual = bool(residual_check), bool(keep_rejected_residual)
        if isinstance(physics_first, bool) or not (isinstance(physics_first, (int, float)) and 0 <= physics_first <= 1):
            raise ValueError(f"model.physics_first must be a share of the updates in [0, 1]; got {physics_first!r}.")
        self.physics_first = float(physics_first)
        if not isinstance(physics_refit, bool):
            raise TypeError(f"model.physics_refit must be true or false; got {physics_refit!r}.")
        self.physics_refit = physics_refit
        self.schedule, self.ema_decay, self.grad_clip = schedule, ema_decay, float(grad_clip)
        self.weight_decay, self.weight_decay_full_at = float(weight_decay), weight_decay_full_at
        self.lambda1, self.log_every, self.num_threads = float(lambda1), int(log_every), num_threads
        self.replay, self.replay_updates = bool(replay), int(replay_updates)
        if self.replay_updates < 1:
            raise ValueError(f"replay_updates must be >= 1; got {replay_updates}.")
        self.chunks_per_step = int(chunks_per_step)
        if self.chunks_per_step < 1:
            raise ValueError(f"chunks_per_step must be >= 1; got {chunks_per_step}.")
        self.save_hyperparameters()
        self.field: HybridField | None = None
        self._weights: torch.Tensor | None = None  # the field's flat weights (setup)
        self.ema: AveragedModel | None = None
        self.stream: StreamEstimator | None = None
        self.loss: JetLoss | None = None
        self._gen = torch.Generator()
        self.stats = {"updates": 0, "skipped_updates": 0, "update_s": 0.0, "stream_s": 0.0}
        self._fit_t0: float | None = None
        self.wall_s: float | None = None
        self.outputs: RunOutputs | None = None
        self.exported: HybridField | None = None  # the field the run exported (on_train_end)
        self._physics_updates = 0  # updates in which only the physical parameters train (on_train_start)
        self._warned_partial_buffer = False

    # ----- construction ------------------------------------------------------------------------
    def setup(self, stage: str) -> None:
        """Build the field (and its EMA copy) for the data module's plant, case and seed.

        Raises:
            ValueError: if the calibration phase does not fit in the stream, or for
                ``physics_first: 1`` with a known model that trains no physical parameters
                (before any work).
        """
        if self.num_threads is not None:
            torch.set_num_threads(self.num_threads)
        if self.field is not None:
            return
        dm = self.trainer.datamodule
        self._check_stream_length(dm.duration)
        known = copy.deepcopy(dm.system.known_field(dm.case))  # trained physics stay out of the plant's record
        self.field = self.initial_field(dm.system, known, dm.seed)
        if self.physics_only:
            if not self.field.physical:
                raise ValueError("model.physics_first: 1 trains the physical parameters alone, but the known model "
                                 f"{type(known).__name__} trains none; name them in its 'trainable' init_args or "
                                 "lower model.physics_first.")
            self.field = self.field.without_residual()  # the network stays frozen at zero: F = f_known(x, u; p)
        self._weights = flatten_parameters(self.field.mlp.ordered_parameters())
        if self.ema_decay is not None:
            self.ema = ExponentialAverage(self.field, self.ema_decay)
        self.stream = StreamEstimator(dm.system.n_states, dm.fs, self.stream_settings, seed=dm.seed,
                                      n_inputs=self.field.n_inputs)
        ones = torch.ones(dm.system.n_states, dtype=torch.float64)
        self.loss = JetLoss(ones, ones, self.lambda1, self.stream_settings.lambda2)  # scales set at calibration
        self._gen.manual_seed(dm.seed + 1)
        self._train_every = dm.chunk

    def _check_stream_length(self, duration: float) -> None:
        if self.stream_settings.calibration_s >= duration:
            length, longer = self.stream_length(duration)
            raise ValueError(
                f"model.stream.calibration_s = {self.stream_settings.calibration_s:g} s is not shorter than the "
                f"stream ({length}), so nothing would be left to train on; {longer} or shorten "
                f"model.stream.calibration_s.")

    def stream_length(self, duration: float | None = None) -> tuple[str, str]:
        """How the data module names the stream's length and how to make it longer, for messages.

        A data module with a ``stream_length()`` method (recorded logs: their files, fs and
        trimming) answers itself; otherwise the stream is ``data.duration`` seconds long.

        Returns:
            ``(length, fix)``, e.g. ``("data.duration = 12 s", "lengthen data.duration")``.
        """
        dm = self.trainer.datamodule
        describe = getattr(dm, "stream_length", None)
        if callable(describe):
            return describe()
        return f"data.duration = {dm.duration if duration is None else duration:g} s", "lengthen data.duration"

    def periodic_states(self, system) -> tuple[int, ...]:
        """The state indices the network reads as ``(sin, cos)``: the plant's angles, or none
        with ``periodic`` off."""
        return tuple(system.periodic) if self.periodic else ()

    def invariant_states(self, system) -> tuple[int, ...]:
        """The state indices the network does not read: the plant's cyclic coordinates, or none
        with ``invariant`` off."""
        return tuple(getattr(system, "invariant", ())) if self.invariant else ()

    def initial_field(self, system, known, seed: int) -> HybridField:
        """A seeded field of this module's network settings (``hidden``, ``linear``, ``input_affine``, the input
        map of `periodic_states` and `invariant_states`) around ``known``, ``system``'s known field; the field a
        run starts from, on the host and on the device (`microcontroller.generate.spec_from_config`)."""
        return HybridField.from_seed(known, seed, hidden=self.hidden, linear=self.linear,
                                     input_affine=self.input_affine, periodic=self.periodic_states(system),
                                     invariant=self.invariant_states(system))

    @property
    def physics_only(self) -> bool:
        """Whether the run trains the physical parameters alone (``physics_first`` = 1)."""
        return self.physics_first == 1.0

    def physics_updates(self) -> int:
        """The first updates in which only the physical parameters train (``physics_first`` of
        ``trainer.max_steps``; 0 for a known model that trains none)."""
        if self.field is None or not self.field.physical or not self.trainer.max_steps:
            return 0
        return int(self.physics_first * max(self.trainer.max_steps, 0))

    def configure_optimizers(self) -> dict:
        """Adam (AdamW with weight decay) with a cosine-annealed (or constant) learning rate.

        The schedule spans ``trainer.max_steps`` updates. A noise-adaptive decay is set
        at calibration, before the first update. The optimizer holds the network's flat weight
        vector (`torch_ude.update.flatten_parameters`) and, for a known model that trains
        physical parameters, their ``theta`` in a second group that is never decayed
        (``"physical": True``; decay would pull them to their configured values).
        """
        fused = tuple(int(v) for v in torch.__version__.split(".")[:2]) >= (2, 4)  # fused CPU Adam
        groups = [{"params": [self._weights]}]
        if self.field.physical:
            groups.append({"params": [self.field.known.theta], "weight_decay": 0.0, "physical": True})
        if self.weight_decay > 0:
            opt = torch.optim.AdamW(groups, lr=self.lr, weight_decay=self.weight_decay, fused=fused or None)
        else:
            opt = torch.optim.Adam(groups, lr=self.lr, fused=fused or None)
        total = self.trainer.max_steps
        if self.schedule == "cosine":
            if total is None or total < 1:
                raise ValueError("the cosine schedule needs trainer.max_steps (the iteration limit) >= 1.")
            sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total, eta_min=self.lr_min)
        else:
            sched = torch.optim.lr_scheduler.ConstantLR(opt, factor=1.0, total_iters=0)
        return {"optimizer": opt, "lr_scheduler": sched}

    def averaged_field(self) -> HybridField:
        """The field to evaluate and export: the EMA weights (the raw ones without EMA)."""
        return self.field if self.ema is None else self.ema.module

    # ----- training ----------------------------------------------------------------------------
    def on_fit_start(self) -> None:
        """Start the run's wall clock (interpreter start-up and set-up excluded) and mark the
        run folder's outputs as running (`RunOutputs.start`)."""
        self._fit_t0 = time.perf_counter()
        self.outputs = RunOutputs.of(self, self.trainer_name)
        self.outputs.start()

    def on_train_start(self) -> None:
        """Point the field's gradients at the flat gradient again (Lightning's ``zero_grad``
        before training set them to None); nothing for an engine without flat weights."""
        self._physics_updates = self.physics_updates()
        if self._weights is not None:
            link_gradients(self.field.mlp.ordered_parameters(), self._weights)
            if self.field.physical:
                self.field.known.theta.grad = torch.zeros_like(self.field.known.theta)

    def training_step(self, dataloader_iter: Iterator) -> None:
        """Consume up to ``chunks_per_step`` live chunks of the stream, each followed by the
        updates that are due, or one replay chunk.

        While the sample buffer cannot fill (`_deferrable`), live chunks are held back and
        pushed together, before the next chunk that might fill it or at the end of the step:
        no update can be due for them, and the estimator's result does not depend on how the
        stream is cut into chunks (tests/torch_ude/test_stream.py), so only the per-push
        overhead changes.
        """
        max_steps = self.trainer.max_steps if self.trainer.max_steps is not None and self.trainer.max_steps > 0 \
            else None
        held: list[dict] = []
        newest: int | None = None  # the newest tick of the held chunks and the current one
        try:
            for _ in range(self.chunks_per_step):
                batch = next(dataloader_iter)
                if isinstance(batch, tuple):  # (batch, batch_idx, dataloader_idx)
                    batch = batch[0]
                if batch["replay"]:
                    self._push_held(held)
                    if not self._can_replay():
                        self.trainer.should_stop = True
                        return
                    due = self.replay_updates
                    if max_steps is not None:
                        due = min(due, max_steps - self.trainer.global_step)
                    self._make_updates(due)
                    return
                if batch["ticks"].numel():
                    tick = int(batch["ticks"].max())
                    newest = tick if newest is None else max(newest, tick)
                if self._deferrable(newest):
                    held.append(batch)
                    continue
                self._push_held(held)
                newest = None
                self._make_updates(self._timed_push(batch))
                if max_steps is not None and self.trainer.global_step >= max_steps:
                    return
        finally:
            self._push_held(held)

    def _deferrable(self, newest: int | None) -> bool:
        """Whether live chunks whose newest tick is ``newest`` (None: they hold no sample), pushed
        after what the estimator holds, cannot fill the sample buffer: it is not full and has room
        for a window at every multiple of the stride among the ticks they reach (a chunk forms at
        most that many windows, bridged samples included). False before calibration and for an
        engine without a `StreamEstimator`."""
        st = self.stream
        if not isinstance(st, StreamEstimator) or st.buffer is None or st.ready:
            return False
        if newest is None or st.last_tick is None:
            return False
        return st.buffer.seen + (newest - st.last_tick) // st.stride + 1 < st.buffer.capacity

    def _push_held(self, held: list[dict]) -> None:
        """Push the held-back live chunks as one (`_deferrable`: no update is due) and forget them."""
        if not held:
            return
        chunks = held[:]
        held.clear()
        due = self._timed_push({k: torch.cat([c[k] for c in chunks]) for k in ("y", "ticks", "segment")})
        assert due == 0, "held-back chunks filled the sample buffer"

    def _timed_push(self, batch: dict) -> int:
        """`_push`, its wall time added to ``stats["stream_s"]``."""
        t0 = time.perf_counter()
        due = self._push(batch)
        self.stats["stream_s"] += time.perf_counter() - t0
        return due

    def _push(self, batch: dict) -> int:
        """Ingest a live chunk; returns the updates the training rate asks for (`due_updates`)."""
        before = self.stream.last_tick
        calibrated = self.stream.calibration is not None
        with torch.inference_mode():  # the estimator's tensors are data, never differentiated: lighter dispatch
            self.stream.push(batch["y"], batch["ticks"], batch["segment"])
        if not calibrated and self.stream.calibration is not None:
            self._on_calibrated()
        return due_updates(before, self.stream.last_tick, self._train_every) if self.stream.ready else 0

    def _make_updates(self, count: int) -> None:
        """Make ``count`` updates (`_update`) with the torch optimizer and schedule, then add the
        updates made to ``trainer.global_step`` (`_count_updates`)."""
        if count <= 0:
            return
        opt, sched = self.optimizers().optimizer, self.lr_schedulers()
        before = self.stats["updates"]
        for _ in range(count):
            self._update(opt, sched)
        self._count_updates(self.stats["updates"] - before)

    def _count_updates(self, made: int) -> None:
        """Add ``made`` updates to ``trainer.global_step`` (Lightning's count of a manually
        optimized module's optimizer steps, which ``trainer.max_steps`` stops; checked by
        tests/torch_ude/training/test_module.py and tests/microcontroller/test_backend.py)."""
        progress = self.trainer.fit_loop.epoch_loop.manual_optimization.optim_step_progress
        progress.total.ready += made
        progress.total.completed += made
        progress.current.ready += made
        progress.current.completed += made

    def stream_status(self) -> StreamStatus:
        """Calibration, counters and buffer fill of the streaming estimator."""
        st = self.stream
        return StreamStatus(st.calibration, dict(st.counters), 0 if st.buffer is None else st.buffer.fill,
                            self.stream_settings.capacity, 0 if st.buffer is None else st.buffer.seen)

    def _can_replay(self) -> bool:
        """Whether replay may update: enabled, and the buffer holds a minibatch (warn once if not full, unless
        the stream was recorded logs: a buffer that holds every jet of the logs is what a log wants)."""
        status = self.stream_status()
        if not self.replay or status.calibration is None or status.fill < self.batch_size:
            return False
        if not status.full and not self.trains_on_recorded_logs() and not self._warned_partial_buffer:
            self._warned_partial_buffer = True
            longer = self.stream_length()[1]
            rank_zero_warn(
                f"the stream ended with the sample buffer {status.fill}/{status.capacity} full; replay trains on the "
                f"{status.fill} jets it holds (metrics.json: buffer_full false). {longer[0].upper()}{longer[1:]} or "
                f"lower model.stream.capacity to fill it.")
        return True

    def _on_calibrated(self) -> None:
        dm = self.trainer.datamodule
        notes = calibration_notes(self.stream.calibration, dm.fs, self.stream_settings.half_width, dm.system.n_states)
        rank_zero_info(notes[0])
        for note in notes[1:]:
            rank_zero_warn(note)
        apply_calibration(self.stream.calibration, [self.field, self.averaged_field()], self.loss, self.optimizers(),
                          self.weight_decay, self.weight_decay_full_at)

    def weight_decay_in_use(self) -> float:
        """The optimizer's current weight decay (0 for plain Adam)."""
        return float(self.optimizers().optimizer.param_groups[0]["weight_decay"])

    def _update(self, opt: torch.optim.Optimizer, sched: torch.optim.lr_scheduler.LRScheduler) -> None:
        t0 = time.perf_counter()
        logging = (self.stats["updates"] + 1) % self.log_every == 0
        frozen = self._weights.grad if self.stats["updates"] < self._physics_updates else None
        step = jet_update(self.field, self.loss, self.stream.buffer, self.batch_size, self._gen, opt, sched, self.ema,
                          self.grad_clip, report_r2=logging, frozen=frozen)
        if step.skipped:
            self.stats["skipped_updates"] += 1
            return
        self.stats["updates"] += 1
        self.stats["update_s"] += time.perf_counter() - t0
        if logging:
            self._log_training(step.result, float(step.grad_norm), sched.get_last_lr()[0])

    def _log_training(self, res: JetResult, norm: float, lr: float) -> None:
        """Log the update's loss terms and the stream's state at the update count."""
        status = self.stream_status()
        cal = status.calibration
        values = {
            "train/loss": res.loss, "train/loss_r1": res.loss_r1, "train/loss_r2": res.loss_r2,
            "train/lambda2": cal.lambda2, "train/lr": lr, "train/grad_norm": norm,
            "train/weight_decay": self.weight_decay_in_use(),
            **{f"physics/{k}": v for k, v in (self.field.known.values().items() if self.field.physical else ())
               if k in self.field.known.trainable_names},
            "stream/m": float(cal.m), "stream/reject_rate": reject_rate(status.counters),
            "stream/reservoir_fill": float(status.fill), "stream/seen": float(status.seen),
            "stream/snr2": min(cal.snr2, 1e9),
        }
        sigma_true = self.trainer.datamodule.true_sigma
        for i, name in enumerate(self.trainer.datamodule.system.state_names):
            values[f"stream/sigma_hat_{name}"] = float(cal.sigma[i])
            if sigma_true is not None:
                values[f"stream/sigma_true_{name}"] = float(sigma_true[i])
        if self.logger is not None:  # straight to the logger, at the update count (not the chunk count)
            _log_scalars(self.logger, {k: float(v) for k, v in values.items()}, self.stats["updates"])

    # ----- evaluation --------------------------------------------------------------------------
    def evaluate(self, states: dict[str, torch.Tensor] | None = None) -> dict:
        """The data module's metrics of the averaged field (of the exported field once the run
        ended: the physics alone if its residual was rejected): field error and recovered damping
        on a simulated plant (`evaluate_field`), prediction errors on recorded logs."""
        field = self.exported if self.exported is not None else self.averaged_field()
        return self.trainer.datamodule.evaluate(field, states)

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        """Log ``val/e_field``, ``val/e_field_visited`` and ``val/c_hat`` of the averaged field."""
        self._log_eval("val", batch)

    def test_step(self, batch: dict, batch_idx: int) -> None:
        """Log ``test/...`` metrics of the averaged field."""
        self._log_eval("test", batch)

    def _log_eval(self, prefix: str, states: dict) -> None:
        out = self.evaluate(states)
        self.log_dict({f"{prefix}/{k}": out[k] for k in self.trainer.datamodule.eval_keys if out[k] is not None},
                      batch_size=1)

    # ----- trust: the envelope and the residual check ----------------------------------------------
    def training_span(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The range of every channel over the jets training was offered (`SampleBuffer.span`),
        states then inputs, or None before calibration."""
        buffer = self.stream.buffer if isinstance(self.stream, StreamEstimator) else None
        return None if buffer is None else buffer.span()

    def trains_on_recorded_logs(self) -> bool:
        """Whether the trainer's data module streams recorded logs (its ``recorded``), not a simulated plant."""
        return bool(getattr(self.trainer.datamodule, "recorded", False))

    def envelope_wanted(self) -> bool:
        """Whether the run fades its residual outside the envelope (``envelope``; None: recorded logs)."""
        if self.envelope is not None:
            return self.envelope
        return self.trains_on_recorded_logs()

    def install_envelope(self, fields: list[HybridField]) -> dict | None:
        """Record the envelope of the jets training saw on ``fields`` (`torch_ude.envelope`) and
        return its description for the run's outputs (None when the run has none).

        Raises:
            ValueError: when asked for an envelope with no jet seen (`envelope_from_span`).
        """
        if not self.envelope_wanted():
            return None
        span = self.training_span()
        if span is None:
            raise ValueError("model.envelope is on but training saw no jet, so there is no envelope to record; "
                             "train longer or set model.envelope: false.")
        return install_span(fields, self.trainer.datamodule.system, span, self.envelope_margin)

    def check_residual(self, field: HybridField) -> tuple[HybridField, dict | None]:
        """Score the hybrid field and its physics alone on held-out data (the data module's
        `held_out_errors`) and keep the residual only where it does not make prediction worse.

        Returns:
            ``(field to export, report)``: the field itself, or its physics alone
            (`HybridField.without_residual`) when the residual made the held-out score worse
            and ``keep_rejected_residual`` is off; the report holds both scores, the metric,
            and ``"rejected"``. ``(field, None)`` when the check is off, the run trained the
            physics alone (`physics_only`) or the data module has no held-out data.
        """
        dm = self.trainer.datamodule
        if not self.residual_check or self.physics_only or not hasattr(dm, "held_out_errors"):
            return field, None
        physics = field.without_residual()
        hybrid_errors, physics_errors = dm.held_out_errors(field), dm.held_out_errors(physics)
        if hybrid_errors is None:
            return field, None
        metric = held_out_metric(hybrid_errors)
        report = {"metric": metric, "hybrid": hybrid_errors[metric], "physics": physics_errors[metric],
                  "on": hybrid_errors["scored_on"]}
        report["rejected"] = not report["hybrid"] <= report["physics"]
        if report["rejected"]:
            keep = self.keep_rejected_residual
            rank_zero_warn(
                f"residual rejected: on {report['on']} the hybrid model predicts worse than its physics alone "
                f"({metric} {report['hybrid']:.4g} against {report['physics']:.4g}); "
                + ("the residual is kept (model.keep_rejected_residual)." if keep else
                   "the exported field is the physics alone (set model.keep_rejected_residual: true to keep it)."))
            if not keep:
                return physics, report
        return field, report

    def _buffer_jets(self, field: HybridField) -> tuple[torch.Tensor, ...] | None:
        """The sample buffer's jets as ``(x, xdot, xddot)`` or, with inputs, ``(x, xdot, xddot, u,
        udot)`` ((fill, n) and (fill, n_u) each); None without a filled buffer."""
        buffer = self.stream.buffer if isinstance(self.stream, StreamEstimator) else None
        if buffer is None or buffer.fill == 0:
            return None
        return jet_arguments(buffer.data[: buffer.fill], field.n_states, bool(field.n_inputs))

    def physical_parameters(self, field: HybridField) -> dict | None:
        """The trained physical parameters of ``field`` with their standard errors on the jets the
        sample buffer holds (`torch_ude.physical.physical_report`); None when nothing is trained."""
        jets = self._buffer_jets(field)
        if not field.physical or jets is None:
            return None
        return physical_report(field, self.loss, *jets)

    def refit_physics(self, field: HybridField) -> tuple[HybridField, dict | None]:
        """``field`` (a physics-alone field) with its physical parameters refitted on the sample
        buffer (``physics_refit``; `torch_ude.physical.refit_physical_parameters`), a copy.

        Returns:
            ``(field to export, report)``; ``(field, None)`` when the refit is off, the known model
            trains nothing or the buffer is empty. The report adds the held-out errors before and
            after (`held_out_errors` of the data module) where it has held-out data.
        """
        jets = self._buffer_jets(field)
        if not self.physics_refit or not field.physical or jets is None:
            return field, None
        refit = copy.deepcopy(field)
        report = refit_physical_parameters(refit, self.loss, *jets)
        return refit, {**report, **self.held_out_change(field, refit)}

    def held_out_change(self, before: HybridField, after: HybridField) -> dict:
        """The held-out errors of two fields (`held_out_errors` of the data module, its own metric): ``{"metric",
        "held_out_before", "held_out_after", "on"}``, or ``{}`` where the data module has no held-out data."""
        dm = self.trainer.datamodule
        errors = dm.held_out_errors(before) if hasattr(dm, "held_out_errors") else None
        if errors is None:
            return {}
        metric = held_out_metric(errors)
        return {"metric": metric, "held_out_before": errors[metric],
                "held_out_after": dm.held_out_errors(after)[metric], "on": errors["scored_on"]}

    def run_metrics(self) -> dict:
        """The keys every trainer reports in ``metrics.json``, plus stream diagnostics."""
        out = self.evaluate()
        status, dm = self.stream_status(), self.trainer.datamodule
        cal, updates = status.calibration, self.stats["updates"]
        out.update({
            "sigma_hat": None if cal is None else cal.sigma.tolist(),
            "sigma_true": None if dm.true_sigma is None else dm.true_sigma.tolist(),
            "m": None if cal is None else cal.m,
            "lambda2": None if cal is None else cal.lambda2,
            "weight_decay": self.weight_decay_in_use(),
            "reject_rate": reject_rate(status.counters),
            "updates": updates,
            "skipped_updates": self.stats["skipped_updates"],
            "wall_s": self.wall_s,
            "update_ms": 1e3 * self.stats["update_s"] / updates if updates else None,
            "stream_s": self.stats["stream_s"],
            "calibration": None if cal is None else cal.to_dict(),
            "counters": status.counters,
            "buffer_fill": status.fill,
            "buffer_capacity": status.capacity,
            "buffer_full": status.full,
            "state_bytes": self.state_bytes(),
            "quality": self.stream_quality(status),
        })
        return out

    def stream_quality(self, status: StreamStatus | None = None) -> dict:
        """The stream's quality indicators and why the run is degraded, if it is
        (`torch_ude.training.quality.stream_quality`; the misfit gate's history where the engine has one)."""
        status = self.stream_status() if status is None else status
        gate = getattr(self.stream, "gate", None) if isinstance(self.stream, StreamEstimator) else None
        dm = self.trainer.datamodule
        return stream_quality(status.calibration, status.counters, self.stream_settings, dm.system.n_states,
                              None if gate is None else gate.history, dm.derived_states)

    def quality_status(self, metrics: dict) -> str:
        """``"degraded"`` with a one-line warning when the run's quality indicators (``metrics["quality"]``) say
        it learned from a stream it could not trust, else ``"finished"``."""
        reasons = metrics["quality"]["degraded"]
        if not reasons:
            return "finished"
        rank_zero_warn(f"degraded run: {'; '.join(reasons)}. The model was trained on these jets and may be wrong; "
                       f"check the sensor data (metrics.json: status \"degraded\", quality).")
        return "degraded"

    def state_bytes(self) -> int:
        """Bytes of the training state: the estimator (its buffer), the weights and their gradients,
        the optimizer moments and the EMA (`torch_ude.training.outputs.tensor_bytes`)."""
        return tensor_bytes(self.stream.state_dict(), self.field.parameters_list(), self.field.parameters_list(),
                            self.optimizers().optimizer.state_dict()["state"],
                            None if self.ema is None else self.ema.state_dict())

    def failure(self) -> str | None:
        """Why the run has no trained model, or None if it has one (see the class doc)."""
        status, updates = self.stream_status(), self.stats["updates"]
        longer = self.stream_length()[1]
        if status.calibration is None:
            return (f"the stream ended before the calibration phase finished, so nothing was trained; {longer} or "
                    f"shorten model.stream.calibration_s (or check data.faults: the calibration needs the phase's "
                    f"samples).")
        if updates > 0:
            return None
        fill, capacity = status.fill, status.capacity
        if fill < self.batch_size:
            return (f"the run made 0 updates: the sample buffer holds {fill} jets, fewer than one minibatch "
                    f"(model.batch_size = {self.batch_size}; {status.counters['accepted']} of {status.counters['windows']} "
                    f"windows accepted); {longer}, lower model.batch_size or check the sensor faults.")
        if not (self.replay or status.full):
            return (f"the run made 0 updates: the stream ended with the sample buffer {fill}/{capacity} full and "
                    f"model.replay is false, so training never started; set model.replay true, {longer} or lower "
                    f"model.stream.capacity.")
        return (f"the run made 0 updates: all {self.stats['skipped_updates']} were skipped for a non-finite loss "
                f"or gradient; check the sensor data and lower model.lr.")

    def on_train_end(self) -> None:
        """Stop the wall clock, then write ``field.pt``, ``field.json`` and ``metrics.json``.

        Raises:
            RuntimeError: if the run has no trained model (`failure`); ``metrics.json``
                then records ``"status": "failed"`` and the reason, and no field is written.
        """
        self.wall_s = time.perf_counter() - self._fit_t0
        dm = self.trainer.datamodule
        reason = self.failure()
        if reason is not None:
            self.outputs.fail(reason, self.run_metrics())
            raise RuntimeError(reason)
        envelope = self.install_envelope([self.field, self.averaged_field()])
        self.exported, check = self.check_residual(self.averaged_field())
        rejected = self.exported is not self.averaged_field()
        refit = None
        if rejected or self.physics_only:
            self.exported, refit = self.refit_physics(self.exported)
        metrics = self.run_metrics()
        metrics.update({"envelope": envelope, "residual_check": check, "physics_refit": refit,
                        "physical_parameters": self.physical_parameters(self.exported)})
        degraded = self.quality_status(metrics)
        status = "residual rejected" if rejected else degraded
        paths = self.outputs.finish(self.exported, metrics, status)
        buffer = f"buffer {metrics['buffer_fill']}/{metrics['buffer_capacity']}" + (
            "" if metrics["buffer_full"] else " (never full: trained on what it held)")
        rank_zero_info(
            f"jet matching: {dm.summary(metrics)}, m = {metrics['m']}, lambda2 = {metrics['lambda2']}, "
            f"{metrics['updates']} updates in {metrics['wall_s']:.1f} s, {buffer}; "
            f"outputs in {paths['metrics'].parent}")
        logger = self.logger
        if logger is not None and hasattr(logger.experiment, "add_figure"):
            fig = dm.figure(self.averaged_field())
            if fig is not None:
                logger.experiment.add_figure("eval/residual", fig, global_step=self.global_step)
            for k in dm.eval_keys:
                if metrics[k] is not None:
                    logger.experiment.add_scalar(f"eval/{k}", metrics[k], global_step=self.global_step)

    # ----- checkpoints -------------------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict) -> None:
        """Add the stream estimator, the minibatch generator and the run counters."""
        checkpoint["jet_stream"] = self.stream.state_dict()
        checkpoint["jet_generator"] = self._gen.get_state()
        checkpoint["jet_stats"] = dict(self.stats)

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        """Restore what `on_save_checkpoint` added (the weights load with the state dict) and,
        when fitting, fit the schedule to ``trainer.max_steps`` (`resume_schedule`).

        Raises:
            ValueError: when fitting from a checkpoint whose optimizer holds the field's tensors one
                by one (written before the flat weights of `torch_ude.update.flatten_parameters`):
                its Adam moments do not fit the flat optimizer.
        """
        fitting = self._trainer is not None and self._trainer.state.fn == TrainerFn.FITTING
        if fitting and self._weights is not None and checkpoint.get("optimizer_states"):
            held = len(checkpoint["optimizer_states"][0]["param_groups"][0]["params"])
            if held != 1:
                raise ValueError(f"This checkpoint's optimizer holds {held} per-tensor parameters; this version "
                                 "trains one flat weight vector, so the run cannot be resumed from it. Start a new "
                                 "run, or evaluate the checkpoint with `torch-ude validate`/`test` (the weights load).")
        self.stream = StreamEstimator.from_state_dict(checkpoint["jet_stream"])
        self._gen.set_state(checkpoint["jet_generator"])
        self.stats = dict(checkpoint["jet_stats"])
        if self.stream.calibration is not None:  # s1, s2 come back with the state dict
            self.loss.lambda2 = self.stream.calibration.lambda2
        if fitting:
            self.resume_schedule(checkpoint, self._trainer.max_steps)

    def resume_schedule(self, checkpoint: dict, max_steps: int) -> None:
        """Fit a checkpoint's optimizer and schedule state to a run of ``max_steps`` updates
        (`torch_ude.training.resume.extend_cosine_schedule`), and say so in one line.

        Raises:
            ValueError: if ``max_steps`` does not exceed the checkpoint's update count.
        """
        check_extends(int(checkpoint["global_step"]), max_steps)
        changed = extend_cosine_schedule(checkpoint, max_steps) if self.schedule == "cosine" else None
        if changed is not None:
            k, old, lr = changed
            rank_zero_info(
                f"resuming at update {k} with trainer.max_steps = {max_steps} (the checkpoint's cosine schedule "
                f"spans {old}): the learning rate now follows the {max_steps}-update schedule, {lr:.4g} at update {k}.")

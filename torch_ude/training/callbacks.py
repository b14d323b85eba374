"""Callbacks: periodic evaluation of the averaged field, periodic checkpoints, resident memory.

The first two follow the module's own update count (``trainer.global_step``), which a trainer
may advance by several updates per training step (jet matching's replay makes
``replay_updates`` per chunk): they fire when the count *crossed* a multiple of their
period, not only when it lands on one. `ResidentMemory` samples per chunk of the stream.
"""
from __future__ import annotations

from pathlib import Path

import lightning as L
import psutil
from lightning.pytorch.callbacks import ModelCheckpoint

__all__ = ["FieldEvaluation", "PeriodicCheckpoint", "ResidentMemory"]


def _check_period(every: int, name: str = "every_n_updates") -> int:
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        raise ValueError(f"{name} must be an integer >= 1; got {every!r}.")
    return every


class FieldEvaluation(L.Callback):
    """Every ``every_n_updates`` updates, log ``eval/e_field``, ``eval/e_field_visited`` and
    ``eval/c_hat`` of the module's averaged (EMA) field.

    Works with any module that has an ``evaluate() -> dict`` method and counts its
    updates in ``trainer.global_step``.

    Args:
        every_n_updates: evaluation period in optimizer steps (>= 1).
    """

    def __init__(self, every_n_updates: int = 1000) -> None:
        self.every = _check_period(every_n_updates)
        self._last = 0

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Count periods from the starting update (the checkpoint's, when resuming)."""
        self._last = trainer.global_step

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch, batch_idx) -> None:
        """Evaluate when the update count crossed a multiple of the period."""
        step = trainer.global_step
        if step // self.every > self._last // self.every:
            self._last = step
            out = pl_module.evaluate()
            if trainer.logger is not None:
                trainer.logger.log_metrics({f"eval/{k}": out[k] for k in ("e_field", "e_field_visited", "c_hat")},
                                           step=step)


class PeriodicCheckpoint(ModelCheckpoint):
    """Lightning's `ModelCheckpoint`, saving whenever the update count crossed a multiple of
    ``every_n_updates``, plus ``last.ckpt`` and a checkpoint at the end of the run.

    Lightning's ``every_n_train_steps`` saves only when the step count lands exactly on a
    multiple, which a trainer that makes several updates per step can jump over. Here the
    trigger is the only change: file names, ``save_top_k``, ``last.ckpt`` and the
    end-of-run save are `ModelCheckpoint`'s, except that a run which made no update
    saves nothing. A killed run resumes from the newest file with
    ``torch-ude fit --config ... --ckpt_path .../checkpoints/last.ckpt``.

    Args:
        every_n_updates: checkpoint period in updates (>= 1).
        dirpath: checkpoint folder; None is Lightning's (``<log dir>/checkpoints``).
        filename: file-name pattern (Lightning's syntax, e.g. ``"{step}"``).
        save_last: also keep ``last.ckpt`` (the newest state).
        save_top_k: periodic files kept: 1 keeps only the newest, -1 keeps all.
    """

    def __init__(self, every_n_updates: int = 1000, dirpath: str | Path | None = None, filename: str = "{step}",
                 save_last: bool = True, save_top_k: int = 1) -> None:
        super().__init__(dirpath=dirpath, filename=filename, save_last=save_last, save_top_k=save_top_k)
        self.every = _check_period(every_n_updates)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Count periods from the starting update (the checkpoint's, when resuming)."""
        super().on_train_start(trainer, pl_module)
        self._start_step = self._last_global_step_saved = trainer.global_step

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Save ``last.ckpt`` if nothing was saved yet, unless the run made no update at all."""
        if trainer.global_step > self._start_step:
            super().on_train_end(trainer, pl_module)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch, batch_idx) -> None:
        """Save when the update count crossed a multiple of the period since the last save."""
        if trainer.global_step // self.every <= self._last_global_step_saved // self.every:
            return
        if self._should_skip_saving_checkpoint(trainer):
            return
        candidates = self._monitor_candidates(trainer)
        self._save_topk_checkpoint(trainer, candidates)
        self._save_last_checkpoint(trainer, candidates)


class ResidentMemory(L.Callback):
    """Every ``every_n_batches`` training steps, record the process's resident memory: does a long
    stream grow the trainer's memory?

    Works with `torch_ude.training.JetMatchingModule` (its ``stream`` and ``stats``) on a data module
    with a sample rate ``fs``.

    Args:
        every_n_batches: sampling period in training steps (>= 1); a step of the module consumes
            ``chunks_per_step`` chunks of the stream (by default 25 chunks of 40 ms: 1 s of stream).

    Attributes:
        samples: one dict per sample: ``stream_s`` (the stream's time in s at its newest sample), ``rss_mb``
            (resident set size in MiB) and ``updates`` (the module's update count).
    """

    def __init__(self, every_n_batches: int) -> None:
        self.every = _check_period(every_n_batches, "every_n_batches")
        self.samples: list[dict] = []
        self._process = psutil.Process()

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch, batch_idx) -> None:
        """Sample when ``batch_idx`` is a multiple of the period."""
        if batch_idx % self.every == 0:
            stream_s = (pl_module.stream.last_tick or 0) / trainer.datamodule.fs
            self.samples.append({"stream_s": stream_s, "rss_mb": self._process.memory_info().rss / 2**20,
                                 "updates": pl_module.stats["updates"]})

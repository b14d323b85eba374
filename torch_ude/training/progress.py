"""A progress bar that counts updates, not training steps.

Lightning's `TQDMProgressBar` advances by one per training step (``batch_idx + 1``)
against a total of ``trainer.max_steps``. A trainer that makes several updates per
step (jet matching's replay chunks make ``replay_updates`` each) reaches ``max_steps``
long before the bar does: the default pendulum run stopped at 22 % of 8000. This bar
is Lightning's, driven by the update count ``trainer.global_step`` (the optimizer
steps made, the count every callback of `torch_ude.training.callbacks` follows).
"""
from __future__ import annotations

from typing import Any

import lightning as L
from lightning.pytorch.callbacks import TQDMProgressBar
from lightning.pytorch.callbacks.progress.tqdm_progress import _update_n

__all__ = ["UpdateProgressBar"]


class UpdateProgressBar(TQDMProgressBar):
    """Lightning's `TQDMProgressBar` whose training bar shows ``trainer.global_step`` of
    ``trainer.max_steps`` updates.

    A resumed run starts the bar at the checkpoint's update count. Without a positive
    ``max_steps`` the total is Lightning's (training batches). The bar is redrawn when
    the count has moved by at least ``refresh_rate`` since the last redraw (it may jump
    by many updates per step) and at the last update.

    Args:
        refresh_rate: redraw after at least this many updates (0 disables the bar).
        leave: leave the finished bar on screen.
    """

    def __init__(self, refresh_rate: int = 1, leave: bool = False) -> None:
        super().__init__(refresh_rate=refresh_rate, leave=leave)
        self._shown = 0

    @staticmethod
    def _max_updates(trainer: L.Trainer) -> int | None:
        steps = trainer.max_steps
        return steps if steps is not None and steps > 0 else None

    def on_train_start(self, trainer: L.Trainer, *args: Any) -> None:
        """Lightning's bar, set to the update count (a resumed run may skip the epoch start)."""
        super().on_train_start(trainer, *args)
        self._start(trainer)

    def on_train_epoch_start(self, trainer: L.Trainer, *args: Any) -> None:
        """Lightning's reset, then the update count again."""
        super().on_train_epoch_start(trainer, *args)
        self._start(trainer)

    def _start(self, trainer: L.Trainer) -> None:
        """Set the total to ``max_steps`` and start at the current update count."""
        total = self._max_updates(trainer)
        if total is None:
            return
        bar = self.train_progress_bar
        bar.total = total
        bar.initial = self._shown = trainer.global_step
        _update_n(bar, trainer.global_step)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        """Show the update count when it moved by ``refresh_rate`` or reached the total."""
        if self._max_updates(trainer) is None:
            super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
            return
        bar, n = self.train_progress_bar, trainer.global_step
        if bar is None or not self.is_enabled or n == self._shown:
            return
        if n - self._shown >= self.refresh_rate or n >= bar.total:
            self._shown = n
            _update_n(bar, n)
            bar.set_postfix(self.get_metrics(trainer, pl_module))

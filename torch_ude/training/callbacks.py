"""Callbacks: periodic evaluation of the averaged field during training."""
from __future__ import annotations

import lightning as L

__all__ = ["FieldEvaluation"]


class FieldEvaluation(L.Callback):
    """Every ``every_n_updates`` updates, log ``eval/e_field``, ``eval/e_field_visited`` and
    ``eval/c_hat`` of the module's averaged (EMA) field.

    Works with any module that has an ``evaluate() -> dict`` method and counts its
    updates in ``trainer.global_step``.

    Args:
        every_n_updates: evaluation period in optimizer steps (>= 1).
    """

    def __init__(self, every_n_updates: int = 1000) -> None:
        if every_n_updates < 1:
            raise ValueError(f"every_n_updates must be >= 1; got {every_n_updates}.")
        self.every = int(every_n_updates)
        self._last = 0

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch, batch_idx) -> None:
        """Evaluate when the update count crossed a multiple of the period."""
        step = trainer.global_step
        if step // self.every > self._last // self.every:
            self._last = step
            out = pl_module.evaluate()
            if trainer.logger is not None:
                trainer.logger.log_metrics({f"eval/{k}": out[k] for k in ("e_field", "e_field_visited", "c_hat")},
                                           step=step)

"""A callback that kills its own process with SIGKILL (tests of a killed run; ``--trainer.callbacks+``)."""
from __future__ import annotations

import os
import signal

import lightning as L

#: The environment variable that arms `KillAt`: the same command then dies or runs to the end.
ARMED = "TORCH_UDE_TEST_KILL"


class KillAt(L.Callback):
    """SIGKILL this process once the update count reaches ``step``, when the environment sets `ARMED` to ``1``.

    Args:
        step: the update count (``trainer.global_step``) at which to die.
    """

    def __init__(self, step: int) -> None:
        self.step = int(step)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch, batch_idx) -> None:
        if os.environ.get(ARMED) == "1" and trainer.global_step >= self.step:
            os.kill(os.getpid(), signal.SIGKILL)

"""Resuming a run from a checkpoint with a new iteration limit (``trainer.max_steps``).

Extending a finished run means continuing on the schedule of the new horizon: from the
checkpoint's update k on, the learning rate is that of a run planned for the new limit
N from the start. A limit that does not exceed k leaves nothing to train and is an error.
"""
from __future__ import annotations

import math

__all__ = ["check_extends", "extend_cosine_schedule"]


def check_extends(done: int, max_steps: int | None, unit: str = "updates") -> None:
    """Check that a resumed run has something left to do.

    Args:
        done: updates (or iterations) the checkpoint has made.
        max_steps: ``trainer.max_steps`` of the resumed run (None or -1: no limit).
        unit: what ``done`` counts, for the message.

    Raises:
        ValueError: if ``max_steps`` is a limit that does not exceed ``done``.
    """
    if max_steps is not None and 0 <= max_steps <= done:
        raise ValueError(
            f"trainer.max_steps = {max_steps} does not exceed the {done} {unit} the checkpoint has made, so there is "
            f"nothing left to train; to extend the run pass a larger --trainer.max_steps.")


def extend_cosine_schedule(checkpoint: dict, max_steps: int) -> tuple[int, int, float] | None:
    """Recompute a checkpoint's `torch.optim.lr_scheduler.CosineAnnealingLR` for ``max_steps``.

    The scheduler state gets ``T_max = N`` (``N = max_steps``) and the optimizer's
    learning rates the closed form ``lr_k = eta_min + (lr_0 - eta_min) (1 + cos(pi k / N)) / 2``
    at the checkpoint's step k, so that the scheduler's next steps follow an N-step
    schedule. A checkpoint whose horizon already is N is left as it is (bit-exact resume).

    Args:
        checkpoint: a Lightning checkpoint with one optimizer and one cosine scheduler,
            edited in place before Lightning loads their states.
        max_steps: the new horizon N (>= 1).

    Returns:
        ``(k, old horizon, new learning rate of the first group)``, or None if unchanged.
    """
    state = checkpoint["lr_schedulers"][0]
    old = state["T_max"]
    if old == max_steps:
        return None
    k, eta_min = int(state["last_epoch"]), state["eta_min"]
    lrs = [eta_min + (base - eta_min) * (1.0 + math.cos(math.pi * k / max_steps)) / 2.0 for base in state["base_lrs"]]
    state["T_max"], state["_last_lr"] = max_steps, lrs
    for group, lr in zip(checkpoint["optimizer_states"][0]["param_groups"], lrs):
        group["lr"] = lr
    return k, old, lrs[0]

"""Polynomial-misfit quality gate (Eq. 27).

A window is rejected when, in any channel,
``||R y|| > factor * median(||R y||) + floor * RMS(y)``; the median runs over the
misfits of the ``history`` most recent windows before it (all windows that reached
the gate, accepted or not), so a burst of bad windows cannot drag it up quickly.
"""
from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["QualityGate"]


class QualityGate:
    """Running-median misfit gate with a preallocated history.

    Args:
        n_states: number of channels n.
        factor: multiple of the running median (6 in the paper).
        floor: multiple of the window RMS added as a floor (0.02 in the paper).
        history: number of recent windows in the median (>= 1).
        enabled: if False every window passes (ablation), but misfits are still tracked.
        dtype: dtype of the history and the thresholds (float64 host, float32 as on a device).
    """

    def __init__(self, n_states: int, factor: float = 6.0, floor: float = 0.02, history: int = 101,
                 enabled: bool = True, dtype: torch.dtype = torch.float64) -> None:
        if history < 1 or factor <= 0 or floor < 0:
            raise ValueError(f"need history >= 1, factor > 0, floor >= 0; got {history}, {factor}, {floor}.")
        self.factor, self.floor, self.enabled = float(factor), float(floor), bool(enabled)
        self.history = torch.full((int(history), n_states), float("nan"), dtype=dtype)

    def check(self, misfit: Tensor, rms: Tensor) -> Tensor:
        """Gate a run of consecutive windows.

        Args:
            misfit: ``||R y||`` per window and channel, shape (W, n).
            rms: RMS of each window's samples per channel, shape (W, n).

        Returns:
            Boolean acceptance mask, shape (W,).
        """
        w, k = misfit.shape[0], self.history.shape[0]
        if w == 0:
            return torch.ones(0, dtype=torch.bool)
        joined = torch.cat((self.history, misfit.to(self.history.dtype)))  # (k + W, n)
        medians = joined.unfold(0, k, 1)[:w].nanmedian(dim=2).values  # the k values before each window
        self.history = joined[-k:].clone()
        if not self.enabled:
            return torch.ones(w, dtype=torch.bool)
        threshold = self.factor * medians + self.floor * rms.to(medians.dtype)
        passed = ~(misfit > threshold)  # NaN medians (empty history) compare False: accept
        return passed.all(dim=1)

    def state_dict(self) -> dict:
        """The misfit history."""
        return {"history": self.history.clone()}

    def load_state_dict(self, state: dict) -> None:
        """Restore from `state_dict`."""
        self.history = state["history"].clone()

"""Fixed-capacity sample buffers: reservoir sampling (Vitter's algorithm R) or FIFO.

Each sample is an SG jet ``(x_hat, xdot_hat, xddot_hat)`` stored as a ``(3, n)`` row.
Memory is allocated once at construction and never grows with the stream. Besides the
samples it holds, a buffer keeps the smallest and largest value of each channel over every
sample it was offered (`SampleBuffer.span`): the region training saw, from which the trust
envelope is built (`torch_ude.envelope`). A buffer may store its samples in IEEE binary16, in
units of a per-channel scale (`stored_jets`), as the C trainer's float16 reservoir does.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from .prng import Pcg32

__all__ = ["PRECISIONS", "SampleBuffer", "stored_jets", "jet_arguments"]

#: The storage precisions of a buffer (``stream.reservoir_precision``).
PRECISIONS = ("float32", "float16")


def jet_arguments(jets: Tensor, n_states: int, inputs: bool) -> tuple[Tensor, ...]:
    """Buffered jets (W, 3, n + n_u) as the jet loss's arguments: ``(x, xdot, xddot)``, (W, n) each, and with
    ``inputs`` also ``(u, udot)``, (W, n_u) each."""
    n = n_states
    x, xdot, xddot = jets[:, 0, :n], jets[:, 1, :n], jets[:, 2, :n]
    return (x, xdot, xddot, jets[:, 0, n:], jets[:, 1, n:]) if inputs else (x, xdot, xddot)


def stored_jets(samples: Tensor, scale: Tensor) -> Tensor:
    """The values a float16 buffer holds for ``samples``: each divided by its channel's scale, rounded to
    the nearest IEEE binary16 (ties to even, binary16 subnormals, +-inf from 65520 on) and multiplied
    back, exactly as the C trainer stores and reads its reservoir (``tu_half.h``; in float32, bit for bit).

    Args:
        samples: (W, 3, n) jets ``(x_hat, xdot_hat, xddot_hat)`` in each channel's units.
        scale: (n,) positive scales (the calibrated ``x_rms``), same dtype.

    Returns:
        (W, 3, n), ``samples``' dtype: binary16 values times ``scale`` (the quotient is formed in
        ``samples``' dtype and, for float64, rounded to float32 first, as a device would).
    """
    quotient = samples / scale
    if quotient.dtype == torch.float64:
        quotient = quotient.to(torch.float32)
    return quotient.to(torch.float16).to(samples.dtype) * scale


class SampleBuffer:
    """A preallocated buffer of ``capacity`` jet samples.

    Modes:
        ``"reservoir"``: after the buffer is full, the i-th sample (0-based) replaces a
        uniformly chosen slot with probability ``capacity / (i + 1)``, so the buffer is
        a uniform random subset of everything seen (Vitter 1985).
        ``"fifo"``: the most recent ``capacity`` samples (the paper's v1 rolling buffer).

    Forgetting (ours, for a plant that changes): with ``forget_window`` W >= capacity, the
    i-th sample replaces a slot with probability ``capacity / min(i + 1, W)``: uniform over
    everything seen until W samples, then a constant ``capacity / W``, so an old sample
    survives n later ones with probability ``(1 - 1/W)^n``: the buffer holds roughly the last
    W samples' worth of the stream.

    Args:
        capacity: B, number of samples held (>= 1).
        n_states: n.
        mode: ``"reservoir"`` or ``"fifo"``.
        seed: seed of the replacement generator (numpy's, unless ``generator`` is given).
        dtype: storage dtype (float64 host, float32 device).
        generator: a `torch_ude.prng.Pcg32` to draw the replacement slots from instead,
            one ``below(min(i, W - 1) + 1)`` per sample offered past the capacity, exactly as
            the C trainer does.
        forget_window: W of the forgetting reservoir (>= capacity), or None for Vitter's
            uniform reservoir.
        half_scale: (n,) scales of float16 storage (`stored_jets`; the calibrated ``x_rms``), or
            None to store at ``dtype``. The stream rounds its jets with `stored` before offering
            them; `add` stores what it is given.
    """

    def __init__(self, capacity: int, n_states: int, mode: str = "reservoir", seed: int = 0,
                 dtype: torch.dtype = torch.float64, generator: Pcg32 | None = None,
                 forget_window: int | None = None, half_scale: Tensor | None = None) -> None:
        if int(capacity) != capacity or capacity < 1:
            raise ValueError(f"capacity must be a positive integer; got {capacity!r}.")
        if mode not in ("reservoir", "fifo"):
            raise ValueError(f"mode must be 'reservoir' or 'fifo'; got {mode!r}.")
        if forget_window is not None and (int(forget_window) != forget_window or forget_window < capacity):
            raise ValueError(f"forget_window must be an integer >= capacity ({capacity}) or None; got {forget_window!r}.")
        self.capacity, self.mode = int(capacity), mode
        self._bound_cap = None if forget_window is None else int(forget_window) - 1
        self.data = torch.zeros(self.capacity, 3, n_states, dtype=dtype)
        self.seen = 0
        self.low = torch.full((n_states,), math.inf, dtype=dtype)
        self.high = torch.full((n_states,), -math.inf, dtype=dtype)
        self._rng = np.random.default_rng(seed)
        self._pcg = generator
        self.half_scale = None if half_scale is None else torch.as_tensor(half_scale, dtype=dtype).clone()

    def stored(self, samples: Tensor) -> Tensor:
        """``samples`` (W, 3, n) as this buffer stores them: unchanged, or rounded to float16 in units of
        ``half_scale`` (`stored_jets`)."""
        return samples if self.half_scale is None else stored_jets(samples, self.half_scale)

    @property
    def fill(self) -> int:
        """Number of occupied slots."""
        return min(self.seen, self.capacity)

    @property
    def full(self) -> bool:
        """True once every slot holds a sample."""
        return self.seen >= self.capacity

    def add(self, samples: Tensor) -> None:
        """Offer samples in stream order.

        Args:
            samples: shape (W, 3, n), rows ``(x_hat, xdot_hat, xddot_hat)``.
        """
        w = samples.shape[0]
        if w == 0:
            return
        low, high = torch.aminmax(samples[:, 0], dim=0)
        torch.minimum(self.low, low, out=self.low)
        torch.maximum(self.high, high, out=self.high)
        index = self.seen + np.arange(w)
        if self.mode == "fifo":
            slots = index % self.capacity
        else:
            drawn = index if self._bound_cap is None else np.minimum(index, self._bound_cap)
            if self._pcg is not None:
                slots = np.array([i if i < self.capacity else self._pcg.below(int(d) + 1) for i, d in zip(index, drawn)])
            else:
                slots = np.where(index < self.capacity, index, self._rng.integers(0, drawn + 1))
        chosen = np.flatnonzero(slots < self.capacity)
        kept = slots[chosen]
        if len(set(kept.tolist())) < kept.size:
            # a later sample that lands on the same slot overwrites an earlier one
            _, last = np.unique(kept[::-1], return_index=True)
            chosen = chosen[::-1][last]
            kept = slots[chosen]
        if chosen.size:
            self.data.index_copy_(0, torch.as_tensor(kept), samples[torch.as_tensor(chosen)])  # distinct slots
        self.seen += w

    def span(self) -> tuple[Tensor, Tensor]:
        """The smallest and largest value of each channel over the value rows ``x_hat`` of every
        sample offered so far (held or replaced), (n,) each; ``+inf`` and ``-inf`` before any."""
        return self.low.clone(), self.high.clone()

    def sample(self, batch: int, generator: torch.Generator | Pcg32) -> Tensor:
        """A minibatch drawn uniformly with replacement from the occupied slots, (batch, 3, n).

        ``generator``: a torch generator, or a `Pcg32` (the C trainer's draws, in order).
        """
        if self.fill == 0:
            raise RuntimeError("the sample buffer is empty; offer samples before drawing a minibatch.")
        if isinstance(generator, Pcg32):
            idx = generator.indices(batch, self.fill)
        else:
            idx = torch.randint(0, self.fill, (batch,), generator=generator)
        return torch.index_select(self.data, 0, idx)  # the rows data[idx], one kernel

    def state_dict(self) -> dict:
        """Buffer contents, counters and generator state."""
        state = {"data": self.data.clone(), "seen": self.seen, "rng": self._rng.bit_generator.state,
                 "low": self.low.clone(), "high": self.high.clone()}
        if self._pcg is not None:
            state["pcg"] = self._pcg.get_state()
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restore from `state_dict`."""
        if state["data"].shape != self.data.shape:
            raise ValueError(f"buffer shape mismatch: saved {tuple(state['data'].shape)}, here {tuple(self.data.shape)}.")
        self.data.copy_(state["data"])
        self.seen = int(state["seen"])
        if "low" in state:  # (a checkpoint written before the span existed: its samples' span)
            self.low.copy_(state["low"])
            self.high.copy_(state["high"])
        elif self.seen:
            self.low.copy_(self.data[: self.fill, 0].amin(0))
            self.high.copy_(self.data[: self.fill, 0].amax(0))
        self._rng.bit_generator.state = state["rng"]
        if self._pcg is not None:
            self._pcg.set_state(state["pcg"])

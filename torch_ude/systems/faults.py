"""A sensor fault model: NaN readings, dropped samples, long dropouts and outlier spikes.

Applied to a `SimulatedStream` chunk, it returns what a faulty sensor would deliver, so
robustness can be exercised end to end from a config (``data.faults``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .simulate import SimulatedStream

__all__ = ["SensorFaults"]


@dataclass
class SensorFaults:
    """Per-sample faults, independent of each other, and long dropouts.

    Attributes:
        nan_rate: probability that a sample reads NaN in one random channel.
        inf_rate: probability that a sample reads +Inf in one random channel.
        drop_rate: probability that a sample is lost (its tick is missing: a gap).
        spike_rate: probability of an outlier spike on one random channel.
        spike_scale: spike amplitude in multiples of that channel's RMS-relative noise
            floor: ``spike_scale * max(sigma_i, 0.01 * |y|_max)``.
        dropout_rate: probability that a dropout (a loose connector, a bus reset) starts
            at a sample that is not already in one.
        dropout_length: samples lost in each dropout (>= 1); a dropout may run on into
            the next chunk.
        seed: seed of the fault generator.
    """

    nan_rate: float = 0.0
    inf_rate: float = 0.0
    drop_rate: float = 0.0
    spike_rate: float = 0.0
    spike_scale: float = 50.0
    dropout_rate: float = 0.0
    dropout_length: int = 200
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("nan_rate", "inf_rate", "drop_rate", "spike_rate", "dropout_rate"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"faults.{name} must be a probability in [0, 1); got {value!r}.")
        if isinstance(self.dropout_length, bool) or not isinstance(self.dropout_length, int) or self.dropout_length < 1:
            raise ValueError(f"faults.dropout_length must be a positive number of samples; got {self.dropout_length!r}.")
        self._rng = np.random.default_rng(self.seed)
        self._dropout_left = 0  # samples still to lose of a running dropout

    @property
    def active(self) -> bool:
        """True if any fault has a non-zero rate."""
        return any((self.nan_rate, self.inf_rate, self.drop_rate, self.spike_rate, self.dropout_rate))

    def apply(self, rec: SimulatedStream, ticks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Corrupt a chunk.

        Args:
            rec: the clean-sensor chunk (its noisy ``y`` is corrupted further).
            ticks: the sample indices of the chunk, shape (T,).

        Returns:
            ``(y, ticks, segment)`` of the samples that arrive, shapes (T', n), (T',), (T',).
        """
        y = rec.y.copy()
        t, n = y.shape
        rng = self._rng
        channel = rng.integers(0, n, size=t)
        rows = np.arange(t)
        for rate, value in ((self.nan_rate, np.nan), (self.inf_rate, np.inf)):
            hit = rng.random(t) < rate
            y[rows[hit], channel[hit]] = value
        hit = rng.random(t) < self.spike_rate
        amp = self.spike_scale * np.maximum(rec.sigma, 0.01 * np.abs(rec.x).max(axis=0, initial=1.0))
        y[rows[hit], channel[hit]] += amp[channel[hit]] * rng.choice((-1.0, 1.0), size=int(hit.sum()))
        keep = rng.random(t) >= self.drop_rate
        if self.dropout_rate > 0:
            keep &= ~self._dropouts(t)
        return y[keep], ticks[keep], rec.segment[keep]

    def _dropouts(self, t: int) -> np.ndarray:
        """Mask of the chunk's ``t`` samples lost to dropouts (carried across chunks)."""
        starts = np.flatnonzero(self._rng.random(t) < self.dropout_rate)
        lost = np.zeros(t, dtype=bool)
        end = self._dropout_left  # the running dropout covers samples [0, end)
        lost[:end] = True
        for s in starts:
            if s >= end:  # a dropout cannot start inside another
                end = s + self.dropout_length
                lost[s:end] = True
        self._dropout_left = max(end - t, 0)
        return lost

    def state_dict(self) -> dict:
        """The fault generator's state."""
        return {"rng": self._rng.bit_generator.state, "dropout_left": self._dropout_left}

    def load_state_dict(self, state: dict) -> None:
        """Restore from `state_dict`."""
        self._rng.bit_generator.state = state["rng"]
        self._dropout_left = int(state.get("dropout_left", 0))

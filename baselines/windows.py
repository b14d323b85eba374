"""Observations and shooting windows from the simulated sensor stream (Sections 4.1, 4.2).

The baseline sees the same noisy 1 kHz stream as jet matching, decimated to the
observation rate (every 20th sample for 50 Hz, every 10th for 100 Hz). A window
is ``K + 1`` consecutive observations: it starts from the noisy observation at
its start and is scored on the next ``K``. The stream holds re-excitation
segments (state jumps), and a window that straddled one would ask the solver to
integrate across a jump, so only windows inside one segment are candidates; the
requested number is spread evenly over the candidates.

With recorded inputs (a known model with inputs), the observations carry the inputs
``u`` at the same instants, and each window its inputs at its ``K + 1`` observation
times (the RK4 step interpolates them linearly, `baselines.rk4`).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from torch_ude.recorded import RecordedLog
from torch_ude.systems.simulate import SimulatedStream

__all__ = ["Observations", "ShootingWindows", "observe", "recorded_observations", "shooting_windows"]


@dataclass
class Observations:
    """The stream seen at the observation rate.

    Attributes:
        y: noisy observations, shape (T, n), float64.
        segment: segment id of each observation, shape (T,), int64.
        rate: observation rate in Hz.
        stride: stream samples per observation.
        u: recorded inputs at the observations, shape (T, n_u), float64, or None.
    """

    y: np.ndarray
    segment: np.ndarray
    rate: float
    stride: int
    u: np.ndarray | None = None

    @property
    def h(self) -> float:
        """The observation interval ``1 / rate`` in s, also the RK4 step."""
        return 1.0 / self.rate


@dataclass
class ShootingWindows:
    """A batch of multiple-shooting windows.

    Attributes:
        x0: initial states (the noisy observations at the window starts), shape (B, n).
        targets: the observations the rollouts are scored on, shape (K, B, n);
            ``targets[k]`` is observed ``(k + 1) h`` after the start.
        h: RK4 step and observation interval in s.
        starts: index of each window's first observation, shape (B,).
        candidates: number of windows of this length that lie inside one segment.
        straddling: number of window positions left out because they cross a
            re-excitation (segment boundary).
        inputs: the recorded inputs at the window's ``K + 1`` observation times, shape
            (K + 1, B, n_u), or None without inputs.
    """

    x0: Tensor
    targets: Tensor
    h: float
    starts: np.ndarray
    candidates: int
    straddling: int
    inputs: Tensor | None = None

    @property
    def steps(self) -> int:
        """``K``, RK4 steps per window."""
        return int(self.targets.shape[0])

    @property
    def batch(self) -> int:
        """``B``, the number of windows."""
        return int(self.x0.shape[0])

    @property
    def observations(self) -> Tensor:
        """All ``K + 1`` observations of each window, ``x0`` first, shape (K + 1, B, n)."""
        return torch.cat([self.x0[None], self.targets])

    def to(self, dtype: torch.dtype) -> ShootingWindows:
        """The same windows with ``x0`` and ``targets`` in ``dtype`` (e.g. complex128)."""
        return ShootingWindows(self.x0.to(dtype), self.targets.to(dtype), self.h, self.starts,
                               self.candidates, self.straddling,
                               None if self.inputs is None else self.inputs.to(dtype))


def observe(rec: SimulatedStream, rate: float) -> Observations:
    """Decimate a recording to the observation rate.

    Args:
        rec: the 1 kHz stream from `torch_ude.systems.simulate` / `Simulator.read`.
        rate: observation rate in Hz; ``rec.fs / rate`` must be a whole number.

    Returns:
        The `Observations`: every ``rec.fs / rate``-th sample, starting with the first.

    Raises:
        ValueError: for a rate that does not divide the stream rate, or NaN/Inf samples
            among the observations.
    """
    if not (isinstance(rate, (int, float)) and math.isfinite(rate) and rate > 0):
        raise ValueError(f"rate (the observation rate in Hz) must be a positive number; got {rate!r}.")
    ratio = rec.fs / rate
    stride = round(ratio)
    if stride < 1 or abs(ratio - stride) > 1e-9 * ratio:
        raise ValueError(
            f"the observation rate must divide the stream rate: {rec.fs:g} Hz / {rate:g} Hz = {ratio:g} "
            f"is not a whole number of samples. Choose a rate such as {rec.fs / max(1, math.ceil(ratio)):g} Hz."
        )
    y = np.ascontiguousarray(rec.y[::stride])
    bad = ~np.isfinite(y).all(axis=1)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"the observations hold NaN or Inf in {int(bad.sum())} of {y.shape[0]} rows (first at "
            f"t = {first * stride / rec.fs:g} s); the solver baseline needs a complete record, so "
            "repair or cut those samples before building windows."
        )
    return Observations(y=y, segment=np.ascontiguousarray(rec.segment[::stride]), rate=float(rate), stride=stride)


def recorded_observations(logs: Sequence[RecordedLog], rate: float) -> Observations:
    """Recorded logs seen at the observation rate: every ``fs / rate``-th sample of each segment.

    Each segment of each log (`torch_ude.recorded.read_log`: gaps split a log) is its own
    observation segment, so no window straddles a gap or two files; the inputs come with
    the states at the same instants.

    Args:
        logs: the training logs, all at the same nominal rate and with the same channels.
        rate: observation rate in Hz; ``fs / rate`` must be a whole number.

    Returns:
        The `Observations` with ``u`` the inputs (None for logs without inputs).

    Raises:
        ValueError: for no logs, logs at different rates, or a rate that does not divide ``fs``.
    """
    if not logs:
        raise ValueError("recorded_observations needs at least one log.")
    fs, n = logs[0].fs, logs[0].n_states
    if any(log.fs != fs or log.names != logs[0].names for log in logs):
        raise ValueError("the logs must share the nominal rate and the channels; got "
                         f"{[(log.fs, log.names) for log in logs]}.")
    ratio = fs / rate if isinstance(rate, (int, float)) and rate > 0 else math.nan
    stride = round(ratio) if math.isfinite(ratio) else 0
    if stride < 1 or abs(ratio - stride) > 1e-9 * ratio:
        raise ValueError(f"the observation rate must divide the logs' rate: {fs:g} Hz / {rate!r} Hz is not a whole "
                         f"number of samples.")
    segments = [s[::stride] for log in logs for s in log.segments]
    table = np.concatenate(segments)
    segment = np.concatenate([np.full(s.shape[0], i, dtype=np.int64) for i, s in enumerate(segments)])
    u = np.ascontiguousarray(table[:, n:]) if table.shape[1] > n else None
    return Observations(y=np.ascontiguousarray(table[:, :n]), segment=segment, rate=float(rate), stride=stride, u=u)


def shooting_windows(obs: Observations, steps: int, n_windows: int) -> ShootingWindows:
    """Choose ``n_windows`` windows of ``steps`` RK4 steps, each inside one segment.

    Window ``b`` covers observations ``starts[b] .. starts[b] + steps``; the starts are
    spread evenly (rounded ``linspace``) over all candidate positions, so windows
    overlap when ``n_windows * steps`` exceeds the record.

    Args:
        obs: from `observe`.
        steps: ``K`` (>= 1).
        n_windows: ``B`` (>= 1).

    Returns:
        The `ShootingWindows`, float64.

    Raises:
        ValueError: for ``steps`` or ``n_windows`` below 1, or more windows than there
            are distinct candidate positions.
    """
    for name, value in (("steps (K)", steps), ("n_windows", n_windows)):
        if isinstance(value, bool) or int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer; got {value!r}.")
    steps, n_windows = int(steps), int(n_windows)
    positions = obs.y.shape[0] - steps
    if positions < 1:
        raise ValueError(
            f"a window of K = {steps} steps needs {steps + 1} observations; the record has "
            f"{obs.y.shape[0]}. Lower K or record longer."
        )
    # number of segment changes up to each observation: equal counts at both ends mean one segment
    changes = np.concatenate(([0], np.cumsum(obs.segment[1:] != obs.segment[:-1])))
    inside = changes[:positions] == changes[steps:]
    candidates = np.flatnonzero(inside)
    if candidates.size < n_windows:
        raise ValueError(
            f"n_windows = {n_windows} windows of K = {steps} steps were requested, but the record "
            f"holds only {candidates.size} distinct positions inside one segment ({positions - candidates.size} "
            "more would straddle a re-excitation). Lower n_windows or K, or record longer."
        )
    pick = np.round(np.linspace(0, candidates.size - 1, n_windows)).astype(np.int64)
    starts = candidates[pick]
    y = torch.as_tensor(obs.y)
    offsets = torch.arange(1, steps + 1).unsqueeze(1) + torch.as_tensor(starts).unsqueeze(0)  # (K, B)
    inputs = None
    if obs.u is not None:
        inputs = torch.as_tensor(obs.u)[torch.cat((torch.as_tensor(starts).unsqueeze(0), offsets))].clone()
    return ShootingWindows(x0=y[starts].clone(), targets=y[offsets].clone(), h=obs.h, starts=starts,
                           candidates=int(candidates.size), straddling=int(positions - candidates.size),
                           inputs=inputs)

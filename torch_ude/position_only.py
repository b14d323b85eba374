"""Position-only sensors: the velocity of a mechanical state from Savitzky-Golay derivatives of q.

Many machines (the EMPS positioning axis, most encoder-only joints) log the position ``q``
and not the velocity, while the known model's state is ``x = (q, qdot)``. A recorded log
names only the positions (``data.states: [q]``) and ``data.velocity_from_position``
(`VelocityFromPosition`); `with_velocities` then appends, per position channel, the
velocity ``qdot_hat = fs * D1 . q`` of a centred SG window of ``2 M + 1`` samples at the
log's nominal rate (order ``P``), named ``<q>_dot``. The log is from then on a log of the
full state: the stream's SG windows give the jets of both channels, so the position
channel gives ``(q, qdot, qddot)`` and the velocity channel ``(qdot, qddot, qdddot)``, the
third derivative of the second-order target coming from the cascade of the two filters
(the higher order the target needs); the baseline and the prediction errors read the same
channels. The first and last ``M`` samples of every segment have no centred window and are
dropped (``LogReport.trimmed``); a segment shorter than ``2 M + 2`` samples is dropped.

What it costs in noise (closed form, `noise_gains`): for white position noise of standard
deviation ``sigma_q`` (m, rad), the derived velocity has standard deviation

    sigma_v = sigma_q * fs * ||D1||,   ||D1||^2 = 3 / (M (M + 1) (2 M + 1))   (P = 1 or 2),

e.g. 0.71 sigma_q fs for a central difference (M = 1) and 0.0095 sigma_q fs at M = 25; a
direct velocity sensor would have its own sigma_v instead, white. The derived noise is
coloured (correlated over ``2 M + 1`` samples), so the stream's white-noise estimate
(`torch_ude.savgol.SavitzkyGolay.noise_variance`) misreads it on that channel: at M = 5 and
a stream window (5, 4) it reads 0.46 sigma_v at tap spacing 1 and 0.94 sigma_v at spacing 3
(measured, tests/torch_ude/test_position_only.py); the jets the stream takes of the velocity
channel at tap spacing ``m`` have the noise of the composite filter ``D_d^stream (spaced m) * D1``,
whose norm `noise_gains` also returns.
Both gains are checked against Monte-Carlo estimates in tests/torch_ude/test_position_only.py
(within 2 % and 3 %), and on a simulated axis with friction the derived velocity's error is
that noise plus the bias below (``forced_axis_log``). The price of smoothing is bias: for
P = 1 or 2, ``E[qdot_hat] - qdot = qdddot (3 M^2 + 3 M - 1) / (30 fs^2) + O(fs^-4)``;
P = 3 or 4 removes that term at about 2.5 times the noise for large M (2.50 at M = 25).
Choose M so that ``sigma_v`` is small against the velocity while ``(M / fs)`` stays well
below the fastest period of the motion. On the EMPS axis (``python -m benchmarks.real.emps``, M = 5
at 1 kHz) the stream estimates sigma_q = 1.99e-8 m, so sigma_v = 1.9e-6 m/s, 2e-5 of the
velocity's RMS: there position only costs nothing measurable in noise.

Everything is float64 (numpy), as reading the logs is.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from .recorded import RecordedLog
from .savgol import savgol_rows

__all__ = ["VelocityFromPosition", "with_velocities", "noise_gains", "velocity_name"]


def velocity_name(position: str) -> str:
    """The name of the velocity channel derived from ``position`` (``"<position>_dot"``)."""
    return f"{position}_dot"


@dataclass
class VelocityFromPosition:
    """How the velocity is derived from a position-only log (module doc).

    Attributes:
        half_width: M, the centred SG window has ``2 M + 1`` samples at the nominal rate.
        order: P, the polynomial order (1 or 2 give the same velocity row; 3 or 4 remove
            the leading bias term).
    """

    half_width: int = 5
    order: int = 2

    def validate(self) -> None:
        """Check the settings.

        Raises:
            TypeError: for a non-integer setting.
            ValueError: for ``half_width < 1``, ``order < 1`` or a window too short for the order.
        """
        for name in ("half_width", "order"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"velocity_from_position.{name} must be an integer; got {value!r}.")
            if value < 1:
                raise ValueError(f"velocity_from_position.{name} must be >= 1; got {value}.")
        if 2 * self.half_width + 1 <= self.order:
            raise ValueError(f"velocity_from_position: a window of 2M+1 = {2 * self.half_width + 1} samples cannot "
                             f"fit order {self.order}; raise half_width to at least {math.ceil(self.order / 2)} "
                             f"or lower order.")

    def row(self) -> np.ndarray:
        """The velocity row ``D1`` per sample step, shape (2M + 1,), oldest sample first."""
        return savgol_rows(self.half_width, self.order, 1)[1].numpy()


def with_velocities(log: RecordedLog, settings: VelocityFromPosition) -> RecordedLog:
    """The log of the full mechanical state ``(q, qdot_hat)``: velocities appended after the positions.

    Args:
        log: a log whose states are positions only (`torch_ude.recorded.read_log`), p
            channels, on the nominal grid.
        settings: the derivative's window.

    Returns:
        A new `RecordedLog` with ``2 p`` states (positions, then their velocities in the same
        order, named by `velocity_name`) and the same inputs; every segment loses its first
        and last M samples (its start moves by ``M / fs``), and segments shorter than
        ``2 M + 2`` samples are dropped. Its report is a copy with ``trimmed``,
        ``segments`` and ``samples`` updated.

    Raises:
        ValueError: if no segment is long enough for one velocity window.
    """
    settings.validate()
    m, p = settings.half_width, log.n_states
    row = settings.row() * log.fs  # d/dt per second
    segments, starts, dropped = [], [], 0
    for seg, start in zip(log.segments, log.starts):
        if seg.shape[0] < 2 * m + 2:
            dropped += seg.shape[0]
            continue
        q = seg[:, :p]
        # centred window: sample k uses q[k - M .. k + M]; 'valid' correlation with the row
        qdot = np.stack([np.correlate(q[:, j], row, mode="valid") for j in range(p)], axis=1)
        core = seg[m:-m]
        segments.append(np.concatenate((core[:, :p], qdot, core[:, p:]), axis=1))
        starts.append(start + m / log.fs)
        dropped += 2 * m
    if not segments:
        raise ValueError(f"{log.report.file if log.report else 'the log'}: no segment holds the 2M+2 = {2 * m + 2} "
                         f"samples one velocity window needs (velocity_from_position.half_width = {m}); lower "
                         f"half_width.")
    report = None
    if log.report is not None:
        report = dataclasses.replace(log.report, trimmed=log.report.trimmed + dropped, segments=len(segments),
                                     samples=sum(s.shape[0] for s in segments))
    names = (*log.names[:p], *(velocity_name(c) for c in log.names[:p]), *log.names[p:])
    return RecordedLog(fs=log.fs, names=names, n_states=2 * p, segments=segments, starts=starts, report=report)


def noise_gains(settings: VelocityFromPosition, stream_half_width: int | None = None, stream_order: int = 4,
                spacing: int = 1) -> dict[str, float]:
    """Standard deviations of the derived quantities per unit of white position noise (module doc).

    Args:
        settings: the velocity window.
        stream_half_width: the stream's SG half width (None: the velocity alone).
        stream_order: the stream's SG order.
        spacing: the stream's tap spacing m in samples (point taps: ``stream.tap_average`` off).

    Returns:
        ``velocity``: ``||D1||``, so ``sigma_v = sigma_q * fs * velocity``; with a stream
        window also ``acceleration`` and ``jerk``: the norms of the composite filters that
        give the stream's first and second derivative of the velocity channel, so their
        standard deviations are ``sigma_q * fs * gain / (m / fs)^d`` for d = 1, 2 (in the
        stream's tap units, as `torch_ude.savgol.SavitzkyGolay.estimate` divides).
    """
    settings.validate()
    row = settings.row()
    out = {"velocity": float(np.linalg.norm(row))}
    if stream_half_width is not None:
        rows = savgol_rows(stream_half_width, stream_order, 2).numpy()
        for d, key in ((1, "acceleration"), (2, "jerk")):
            spaced = np.zeros((rows.shape[1] - 1) * spacing + 1)
            spaced[::spacing] = rows[d]
            out[key] = float(np.linalg.norm(np.convolve(spaced, row)))
    return out


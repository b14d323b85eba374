"""Streaming SG estimator of Algorithm 1: calibration, phase sampling, gating, buffering.

Samples arrive one at a time or in chunks, each with its integer tick (sample index
at rate ``fs``). The pipeline

1. collects ``calibration_s`` seconds and runs `calibrate` (scales, noise, ``m``, ``lambda2``);
2. then keeps the last ``10 m`` samples per channel (with the newest chunk, the
   ``11 m``-sample ring of the paper) and, at every tick divisible by the stride
   ``s``, forms the window of 11 taps ``m`` apart that ends at that tick (full-rate
   phase sampling; the v1 mode uses ``s = m``, decimated windows);
3. rejects and counts windows with a non-finite tap (``nonfinite``), windows that
   straddle a long gap or a segment boundary (``boundary``), and windows failing the
   misfit gate of Eq. (27) (``misfit``);
4. offers accepted SG jets to a fixed-capacity `SampleBuffer`.

Stream semantics (the C port in ``microcontroller/`` mirrors them sample by sample):

* Ticks that do not increase are dropped and counted (``out_of_order``).
* A tick that skips ahead is a gap (``gaps`` counts every one). A gap of at most
  ``max_bridge`` missing ticks inside one segment is *bridged*: the missing samples
  are filled by linear interpolation between the samples on either side (``bridged``
  counts the filled samples; a channel whose neighbour is NaN/Inf is filled with NaN,
  so windows tapping it are rejected as ``nonfinite``). At 1 kHz a 5-tick bridge is
  off the true signal by at most ``(6 ms)^2 / 8 * |x''|``, far below the sensor noise of
  the plants here, so an isolated dropped sample costs no window. A longer gap
  (``long_gaps``) starts a new segment: no window straddles it.
* Bridged samples are never used for the noise estimate (they are smoother than
  real ones).

Recorded inputs (``n_inputs > 0``) travel as extra channels after the states: the same
windows give SG jets of the states and of the inputs (rows ``u, udot, uddot``), so the
input rate ``udot`` of the target ``J_x F F + J_u F udot`` comes from the same window as
``xddot``. Every gate and counter covers all channels (a window whose input jumps is
rejected like one whose state does); the calibration measures the inputs' scales but
chooses ``m`` and ``lambda2`` from the state channels only (`calibrate`'s ``n_states``).

Everything is float64 on the host; ``dtype=torch.float32`` with ``pcg32=True`` runs the
estimator as the C trainer does (its precision and its PCG32 reservoir draws).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import Tensor

from .calibration import CALIBRATION_M0, Calibration, calibrate, valid_windows
from .gate import QualityGate
from .prng import STREAM_RESERVOIR, Pcg32
from .reservoir import PRECISIONS, SampleBuffer
from .savgol import SavitzkyGolay

__all__ = ["StreamSettings", "StreamEstimator", "reject_rate"]

_COUNTERS = ("samples", "nonfinite_samples", "out_of_order", "gaps", "long_gaps", "bridged", "windows",
             "nonfinite", "boundary", "misfit", "accepted")


@dataclass
class StreamSettings:
    """Settings of the streaming estimator (each mechanism can be switched off).

    Attributes:
        half_width: SG half width M (window of 2M + 1 taps).
        order: SG polynomial order P (>= 2 for the second derivative; 2M + 1 >= P + 2
            so that the misfit projection R of Eq. (27) is not zero).
        stride: window stride s in ticks; None means s = m (v1 decimated windows).
        calibration_s: length of the calibration phase in s.
        m: fixed tap spacing, or None for the adaptive time scale of Eq. (24).
        m_max: largest adaptive tap spacing.
        dt_scale: constant of Eq. (24) (> 0).
        lambda2: second-order weight lambda2^0 (>= 0).
        snr_gate: gate lambda2 by the SNR of Eq. (25)-(26).
        snr_threshold: tau_SNR (>= 0).
        quality_gate: apply the misfit gate of Eq. (27).
        gate_factor, gate_floor, gate_history: the gate's constants and median length.
        buffer: ``"reservoir"`` or ``"fifo"`` (v1).
        capacity: buffer capacity B.
        max_bridge: the longest gap, in missing ticks, bridged by linear interpolation
            (0: every gap starts a new segment).
        outlier_threshold: the calibration's outlier screen for the noise estimate, in
            robust standard deviations (`torch_ude.calibration.screen_outliers`); None
            turns the screen off (the paper's plain Eq. (23)).
        forget_window: make the reservoir forget (`torch_ude.reservoir.SampleBuffer`): it
            then holds roughly the jets of the last ``forget_window`` windows (>= capacity),
            for a plant that changes; None keeps Vitter's uniform reservoir.
        tap_average: box-averaged taps (ours, issue 17; `torch_ude.savgol`): each of the
            2M + 1 taps is the mean of the m samples ending at it, fitted with the exact
            averaging operator, so a window uses all ``(2M + 1) m`` samples of its span and
            the tap noise falls to ``sigma / sqrt(m)``; the adaptive ``m`` and the SNR gate
            use that noise (`torch_ude.calibration.calibrate`). A window then spans m - 1
            more samples (the ring holds ``11 m`` per channel). True by default (issue 31:
            it halves the field error at 1 % noise, RESULTS.md); False gives the paper's
            point taps, which the C trainer implements.
        calibration_replay: once calibrated, stream the calibration record itself through the
            windows, the gate and the buffer, so that no sample of a recorded log is lost to the
            calibration (ours, issue 31: a log's first ``calibration_s`` seconds are often its most
            informative, e.g. a swing-up). False (the default) is the paper's live stream, whose
            calibration samples only calibrate; the C trainer has no replay (its record shares
            memory with its reservoir) and refuses True.
        reservoir_precision: how the buffer stores a jet (issue 32: the device's memory).
            ``"float32"``: at the estimator's precision (float32 on a device, in each channel's
            units). ``"float16"``: each value divided by its channel's calibrated RMS
            ``x_rms`` (fixed at calibration), rounded to the nearest IEEE binary16 (ties to
            even) and read back times ``x_rms`` (`torch_ude.reservoir.stored_jets`): half the
            C trainer's reservoir bytes, a relative error of about 2^-11 at most per value; a window
            whose jet overflows binary16 (``|value| >= 65520 x_rms``) counts as non-finite.
    """

    half_width: int = 5
    order: int = 4
    stride: int | None = 5
    calibration_s: float = 3.0
    m: int | None = None
    m_max: int = 100
    dt_scale: float = 0.117
    lambda2: float = 0.1
    snr_gate: bool = True
    snr_threshold: float = 12.0
    quality_gate: bool = True
    gate_factor: float = 6.0
    gate_floor: float = 0.02
    gate_history: int = 101
    buffer: str = "reservoir"
    capacity: int = 4096
    max_bridge: int = 5
    outlier_threshold: float | None = 5.0
    forget_window: int | None = None
    tap_average: bool = True
    calibration_replay: bool = False
    reservoir_precision: str = "float32"

    def validate(self) -> None:
        """Check every setting before any work.

        Raises:
            TypeError: for a setting of the wrong type.
            ValueError: for an impossible value; the message names the setting, what it
                must be, what was given and the fix.
        """
        def integer(name: str, low: int, optional: bool = False) -> None:
            value = getattr(self, name)
            if optional and value is None:
                return
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"stream.{name} must be an integer; got {value!r}.")
            if value < low:
                raise ValueError(f"stream.{name} must be >= {low}; got {value}.")

        def number(name: str, positive: bool, optional: bool = False) -> None:
            value = getattr(self, name)
            if optional and value is None:
                return
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"stream.{name} must be a number; got {value!r}.")
            if not math.isfinite(value) or value < 0 or (positive and value == 0):
                raise ValueError(f"stream.{name} must be a finite number {'> 0' if positive else '>= 0'}; "
                                 f"got {value}.")

        for name, low in (("half_width", 1), ("order", 2), ("m_max", 1), ("gate_history", 1),
                          ("capacity", 1), ("max_bridge", 0)):
            integer(name, low)
        integer("stride", 1, optional=True)
        for name, positive in (("calibration_s", True), ("dt_scale", True), ("lambda2", False),
                               ("snr_threshold", False), ("gate_factor", True), ("gate_floor", False)):
            number(name, positive)
        number("outlier_threshold", True, optional=True)
        for name in ("tap_average", "calibration_replay"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"stream.{name} must be true or false; got {getattr(self, name)!r}.")
        integer("forget_window", self.capacity, optional=True)
        if self.m is not None and (isinstance(self.m, bool) or not isinstance(self.m, int)
                                   or not 1 <= self.m <= self.m_max):
            raise ValueError(f"stream.m must be an integer in [1, m_max = {self.m_max}]; got {self.m}.")
        if self.buffer not in ("reservoir", "fifo"):
            raise ValueError(f"stream.buffer must be 'reservoir' or 'fifo'; got {self.buffer!r}.")
        if self.reservoir_precision not in PRECISIONS:
            raise ValueError(f"stream.reservoir_precision must be one of {', '.join(map(repr, PRECISIONS))}; "
                             f"got {self.reservoir_precision!r}.")
        if 2 * self.half_width + 1 < self.order + 2:
            raise ValueError(
                f"an SG window of 2M+1 = {2 * self.half_width + 1} taps (half_width {self.half_width}) cannot fit "
                f"order {self.order} and still measure a misfit (Eq. 27 needs 2M+1 >= P+2); raise "
                f"stream.half_width to at least {math.ceil((self.order + 1) / 2)} or lower stream.order.")

    def calibration_ticks(self, fs: float) -> int:
        """Samples in the calibration phase at rate ``fs``, after checking they hold a window.

        Raises:
            ValueError: if the phase is shorter than one SG window at the first tap spacing
                the calibration uses (``m``, or ``min(40, m_max)`` when adaptive).
        """
        ticks = round(self.calibration_s * fs)
        first_m = self.m if self.m is not None else min(CALIBRATION_M0, self.m_max)
        need = 2 * self.half_width * first_m + 1
        if ticks < need:
            raise ValueError(
                f"stream.calibration_s = {self.calibration_s} s holds {ticks} samples at {fs:g} Hz, fewer than the "
                f"{need} samples of one SG window at tap spacing m = {first_m}; lengthen stream.calibration_s to at "
                f"least {need / fs:.3f} s.")
        return ticks


def reject_rate(counters: dict) -> float:
    """Fraction of the windows formed after calibration that were rejected, for any reason (a
    non-finite tap, a long gap or segment boundary, or the misfit gate); 0 before any window.

    Args:
        counters: the event counts of a `StreamEstimator` (or of the C trainer).
    """
    return (counters["windows"] - counters["accepted"]) / counters["windows"] if counters["windows"] else 0.0


torch.serialization.add_safe_globals([StreamSettings])  # checkpoints store it in the module's hyperparameters


class StreamEstimator:
    """Turn a raw sensor stream into a buffer of SG jet samples (Algorithm 1, lines 3-12).

    Args:
        n_states: number of state channels n (all channels without inputs).
        fs: sample rate in Hz (> 0).
        settings: `StreamSettings`.
        seed: seed of the buffer's replacement generator.
        dtype: precision of the samples and estimates (float64 host, float32 as on a device).
        pcg32: draw the reservoir's replacement slots from `torch_ude.prng.Pcg32` (seed,
            stream 1), the C trainer's generator, instead of numpy's.
        n_inputs: recorded input channels after the states (module doc); samples then have
            ``n_states + n_inputs`` channels.

    Attributes:
        calibration: the `Calibration` once the calibration phase is over, else None.
        counters: event counts (see module doc).

    Raises:
        ValueError, TypeError: for impossible settings (checked before any sample).
    """

    def __init__(self, n_states: int, fs: float, settings: StreamSettings | None = None, seed: int = 0,
                 dtype: torch.dtype = torch.float64, pcg32: bool = False, n_inputs: int = 0) -> None:
        if not (isinstance(fs, (int, float)) and math.isfinite(fs) and fs > 0):
            raise ValueError(f"fs (the sample rate in Hz) must be positive; got {fs!r}.")
        if isinstance(n_states, bool) or not isinstance(n_states, int) or n_states < 1:
            raise ValueError(f"n_states must be a positive integer; got {n_states!r}.")
        if isinstance(n_inputs, bool) or not isinstance(n_inputs, int) or n_inputs < 0:
            raise ValueError(f"n_inputs must be an integer >= 0; got {n_inputs!r}.")
        self.n_inputs = int(n_inputs)
        n_states = n_states + self.n_inputs  # channels from here on
        self.settings = settings or StreamSettings()
        self.settings.validate()
        if dtype not in (torch.float32, torch.float64):
            raise TypeError(f"dtype must be torch.float32 or torch.float64; got {dtype}.")
        self.n, self.fs, self.seed = int(n_states), float(fs), int(seed)
        self.dtype, self.pcg32 = dtype, bool(pcg32)
        self.sg = SavitzkyGolay(self.settings.half_width, self.settings.order, dtype=dtype)
        self._window_sg = self.sg  # the windows' estimator: box-averaged taps once m is known
        self._cal_len = self.settings.calibration_ticks(self.fs)
        self._cal_y = torch.empty(self._cal_len, self.n, dtype=dtype)
        self._cal_seg = torch.empty(self._cal_len, dtype=torch.int64)
        self._cal_ticks = torch.empty(self._cal_len, dtype=torch.int64)  # (for calibration_replay's phase)
        self._cal_bridged = torch.zeros(self._cal_len, dtype=torch.bool)
        self._cal_fill = 0
        self.calibration: Calibration | None = None
        self.buffer: SampleBuffer | None = None
        self.gate: QualityGate | None = None
        self._hist_y = torch.empty(0, self.n, dtype=dtype)
        self._hist_seg = torch.empty(0, dtype=torch.int64)
        self._last_tick: int | None = None
        self._last_y: Tensor | None = None  # the newest arrived sample, (n,)
        self._last_key: tuple[int, int] | None = None  # (segment id given, break count)
        self._breaks = 0
        self.counters = dict.fromkeys(_COUNTERS, 0)

    # ----- public state --------------------------------------------------------------------
    @property
    def m(self) -> int | None:
        """Tap spacing in ticks once calibrated."""
        return None if self.calibration is None else self.calibration.m

    @property
    def stride(self) -> int | None:
        """Window stride s in ticks once calibrated."""
        if self.calibration is None:
            return None
        return self.settings.stride or self.calibration.m

    @property
    def last_tick(self) -> int | None:
        """The newest tick accepted into the pipeline."""
        return self._last_tick

    @property
    def ready(self) -> bool:
        """True once the sample buffer is full (training may start)."""
        return self.buffer is not None and self.buffer.full

    def reject_rate(self) -> float:
        """Fraction of all windows formed after calibration that were rejected (`reject_rate`)."""
        return reject_rate(self.counters)

    def misfit_rate(self) -> float:
        """Fraction of the windows that reached the misfit gate (Eq. 27) and failed it."""
        reached = self.counters["misfit"] + self.counters["accepted"]
        return self.counters["misfit"] / reached if reached else 0.0

    # ----- ingestion -----------------------------------------------------------------------
    def push(self, y: Tensor, ticks: Tensor | None = None, segment: Tensor | None = None) -> int:
        """Ingest samples.

        Args:
            y: samples, shape (k, n) or (n,) for one sample, floating point; NaN/Inf
                samples are allowed and counted (windows touching them are rejected).
            ticks: integer sample indices, shape (k,); default: consecutive after the
                last tick (starting at 0). Ticks that do not increase are dropped; short
                gaps are bridged, long ones start a new segment (module doc).
            segment: optional segment ids, shape (k,); a change starts a new segment
                (e.g. a re-excitation), like a long gap.

        Returns:
            Number of jet samples accepted into the buffer.

        Raises:
            TypeError, ValueError: for a wrong dtype or shape.
        """
        y, ticks, segment = self._check_chunk(y, ticks, segment)
        if y.shape[0] == 0:
            return 0
        self.counters["nonfinite_samples"] += int((~torch.isfinite(y)).any(dim=1).sum())
        self.counters["samples"] += int(y.shape[0])
        y, ticks, keys, bridged = self._bridge(y, ticks, segment)
        accepted = 0
        if self.calibration is None:
            take = min(self._cal_len - self._cal_fill, y.shape[0])
            window = slice(self._cal_fill, self._cal_fill + take)
            self._cal_y[window], self._cal_seg[window], self._cal_bridged[window] = y[:take], keys[:take], bridged[:take]
            self._cal_ticks[window] = ticks[:take]
            self._cal_fill += take
            if self._cal_fill == self._cal_len:
                accepted = self._finish_calibration()
            y, ticks, keys = y[take:], ticks[take:], keys[take:]
        if self.calibration is not None and y.shape[0]:
            accepted += self._stream(y, ticks, keys)
        return accepted

    def _check_chunk(self, y: Tensor, ticks: Tensor | None, segment: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
        if not isinstance(y, Tensor) or not y.is_floating_point():
            raise TypeError(f"y must be a floating-point torch.Tensor; got {type(y).__name__} "
                            f"{getattr(y, 'dtype', '')}.")
        if y.ndim == 1:
            y = y.unsqueeze(0)
        if y.ndim != 2 or y.shape[1] != self.n:
            raise ValueError(f"y must have shape (k, {self.n}) or ({self.n},); got {tuple(y.shape)}.")
        k = y.shape[0]
        start = 0 if self._last_tick is None else self._last_tick + 1
        ticks = torch.arange(start, start + k) if ticks is None else torch.as_tensor(ticks)
        if ticks.dtype not in (torch.int32, torch.int64) or ticks.shape != (k,):
            raise ValueError(f"ticks must be {k} integers (one per sample); got dtype {ticks.dtype}, "
                             f"shape {tuple(ticks.shape)}.")
        segment = torch.zeros(k, dtype=torch.int64) if segment is None else torch.as_tensor(segment)
        if segment.shape != (k,):
            raise ValueError(f"segment must have shape ({k},); got {tuple(segment.shape)}.")
        ticks, segment = ticks.to(torch.int64), segment.to(torch.int64)
        if k and (self._last_tick is None or int(ticks[0]) > self._last_tick) and bool((ticks[1:] > ticks[:-1]).all()):
            return y.to(self.dtype), ticks, segment  # every tick increases: nothing to drop (the usual chunk)
        # drop ticks that do not increase (duplicates, out-of-order arrivals)
        prev = torch.cat((torch.tensor([-(1 << 62) if self._last_tick is None else self._last_tick]),
                          torch.cummax(ticks, 0).values[:-1]))
        ok = ticks > prev
        dropped = int((~ok).sum())
        if dropped:
            self.counters["out_of_order"] += dropped
            y, ticks, segment = y[ok], ticks[ok], segment[ok]
        return y.to(self.dtype), ticks, segment

    def _bridge(self, y: Tensor, ticks: Tensor, segment: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Fill short gaps and key the segments (module doc).

        Args:
            y, ticks, segment: the arrived samples (k, n), (k,), (k,), ticks increasing.

        Returns:
            ``(y, ticks, keys, bridged)`` with the filled samples inserted: shapes (k', n),
            (k',), (k',) monotone segment keys, (k',) True where a sample was filled.
        """
        first = self._last_tick is None
        k = ticks.shape[0]
        if (int(ticks[-1]) - int(ticks[0]) == k - 1 and (first or int(ticks[0]) == self._last_tick + 1)
                and bool((segment == (segment[0] if first else self._last_key[0])).all())):
            # the usual chunk: no gap, no segment change, so nothing to fill and no break
            self._last_tick, self._last_y = int(ticks[-1]), y[-1].clone()
            self._last_key = (int(segment[-1]), self._breaks)
            return y, ticks, torch.full((k,), self._breaks, dtype=torch.int64), torch.zeros(k, dtype=torch.bool)
        prev_tick = torch.cat((ticks[:1] - 1 if first else torch.tensor([self._last_tick]), ticks[:-1]))
        prev_seg = torch.cat((segment[:1] if first else torch.tensor([self._last_key[0]]), segment[:-1]))
        prev_y = torch.cat((y[:1] if first else self._last_y.unsqueeze(0), y[:-1]))
        step = ticks - prev_tick
        same = segment == prev_seg
        gap = step > 1
        long = gap & same & (step - 1 > self.settings.max_bridge)
        bridge = gap & same & ~long  # a gap at a segment change is not filled: a new segment starts anyway
        breaks = ~same | long
        self.counters["gaps"] += int(gap.sum())
        self.counters["long_gaps"] += int(long.sum())
        self._last_tick, self._last_y = int(ticks[-1]), y[-1].clone()
        if bool(bridge.any()):
            reps = torch.where(bridge, step, torch.ones_like(step))
            self.counters["bridged"] += int((reps - 1).sum())
            src = torch.repeat_interleave(torch.arange(ticks.shape[0]), reps)
            ends = torch.cumsum(reps, 0)
            j = torch.arange(int(ends[-1])) - (ends - reps)[src] + 1  # 1..reps within each group
            filled = j < reps[src]
            frac = (j.to(y.dtype) / reps[src].to(y.dtype)).unsqueeze(1)
            lo, hi = prev_y[src], y[src]
            y = torch.where(filled.unsqueeze(1), lo + (hi - lo) * frac, hi)
            ticks = ticks[src] - (reps[src] - j)
            breaks = breaks[src] & (j == 1)
        else:
            filled = torch.zeros(ticks.shape[0], dtype=torch.bool)
        keys = self._breaks + torch.cumsum(breaks.to(torch.int64), 0)
        self._breaks = int(keys[-1])
        self._last_key = (int(segment[-1]), self._breaks)
        return y, ticks, keys, filled

    def _finish_calibration(self) -> int:
        """Calibrate on the full record and set up the windows; with ``calibration_replay``, stream the
        record through them. Returns the jets accepted from the record (0 without replay)."""
        st = self.settings
        self.calibration = calibrate(
            self._cal_y, self.fs, self._cal_seg, self.sg, m=st.m, m_max=st.m_max, dt_scale=st.dt_scale,
            lambda2_0=st.lambda2, snr_threshold=st.snr_threshold, gate_lambda2=st.snr_gate,
            bridged=self._cal_bridged, outlier_threshold=st.outlier_threshold,
            n_states=self.n - self.n_inputs if self.n_inputs else None, tap_average=st.tap_average)
        self.buffer, self.gate, self._window_sg = self._buffer(), self._gate(), self._windows_estimator()
        # warm the gate's running median on the calibration record
        warm = valid_windows(self._window_sg, self._cal_y, self._cal_seg, self.calibration.m, self.stride)
        tail = warm[-st.gate_history :]
        self.gate.check(self._window_sg.misfit(tail), torch.sqrt((tail * tail).mean(dim=2)))
        if st.calibration_replay:  # the record's windows, as if it had streamed after calibration
            return self._stream(self._cal_y, self._cal_ticks, self._cal_seg)
        reach = self._reach()
        self._hist_y = self._cal_y[-reach:].clone()
        self._hist_seg = self._cal_seg[-reach:].clone()
        return 0

    def _windows_estimator(self) -> SavitzkyGolay:
        """The SG estimator of the stream's windows: box-averaged taps of width m, or the point taps."""
        if not self.settings.tap_average or self.calibration.m == 1:
            return self.sg
        return SavitzkyGolay(self.settings.half_width, self.settings.order, dtype=self.dtype,
                             bin_width=self.calibration.m)

    def _reach(self) -> int:
        """Samples before a window's newest one that it still uses: ``(taps - 1) m`` for point taps,
        plus the ``b - 1`` older samples of the first bin for box-averaged taps of width b."""
        return (self.sg.taps - 1) * self.calibration.m + self._window_sg.bin_width - 1

    def _buffer(self) -> SampleBuffer:
        st = self.settings
        generator = Pcg32(self.seed, STREAM_RESERVOIR) if self.pcg32 else None
        scale = self.calibration.x_rms.to(self.dtype) if st.reservoir_precision == "float16" else None
        return SampleBuffer(st.capacity, self.n, st.buffer, seed=self.seed, dtype=self.dtype, generator=generator,
                            forget_window=st.forget_window, half_scale=scale)

    def _gate(self) -> QualityGate:
        st = self.settings
        return QualityGate(self.n, st.gate_factor, st.gate_floor, st.gate_history, st.quality_gate, dtype=self.dtype)

    def _stream(self, y: Tensor, ticks: Tensor, seg: Tensor) -> int:
        m, s, taps, sg = self.calibration.m, self.stride, self.sg.taps, self._window_sg
        reach, b = self._reach(), sg.bin_width
        all_y = torch.cat((self._hist_y, y))
        all_seg = torch.cat((self._hist_seg, seg))
        h = self._hist_y.shape[0]
        ends = h + torch.nonzero(ticks % s == 0).flatten()
        ends = ends[ends >= reach]
        self._hist_y, self._hist_seg = all_y[-reach:], all_seg[-reach:]
        if ends.numel() == 0:
            return 0
        idx = ends.unsqueeze(1) - m * torch.arange(taps - 1, -1, -1).unsqueeze(0)  # (W, taps)
        if b == 1:
            win = all_y[idx].transpose(1, 2)  # (W, n, taps)
        else:  # each tap the mean of the b samples ending at it
            win = all_y[idx.unsqueeze(2) - torch.arange(b)].mean(dim=2).transpose(1, 2)
        self.counters["windows"] += int(ends.numel())
        finite = torch.isfinite(win).all(dim=2).all(dim=1)
        same = all_seg[idx[:, 0] - (b - 1)] == all_seg[idx[:, -1]]
        keep = finite & same
        if not bool(keep.all()):  # (masks that keep everything are skipped: the same windows)
            self.counters["nonfinite"] += int((~finite).sum())
            self.counters["boundary"] += int((finite & ~same).sum())
            win = win[keep]
            if win.shape[0] == 0:
                return 0
        rms = torch.sqrt((win * win).mean(dim=2))
        misfit = sg.misfit(win)
        jets = self.buffer.stored(torch.stack(sg.estimate(win, self.calibration.dt_eff), dim=1))  # (W, 3, n)
        # huge finite samples can overflow the estimates (or binary16 storage): such windows count as non-finite
        ok = (torch.isfinite(rms) & torch.isfinite(misfit)).all(dim=1) & torch.isfinite(jets).all(dim=2).all(dim=1)
        if not bool(ok.all()):
            self.counters["nonfinite"] += int((~ok).sum())
            misfit, rms, jets = misfit[ok], rms[ok], jets[ok]
        passed = self.gate.check(misfit, rms)
        if not bool(passed.all()):
            self.counters["misfit"] += int((~passed).sum())
            jets = jets[passed]
        n_ok = int(jets.shape[0])
        self.counters["accepted"] += n_ok
        if n_ok:
            self.buffer.add(jets)
        return n_ok

    # ----- checkpoints ---------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Complete state: calibration, ring, gate history, buffer and counters."""
        return {
            "settings": asdict(self.settings), "n": self.n, "fs": self.fs, "seed": self.seed, "pcg32": self.pcg32,
            "cal_y": self._cal_y.clone(), "cal_seg": self._cal_seg.clone(), "cal_fill": self._cal_fill,
            "cal_bridged": self._cal_bridged.clone(), "cal_ticks": self._cal_ticks.clone(),
            "last_y": None if self._last_y is None else self._last_y.clone(),
            "calibration": None if self.calibration is None else asdict(self.calibration),
            "buffer": None if self.buffer is None else self.buffer.state_dict(),
            "gate": None if self.gate is None else self.gate.state_dict(),
            "hist": (self._hist_y.clone(), self._hist_seg.clone()),
            "last_tick": self._last_tick, "last_key": self._last_key, "breaks": self._breaks,
            "counters": dict(self.counters),
            **({"n_inputs": self.n_inputs} if self.n_inputs else {}),
        }

    @classmethod
    def from_state_dict(cls, state: dict) -> StreamEstimator:
        """Rebuild an estimator from `state_dict`."""
        n_inputs = state.get("n_inputs", 0)
        est = cls(state["n"] - n_inputs, state["fs"], StreamSettings(**state["settings"]), state["seed"],
                  dtype=state["cal_y"].dtype, pcg32=state.get("pcg32", False), n_inputs=n_inputs)
        est._cal_y.copy_(state["cal_y"])
        est._cal_seg.copy_(state["cal_seg"])
        est._cal_bridged.copy_(state["cal_bridged"])
        if "cal_ticks" in state:  # (a checkpoint from before calibration_replay, which it then cannot have)
            est._cal_ticks.copy_(state["cal_ticks"])
        est._cal_fill = state["cal_fill"]
        est._last_y = None if state["last_y"] is None else state["last_y"].clone()
        if state["calibration"] is not None:
            est.calibration = Calibration(**state["calibration"])
            est.buffer, est.gate, est._window_sg = est._buffer(), est._gate(), est._windows_estimator()
            est.buffer.load_state_dict(state["buffer"])
            est.gate.load_state_dict(state["gate"])
        est._hist_y, est._hist_seg = (t.clone() for t in state["hist"])
        est._last_tick, est._breaks = state["last_tick"], state["breaks"]
        est._last_key = None if state["last_key"] is None else tuple(state["last_key"])
        est.counters = dict(state["counters"])
        return est

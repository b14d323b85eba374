"""Streaming SG estimator of Algorithm 1: calibration, phase sampling, gating, buffering.

Samples arrive one at a time or in chunks, each with its integer tick (sample index
at rate ``fs``). The pipeline

1. collects ``calibration_s`` seconds and runs `calibrate` (scales, noise, ``m``, ``lambda2``);
2. then keeps the last ``10 m`` samples per channel (with the newest chunk, the
   ``11 m``-sample ring of the paper) and, at every tick divisible by the stride
   ``s``, forms the window of 11 taps ``m`` apart that ends at that tick (full-rate
   phase sampling; the v1 mode uses ``s = m``, decimated windows);
3. rejects and counts windows with a non-finite tap (``nonfinite``), windows that
   straddle a gap or a segment boundary (``boundary``), and windows failing the
   misfit gate of Eq. (27) (``misfit``);
4. offers accepted SG jets to a fixed-capacity `SampleBuffer`.

Ticks that do not increase are dropped and counted (``out_of_order``); a tick that
skips ahead is a gap (``gaps``). Everything is float64 on the host.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import Tensor

from .calibration import Calibration, calibrate, valid_windows
from .gate import QualityGate
from .reservoir import SampleBuffer
from .savgol import SavitzkyGolay

__all__ = ["StreamSettings", "StreamEstimator"]

_COUNTERS = ("samples", "nonfinite_samples", "out_of_order", "gaps", "windows",
             "nonfinite", "boundary", "misfit", "accepted")


@dataclass
class StreamSettings:
    """Settings of the streaming estimator (each mechanism can be switched off).

    Attributes:
        half_width: SG half width M (window of 2M + 1 taps).
        order: SG polynomial order P.
        stride: window stride s in ticks; None means s = m (v1 decimated windows).
        calibration_s: length of the calibration phase in s.
        m: fixed tap spacing, or None for the adaptive time scale of Eq. (24).
        m_max: largest adaptive tap spacing.
        dt_scale: constant of Eq. (24).
        lambda2: second-order weight lambda2^0.
        snr_gate: gate lambda2 by the SNR of Eq. (25)-(26).
        snr_threshold: tau_SNR.
        quality_gate: apply the misfit gate of Eq. (27).
        gate_factor, gate_floor, gate_history: the gate's constants and median length.
        buffer: ``"reservoir"`` or ``"fifo"`` (v1).
        capacity: buffer capacity B.
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

    def validate(self) -> None:
        """Raise ValueError for impossible settings."""
        if self.stride is not None and self.stride < 1:
            raise ValueError(f"stride must be >= 1 (or null for s = m); got {self.stride}.")
        if self.m is not None and not 1 <= self.m <= self.m_max:
            raise ValueError(f"m must be an integer in [1, m_max = {self.m_max}]; got {self.m}.")
        if self.m_max < 1:
            raise ValueError(f"m_max must be >= 1; got {self.m_max}.")
        if self.capacity < 1:
            raise ValueError(f"capacity (B) must be >= 1; got {self.capacity}.")
        if not self.calibration_s > 0:
            raise ValueError(f"calibration_s must be positive (seconds); got {self.calibration_s}.")
        if self.buffer not in ("reservoir", "fifo"):
            raise ValueError(f"buffer must be 'reservoir' or 'fifo'; got {self.buffer!r}.")
        if 2 * self.half_width + 1 <= self.order:
            raise ValueError(f"an SG window of {2 * self.half_width + 1} taps cannot fit order {self.order}.")


torch.serialization.add_safe_globals([StreamSettings])  # checkpoints store it in the module's hyperparameters


class StreamEstimator:
    """Turn a raw sensor stream into a buffer of SG jet samples (Algorithm 1, lines 3-12).

    Args:
        n_states: number of channels n.
        fs: sample rate in Hz (> 0).
        settings: `StreamSettings`.
        seed: seed of the buffer's replacement generator.

    Attributes:
        calibration: the `Calibration` once the calibration phase is over, else None.
        counters: event counts (see module doc).
    """

    def __init__(self, n_states: int, fs: float, settings: StreamSettings | None = None, seed: int = 0) -> None:
        if not fs > 0:
            raise ValueError(f"fs (the sample rate in Hz) must be positive; got {fs!r}.")
        self.settings = settings or StreamSettings()
        self.settings.validate()
        self.n, self.fs, self.seed = int(n_states), float(fs), int(seed)
        self.sg = SavitzkyGolay(self.settings.half_width, self.settings.order)
        self._cal_len = max(round(self.settings.calibration_s * self.fs), self.sg.taps)
        self._cal_y = torch.empty(self._cal_len, self.n, dtype=torch.float64)
        self._cal_seg = torch.empty(self._cal_len, dtype=torch.int64)
        self._cal_fill = 0
        self.calibration: Calibration | None = None
        self.buffer: SampleBuffer | None = None
        self.gate: QualityGate | None = None
        self._hist_y = torch.empty(0, self.n, dtype=torch.float64)
        self._hist_seg = torch.empty(0, dtype=torch.int64)
        self._last_tick: int | None = None
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
        """Fraction of windows that reached the misfit gate and were rejected by it."""
        reached = self.counters["misfit"] + self.counters["accepted"]
        return self.counters["misfit"] / reached if reached else 0.0

    # ----- ingestion -----------------------------------------------------------------------
    def push(self, y: Tensor, ticks: Tensor | None = None, segment: Tensor | None = None) -> int:
        """Ingest samples.

        Args:
            y: samples, shape (k, n) or (n,) for one sample, floating point; NaN/Inf
                samples are allowed and counted (windows touching them are rejected).
            ticks: integer sample indices, shape (k,); default: consecutive after the
                last tick (starting at 0).
            segment: optional segment ids, shape (k,); a change starts a new segment
                (e.g. a re-excitation), like a gap.

        Returns:
            Number of jet samples accepted into the buffer.

        Raises:
            TypeError, ValueError: for a wrong dtype or shape.
        """
        y, ticks, segment = self._check_chunk(y, ticks, segment)
        if y.shape[0] == 0:
            return 0
        seg_eff = self._segment_keys(ticks, segment)
        self.counters["nonfinite_samples"] += int((~torch.isfinite(y)).any(dim=1).sum())
        self.counters["samples"] += int(y.shape[0])
        accepted = 0
        if self.calibration is None:
            take = min(self._cal_len - self._cal_fill, y.shape[0])
            self._cal_y[self._cal_fill : self._cal_fill + take] = y[:take]
            self._cal_seg[self._cal_fill : self._cal_fill + take] = seg_eff[:take]
            self._cal_fill += take
            if self._cal_fill == self._cal_len:
                self._finish_calibration()
            y, ticks, seg_eff = y[take:], ticks[take:], seg_eff[take:]
        if self.calibration is not None and y.shape[0]:
            accepted = self._stream(y, ticks, seg_eff)
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
        # drop ticks that do not increase (duplicates, out-of-order arrivals)
        prev = torch.cat((torch.tensor([-(1 << 62) if self._last_tick is None else self._last_tick]),
                          torch.cummax(ticks, 0).values[:-1]))
        ok = ticks > prev
        dropped = int((~ok).sum())
        if dropped:
            self.counters["out_of_order"] += dropped
            y, ticks, segment = y[ok], ticks[ok], segment[ok]
        return y.to(torch.float64), ticks, segment

    def _segment_keys(self, ticks: Tensor, segment: Tensor) -> Tensor:
        """Monotone segment keys: a new key at every gap or change of the given segment id."""
        prev_tick = torch.cat((torch.tensor([ticks[0] - 1 if self._last_tick is None else self._last_tick]),
                               ticks[:-1]))
        first_seg = segment[0] if self._last_key is None else torch.tensor(self._last_key[0])
        prev_seg = torch.cat((first_seg.reshape(1), segment[:-1]))
        gap = ticks - prev_tick != 1
        change = (segment != prev_seg) | gap
        self.counters["gaps"] += int(gap.sum())
        keys = self._breaks + torch.cumsum(change.to(torch.int64), 0)
        self._breaks = int(keys[-1])
        self._last_tick = int(ticks[-1])
        self._last_key = (int(segment[-1]), self._breaks)
        return keys

    def _finish_calibration(self) -> None:
        st = self.settings
        self.calibration = calibrate(
            self._cal_y, self.fs, self._cal_seg, self.sg, m=st.m, m_max=st.m_max, dt_scale=st.dt_scale,
            lambda2_0=st.lambda2, snr_threshold=st.snr_threshold, gate_lambda2=st.snr_gate)
        self.buffer = SampleBuffer(st.capacity, self.n, st.buffer, seed=self.seed)
        self.gate = QualityGate(self.n, st.gate_factor, st.gate_floor, st.gate_history, st.quality_gate)
        # warm the gate's running median on the calibration record
        warm = valid_windows(self.sg, self._cal_y, self._cal_seg, self.calibration.m, self.stride)
        tail = warm[-st.gate_history :]
        self.gate.check(self.sg.misfit(tail), torch.sqrt((tail * tail).mean(dim=2)))
        span = (self.sg.taps - 1) * self.calibration.m
        self._hist_y = self._cal_y[-span:].clone()
        self._hist_seg = self._cal_seg[-span:].clone()

    def _stream(self, y: Tensor, ticks: Tensor, seg: Tensor) -> int:
        m, s, taps = self.calibration.m, self.stride, self.sg.taps
        span = (taps - 1) * m
        all_y = torch.cat((self._hist_y, y))
        all_seg = torch.cat((self._hist_seg, seg))
        h = self._hist_y.shape[0]
        ends = h + torch.nonzero(ticks % s == 0).flatten()
        ends = ends[ends >= span]
        self._hist_y, self._hist_seg = all_y[-span:], all_seg[-span:]
        if ends.numel() == 0:
            return 0
        idx = ends.unsqueeze(1) - m * torch.arange(taps - 1, -1, -1).unsqueeze(0)  # (W, taps)
        win = all_y[idx].transpose(1, 2)  # (W, n, taps)
        self.counters["windows"] += int(ends.numel())
        finite = torch.isfinite(win).all(dim=2).all(dim=1)
        same = all_seg[idx[:, 0]] == all_seg[idx[:, -1]]
        self.counters["nonfinite"] += int((~finite).sum())
        self.counters["boundary"] += int((finite & ~same).sum())
        win = win[finite & same]
        if win.shape[0] == 0:
            return 0
        rms = torch.sqrt((win * win).mean(dim=2))
        passed = self.gate.check(self.sg.misfit(win), rms)
        self.counters["misfit"] += int((~passed).sum())
        win = win[passed]
        n_ok = int(win.shape[0])
        self.counters["accepted"] += n_ok
        if n_ok:
            x, xd, xdd = self.sg.estimate(win, self.calibration.dt_eff)
            self.buffer.add(torch.stack((x, xd, xdd), dim=1))
        return n_ok

    # ----- checkpoints ---------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Complete state: calibration, ring, gate history, buffer and counters."""
        return {
            "settings": asdict(self.settings), "n": self.n, "fs": self.fs, "seed": self.seed,
            "cal_y": self._cal_y.clone(), "cal_seg": self._cal_seg.clone(), "cal_fill": self._cal_fill,
            "calibration": None if self.calibration is None else asdict(self.calibration),
            "buffer": None if self.buffer is None else self.buffer.state_dict(),
            "gate": None if self.gate is None else self.gate.state_dict(),
            "hist": (self._hist_y.clone(), self._hist_seg.clone()),
            "last_tick": self._last_tick, "last_key": self._last_key, "breaks": self._breaks,
            "counters": dict(self.counters),
        }

    @classmethod
    def from_state_dict(cls, state: dict) -> StreamEstimator:
        """Rebuild an estimator from `state_dict`."""
        est = cls(state["n"], state["fs"], StreamSettings(**state["settings"]), state["seed"])
        est._cal_y.copy_(state["cal_y"])
        est._cal_seg.copy_(state["cal_seg"])
        est._cal_fill = state["cal_fill"]
        if state["calibration"] is not None:
            est.calibration = Calibration(**state["calibration"])
            st = est.settings
            est.buffer = SampleBuffer(st.capacity, est.n, st.buffer, seed=est.seed)
            est.buffer.load_state_dict(state["buffer"])
            est.gate = QualityGate(est.n, st.gate_factor, st.gate_floor, st.gate_history, st.quality_gate)
            est.gate.load_state_dict(state["gate"])
        est._hist_y, est._hist_seg = (t.clone() for t in state["hist"])
        est._last_tick, est._breaks = state["last_tick"], state["breaks"]
        est._last_key = None if state["last_key"] is None else tuple(state["last_key"])
        est.counters = dict(state["counters"])
        return est

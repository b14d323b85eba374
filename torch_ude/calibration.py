"""Calibration and adaptation of Algorithm 1 (lines 3-4): scales, noise, m and lambda2.

From a short calibration record of the raw stream:

* ``sigma_hat`` per channel by Eq. (23) from 11 consecutive samples (tap spacing 1,
  where the polynomial bias is negligible), over the windows that hold no outlier
  (`screen_outliers`: a sample far from the median of its four neighbours) and no
  bridged sample. Eq. (23) alone is a mean of squares: 5 % spikes of 100 sigma make it
  about 30x too high; screened, it stays within 2 % (tests/torch_ude/test_calibration.py);
* ``x_rms``, ``s1``, ``s2``: RMS of the SG estimates ``x_hat, xdot_hat, xddot_hat``
  with the noise share removed (``mean(est^2) - (||D_d|| sigma / dt^d)^2``; the
  noise is independent of the signal), so that noise does not masquerade as signal;
* ``omega_c = max_i s2_i / s1_i``, the characteristic frequency of the fastest channel,
  whose polynomial truncation bias limits the step (bias does not average out over
  the buffer, noise does), and the tap spacing
  ``m = round(fs * dt*)`` of Eq. (24) with ``sigma_rel = mean_i sigma_hat_i / x_rms_i``;
* ``lambda2`` by the SNR gate of Eq. (25)-(26);
* (ours, not in the paper) the decoupled weight decay for the measured noise,
  `noise_adaptive_weight_decay`;
* (ours) a check that the noise estimate reads noise: Eq. (23) assumes the 11 consecutive
  samples of its window lie on a polynomial up to noise. A signal with few samples per
  period breaks that, and its polynomial bias then reads as noise (an oscillator at 9 samples
  per period reads 4 times its true noise). White noise gives the centre residuals of
  consecutive windows a known lag-1 correlation ``rho_noise = sum_j c_j c_(j+1) / sum_j c_j^2``
  (``c`` the residual's taps, -0.46 for M = 5, P = 4), while a smooth bias is positively
  correlated (close to 1), so ``(rho - rho_noise) / (1 - rho_noise)`` bounds from below the
  share of the residual's power that is signal (`Calibration.bias_share`). Above
  `BIAS_SHARE_LIMIT` the signal is too fast for the window: the SNR gate then keeps the
  second-order term off (its target is biased too) and `calibration_notes` says so, with the
  samples per period of the fastest channel (the peak of its spectrum) and the rate the jets
  would need.

Windows that contain a non-finite sample, an outlier or straddle a segment boundary (a
long gap or a re-excitation) are left out of every estimate.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import Tensor

from .savgol import SavitzkyGolay, optimal_dt, savgol_rows, snr2

__all__ = ["Calibration", "calibrate", "valid_windows", "screen_outliers", "noise_adaptive_weight_decay",
           "calibration_notes", "CALIBRATION_M0", "BIAS_SHARE_LIMIT", "SAMPLES_PER_PERIOD_NEEDED"]

_MAX_ROUNDS = 5  # fixed-point rounds of the adaptive tap spacing
CALIBRATION_M0 = 40  # tap spacing of the first scale measurement of the adaptive time scale
_MAD_TO_SD = 1.4826  # standard deviations per median absolute deviation of a Gaussian
#: The share of the noise estimate's residual power that is signal above which the signal is too
#: fast for the Savitzky–Golay window (module doc): 7 standard errors of the lag-1 correlation
#: over a 3 s record at 1 kHz, and far below the 0.79 of an oscillator at 9 samples per period.
BIAS_SHARE_LIMIT = 0.1
#: Samples per period the jets need: the 11-tap window then spans a quarter period or less, and
#: the bias of an oscillation stays below the noise at 0.1 % noise (measured on the Duffing plant).
SAMPLES_PER_PERIOD_NEEDED = 40


@dataclass
class Calibration:
    """The outcome of a calibration phase (float64 tensors of shape (n,) and scalars).

    Attributes:
        x_rms: state RMS per channel (input scale of the network).
        s1: first-derivative RMS per channel (output scale, r1 scale).
        s2: second-derivative RMS per channel (r2 scale).
        sigma: estimated noise standard deviation per channel (state units).
        sigma_rel: mean relative noise ``sigma_i / x_rms_i``.
        omega_c: characteristic frequency ``max_i s2_i / s1_i`` in rad/s.
        m: tap spacing in samples.
        dt_eff: ``m / fs`` in s.
        snr2: second-derivative SNR of Eq. (25) at ``m``.
        lambda2: second-order weight after the gate of Eq. (26) (0 when the signal is too
            fast for the window, `bias_share`).
        bias_share: per channel, the least share of the noise estimate's residual power that
            is signal, not noise (module doc); None for a calibration made before the check.
        samples_per_period: per channel, samples per period of the strongest frequency of the
            record (``inf`` for a channel with no oscillation); None as ``bias_share``.
        too_fast: a state channel's ``bias_share`` exceeds `BIAS_SHARE_LIMIT`.
    """

    x_rms: Tensor
    s1: Tensor
    s2: Tensor
    sigma: Tensor
    sigma_rel: float
    omega_c: float
    m: int
    dt_eff: float
    snr2: float
    lambda2: float
    bias_share: Tensor | None = None
    samples_per_period: Tensor | None = None
    too_fast: bool = False

    def to_dict(self) -> dict:
        """JSON-serializable view."""
        return {k: (v.tolist() if isinstance(v, Tensor) else v) for k, v in asdict(self).items()}


def valid_windows(sg: SavitzkyGolay, y: Tensor, segment: Tensor, spacing: int, stride: int) -> Tensor:
    """Windows of ``y`` (T, n) with all taps finite and in one segment, (W, n, 2M + 1)."""
    win = sg.windows(y, spacing, stride)
    seg = sg.windows(segment.to(torch.float64).unsqueeze(1), spacing, stride)[:, 0, :]
    ok = torch.isfinite(win).all(dim=2).all(dim=1) & (seg.amin(dim=1) == seg.amax(dim=1))
    return win[ok]


def screen_outliers(y: Tensor, segment: Tensor, threshold: float = 5.0) -> Tensor:
    """Flag outlier samples (spikes) of a record before its noise is estimated.

    Each sample with four finite neighbours in its segment is compared with their
    median (offsets -2, -1, +1, +2; for an even count, the mean of the middle two), which
    a single spike among them barely moves:
    ``r_k = y_k - median(y_{k-2}, y_{k-1}, y_{k+1}, y_{k+2})``. Per channel, a sample
    is an outlier when ``|r_k| > threshold * 1.4826 * median(|r|)`` (the median over
    those samples; the lower median for an even count). A channel whose ``median(|r|)`` is 0 (a clean or coarsely quantized
    signal) flags nothing. Samples without four neighbours are never flagged.

    Args:
        y: raw samples, shape (T, n); NaN/Inf samples are allowed (never flagged).
        segment: segment id of each sample, shape (T,); neighbours come from one segment.
        threshold: the flag level in robust standard deviations of ``r`` (> 0).

    Returns:
        Boolean mask of shape (T,), True where any channel of the sample is an outlier.
    """
    t, n = y.shape
    flagged = torch.zeros(t, dtype=torch.bool)
    if t < 5:
        return flagged
    five = torch.stack((y[:-4], y[1:-3], y[3:-1], y[4:], y[2:-2]), dim=2)  # (T-4, n, 5), the sample last
    neighbours = five[..., :4].sort(dim=2).values
    r = y[2:-2] - 0.5 * (neighbours[..., 1] + neighbours[..., 2])
    usable = torch.isfinite(five).all(dim=2) & (segment[:-4] == segment[4:]).unsqueeze(1)
    for i in range(n):
        dev = r[usable[:, i], i].abs()
        if dev.numel() == 0:
            continue
        scale = _MAD_TO_SD * float(dev.median())
        if scale > 0:
            flagged[2:-2] |= usable[:, i] & (r[:, i].abs() > threshold * scale)
    return flagged


def _bias_share(sg: SavitzkyGolay, residuals: Tensor) -> Tensor:
    """The least share of signal in the centre residuals of consecutive windows, (W, n) -> (n,)
    (module doc)."""
    c = -sg.rows[0].to(torch.float64)
    c[sg.half_width] += 1.0
    rho_noise = float((c[:-1] * c[1:]).sum() / (c * c).sum())
    power = (residuals * residuals).sum(dim=0)
    rho = (residuals[:-1] * residuals[1:]).sum(dim=0) / torch.where(power > 0, power, torch.ones_like(power))
    return torch.clamp((rho - rho_noise) / (1.0 - rho_noise), 0.0, 1.0)


def _samples_per_period(y: Tensor, segment: Tensor) -> Tensor:
    """Samples per period of each channel's strongest frequency over its longest finite stretch
    of one segment (the peak of the periodogram of the mean-removed samples), (T, n) -> (n,)."""
    ok = torch.isfinite(y).all(dim=1)
    key = torch.where(ok, segment, torch.full_like(segment, -1))
    breaks = torch.nonzero(key[1:] != key[:-1]).flatten() + 1
    bounds = [0, *breaks.tolist(), y.shape[0]]
    lo, hi = max(((a, b) for a, b in zip(bounds[:-1], bounds[1:]) if bool(ok[a])), key=lambda p: p[1] - p[0],
                 default=(0, 0))
    out = torch.full((y.shape[1],), math.inf, dtype=torch.float64)
    if hi - lo < 4:
        return out
    part = y[lo:hi] - y[lo:hi].mean(dim=0)
    power = torch.fft.rfft(part, dim=0).abs()[1:]  # no DC
    peak = power.argmax(dim=0) + 1
    has = power.amax(dim=0) > 0
    out[has] = (hi - lo) / peak[has].to(torch.float64)
    return out


def calibration_notes(cal: Calibration, fs: float, half_width: int, n_states: int | None = None) -> list[str]:
    """What a run should say about its calibration: the SNR gate's decision, and a signal too
    fast for the window with the rate the jets would need (module doc).

    Args:
        cal: the calibration.
        fs: the sample rate in Hz.
        half_width: the SG half width M.
        n_states: the state channels (the first ones), None for all.

    Returns:
        One-line messages; the first is the SNR gate's, a second one warns of a signal too fast.
    """
    states = slice(None) if n_states is None else slice(0, n_states)
    gate = "on" if cal.lambda2 > 0 else "off"
    notes = [f"SNR gate: second-derivative SNR {cal.snr2:.3g} at m = {cal.m}: the second-order term is {gate} "
             f"(lambda2 = {cal.lambda2:g})" + (" because the signal is too fast for the window" if cal.too_fast
                                              else "")]
    if cal.too_fast and cal.bias_share is not None:
        share = torch.as_tensor(cal.bias_share)[states]
        periods = torch.as_tensor(cal.samples_per_period)[states]
        i = int(share.argmax())
        per = float(periods[i])
        need = SAMPLES_PER_PERIOD_NEEDED * fs / per if math.isfinite(per) else math.nan
        notes.append(
            f"the signal is too fast for the Savitzky-Golay window: channel {i} oscillates at about {per:.1f} samples "
            f"per period, while the window spans {2 * half_width + 1} samples, and at least {float(share[i]):.0%} of "
            f"what the calibration read as noise is the polynomial's bias (sigma_hat {float(cal.sigma[i]):.3g} is "
            f"too high, and the jets are biased). The jets need about {SAMPLES_PER_PERIOD_NEEDED} samples per period: "
            f"sample at {need:.4g} Hz or more (now {fs:g} Hz); a shorter window (stream.half_width) only partly helps.")
    return notes


def _scales(sg: SavitzkyGolay, y: Tensor, segment: Tensor, m: int, stride: int, fs: float,
            sigma: Tensor) -> tuple[Tensor, ...]:
    win = valid_windows(sg, y, segment, m, stride)
    if win.shape[0] == 0:
        raise ValueError(
            f"the calibration record holds no complete SG window at tap spacing m = {m} "
            f"({(sg.taps - 1) * m + 1} samples); lengthen the calibration phase."
        )
    dt = m / fs
    est = sg.estimate(win, dt)
    rows = sg.rows.to(torch.float64)
    out = []
    for d, v in enumerate(est):
        power = (v * v).mean(dim=0)
        noise = (torch.linalg.vector_norm(rows[d]) * sigma / dt**d) ** 2
        out.append(torch.sqrt(torch.clamp(power - noise, min=0.01 * power)))
    return tuple(out)


def calibrate(y: Tensor, fs: float, segment: Tensor | None = None, sg: SavitzkyGolay | None = None,
              m: int | None = None, m0: int = CALIBRATION_M0, stride: int = 5, m_max: int = 100, dt_scale: float = 0.117,
              lambda2_0: float = 0.1, snr_threshold: float = 12.0, gate_lambda2: bool = True,
              bridged: Tensor | None = None, outlier_threshold: float | None = 5.0,
              n_states: int | None = None, tap_average: bool = False) -> Calibration:
    """Measure scales and noise on a calibration record and choose ``m`` and ``lambda2``.

    Args:
        y: raw samples, shape (T, n), float64; NaN/Inf samples are allowed and skipped.
        fs: sample rate in Hz.
        segment: segment id of each sample, shape (T,); windows never straddle two.
        sg: the estimator (default M = 5, P = 4).
        m: a fixed tap spacing (adaptive time scale off), or None to choose it by Eq. (24).
        m0: tap spacing of the first scale measurement; the adaptive ``m`` is then
            refined on scales measured at the current ``m`` (at most 5 rounds).
        stride: window stride in samples for the scale estimates.
        m_max: the largest spacing the stream's buffers hold.
        dt_scale: the constant of Eq. (24).
        lambda2_0: second-order weight when the gate passes (or always, ungated).
        snr_threshold: tau_SNR of Eq. (26).
        gate_lambda2: apply the SNR gate; if False, ``lambda2 = lambda2_0``.
        bridged: mask of samples filled by gap bridging, shape (T,); they are left out
            of the noise estimate (an interpolated sample is smoother than a real one).
        outlier_threshold: level of `screen_outliers` in robust standard deviations;
            flagged samples are left out of every estimate. None: no screening.
        n_states: with recorded inputs, the number of state channels: the first
            ``n_states`` columns of ``y`` are states, the rest inputs. Inputs get their
            scales and noise measured (the network's input scale) but do not set
            ``sigma_rel``, ``omega_c`` (so ``m``) or the SNR gate, which are about the
            state's jets. None: every channel is a state.
        tap_average: the stream's windows hold box-averaged taps (`torch_ude.savgol`,
            ``bin_width = m``): Eq. (24) and the SNR of Eq. (25) then see the noise of a tap,
            ``sigma / sqrt(m)`` (white noise averaged over m samples), and Eq. (25) the
            averaged fit's row ``D_2``. The adaptive ``m`` is the fixed point of
            Eq. (24) with that noise (``m ~ sigma^(2/11)`` instead of ``sigma^(1/5)``); the scales
            are measured with point taps as without it. False: the paper's point taps.

    Returns:
        The `Calibration`.

    Raises:
        ValueError: for a record too short for one window, or bad settings.
    """
    if not fs > 0:
        raise ValueError(f"fs must be positive (Hz); got {fs!r}.")
    if y.ndim != 2:
        raise ValueError(f"y must have shape (T, n); got {tuple(y.shape)}.")
    sg = sg or SavitzkyGolay()
    segment = torch.zeros(y.shape[0], dtype=torch.int64) if segment is None else torch.as_tensor(segment)
    if m is not None and not 1 <= m <= m_max:
        raise ValueError(f"m must be an integer in [1, m_max = {m_max}]; got {m!r}.")
    # the noise is measured on real samples only: bridged ones are smoother
    real = y if bridged is None or not bool(bridged.any()) else torch.where(bridged.unsqueeze(1), float("nan"), y)
    if outlier_threshold is not None:
        outliers = screen_outliers(real, segment, outlier_threshold).unsqueeze(1)
        if bool(outliers.any()):  # left out of every estimate, like a missing sample
            y, real = torch.where(outliers, float("nan"), y), torch.where(outliers, float("nan"), real)
    fine = valid_windows(sg, real, segment, 1, 1)
    if fine.shape[0] == 0:
        raise ValueError(f"the calibration record holds no {sg.taps} consecutive valid samples.")
    residuals = sg.centre_residual(fine)
    sigma = torch.sqrt(sg.noise_variance(residuals))
    bias_share = _bias_share(sg, residuals)
    if n_states is not None and not 1 <= n_states <= y.shape[1]:
        raise ValueError(f"n_states must be in [1, {y.shape[1]}] (the state channels of y); got {n_states!r}.")
    states = slice(None) if n_states is None else slice(0, n_states)
    adaptive = m is None
    m = min(m0, m_max) if adaptive else m
    for _ in range(_MAX_ROUNDS if adaptive else 1):
        # the scales measured at spacing m set m again, until it no longer changes: a wide
        # window smooths the fast channels and would understate their frequency
        x_rms, s1, s2 = _scales(sg, y, segment, m, stride, fs, sigma)
        if not all(bool(torch.isfinite(v).all()) and bool((v > 0).all()) for v in (x_rms, s1, s2)):
            raise ValueError("calibration produced a zero or non-finite scale; the record shows no motion.")
        sigma_rel = float((sigma / x_rms)[states].mean())
        omega_c = float((s2 / s1)[states].max())
        if not adaptive:
            break
        tap_noise = sigma_rel / math.sqrt(m) if tap_average else sigma_rel
        new_m = int(min(max(round(fs * optimal_dt(omega_c, max(tap_noise, 1e-12), dt_scale)), 1), m_max))
        if new_m == m:
            break
        m = new_m
    dt_eff = m / fs
    if tap_average:
        ratio = snr2(s2[states], sigma[states] / math.sqrt(m), dt_eff,
                     savgol_rows(sg.half_width, sg.order, 2, m)[2])
    else:
        ratio = snr2(s2[states], sigma[states], dt_eff, sg.rows[2].to(torch.float64))
    too_fast = bool((bias_share[states] > BIAS_SHARE_LIMIT).any())
    lam2 = lambda2_0 if (not gate_lambda2 or (ratio >= snr_threshold and not too_fast)) else 0.0
    return Calibration(x_rms=x_rms, s1=s1, s2=s2, sigma=sigma, sigma_rel=sigma_rel, omega_c=omega_c,
                       m=m, dt_eff=dt_eff, snr2=ratio if math.isfinite(ratio) else float("inf"),
                       lambda2=lam2, bias_share=bias_share, samples_per_period=_samples_per_period(y, segment),
                       too_fast=too_fast)


def noise_adaptive_weight_decay(sigma_rel: float, weight_decay: float, full_at: float | None) -> float:
    """Decoupled weight decay for the measured relative noise (our addition to Algorithm 1).

    Decay pulls the network towards the known model; it pays where target noise
    dominates and costs a shrinkage bias where the targets are clean. Adam divides
    the gradient by its running RMS, which noise inflates, so the same decay
    regularizes more at higher noise by itself: a constant value is near-optimal from
    ``full_at`` upwards, and below it the decay falls like the noise variance
    (the ridge-regression rule), vanishing on clean data:

        weight_decay * min(1, (sigma_rel / full_at)^2).

    Args:
        sigma_rel: measured relative noise ``mean_i sigma_hat_i / x_rms_i`` (>= 0).
        weight_decay: decay at and above ``full_at`` (>= 0), per unit learning rate.
        full_at: relative noise from which the full decay applies (> 0), or None for
            a constant ``weight_decay``.

    Returns:
        The decay to use.

    Raises:
        ValueError: for a negative or non-finite ``sigma_rel`` or ``weight_decay`` or a
            non-positive ``full_at``.
    """
    if not (math.isfinite(sigma_rel) and sigma_rel >= 0):
        raise ValueError(f"sigma_rel must be a finite number >= 0; got {sigma_rel!r}.")
    if not (math.isfinite(weight_decay) and weight_decay >= 0):
        raise ValueError(f"weight_decay must be a finite number >= 0; got {weight_decay!r}.")
    if full_at is None:
        return float(weight_decay)
    if not (math.isfinite(full_at) and full_at > 0):
        raise ValueError(f"full_at (the relative noise of full decay) must be positive or None; got {full_at!r}.")
    return float(weight_decay) * min(1.0, (sigma_rel / full_at) ** 2)

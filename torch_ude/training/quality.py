"""Whether a streaming run learned from a stream it could trust: the indicators behind status ``"degraded"``.

A run always ends with a model, but the model is only as good as the jets it was fitted to. Three
indicators of the streaming estimator say when those jets were mostly something else than the
plant's motion plus the measured noise; each has a threshold chosen from what the mechanism
guarantees, and checked against every config of the repository (all stay below):

* **Reject share** (``reject_rate``): the share of the windows formed after calibration that were
  rejected (a non-finite tap, a gap or segment boundary, the misfit gate). Above
  `MAX_REJECT_RATE` = 0.5, most of the stream was faulty: what trained is the minority that
  survived, not a sample of the motion. The configs reject 0 to 12 %; a stream with 5 % of its
  samples spiked rejects 48 % and still learns the field, one with mixed faults (NaN, drops,
  spikes, dropouts) rejects 52 %.
* **Window phase** (``window_phase``): ``omega_c * dt_eff * 2M``, the radians of the calibration's
  characteristic motion that one Savitzky-Golay window spans. The adaptive step of Eq. (24) aims
  at about 1.2 rad at 1 % noise (the configs: 1.06 to 1.40). Above `MAX_WINDOW_PHASE` = pi, the
  window spans half a period or more of the motion, which an order-4 polynomial cannot follow:
  the jets are biased by the size of the derivatives themselves. This is how a collapsed adaptive
  step shows: mixed faults corrupted the calibration's scales (``s2`` 4000 times too large),
  Eq. (24) chose m = 1, and the window phase is 14 rad. A plant genuinely too fast for the
  sample rate (or a fixed ``m`` too large for it) trips it too. A healthy m = 1 (the EMPS and
  DFKI double-pendulum logs, nearly noise-free) stays near 1 rad.
* **Misfit ratio** (``misfit_ratio``, per state channel; Python engine only): the median
  polynomial misfit ``||R y||`` of the last ``gate_history`` windows that reached the gate, over
  what white noise of the calibrated sigma gives (``sigma sqrt(median chi2_dof)``,
  ``dof = 2M - P``; tap noise ``sigma / sqrt(m)`` with box-averaged taps). The gate rejects a
  window against ``factor`` times that running median, so the median must describe a clean
  window. Above `MAX_MISFIT_RATIO` = 3 the typical window holds 9 times the noise power off the
  polynomial: spikes (or steps) are in most windows, the gate's reference is set by them and it
  lets them through. With 20 % of the samples spiked, 91 % of the 11-tap windows hold one, the
  gate rejected only 6 % and the ratio is 42 to 58; the configs give 0.4 to 1.4 (quantized
  channels read lower).
* **Calibration retries** (``calibration_retries``; the C engine's ``calibration_failures``
  counter): the calibration the run used came after at least one that failed (no motion or no
  valid window in its record). The Python engine stops at a failed calibration (the run fails).

A run with any indicator past its threshold ends with status ``"degraded"`` and a one-line
warning naming the indicators (`torch_ude.training.JetMatchingModule`); ``metrics.json`` holds
all of them under ``"quality"``.
"""
from __future__ import annotations

import math

import torch
from scipy.stats import chi2

from ..calibration import Calibration
from ..stream import StreamSettings, reject_rate

__all__ = ["MAX_REJECT_RATE", "MAX_WINDOW_PHASE", "MAX_MISFIT_RATIO", "stream_quality"]

MAX_REJECT_RATE = 0.5
MAX_WINDOW_PHASE = math.pi
MAX_MISFIT_RATIO = 3.0


def stream_quality(calibration: Calibration | None, counters: dict, settings: StreamSettings, n_states: int,
                   gate_history: torch.Tensor | None = None, derived: tuple[int, ...] = ()) -> dict:
    """The quality indicators of a streaming run and the reasons it is degraded (module doc).

    Args:
        calibration: the run's calibration (None: the run did not calibrate; it fails anyway).
        counters: the stream's event counters (`torch_ude.stream`; the C engine's add
            ``calibration_failures``).
        settings: the stream settings (the SG window, box-averaged taps).
        n_states: the state channels (the first columns; the rest are recorded inputs).
        gate_history: the misfit gate's history, (gate_history, channels), NaN where empty;
            None where the engine does not expose it.
        derived: the state channels derived from others by a filter (velocities of position-only
            logs, `torch_ude.position_only`): their noise is correlated over the filter's span, so
            a box average of ``m`` samples does not divide it by ``sqrt(m)``; their tap noise is
            taken as ``sigma`` (the conservative reading: no reduction).

    Returns:
        ``reject_rate``, ``window_phase`` (rad), ``misfit_ratio`` (per state channel, or None),
        ``calibration_retries`` (or None), the thresholds, and ``degraded``: one phrase per
        indicator past its threshold (empty for a healthy run).
    """
    out: dict = {"reject_rate": reject_rate(counters), "window_phase": None, "misfit_ratio": None,
                 "calibration_retries": counters.get("calibration_failures"),
                 "thresholds": {"reject_rate": MAX_REJECT_RATE, "window_phase": MAX_WINDOW_PHASE,
                                "misfit_ratio": MAX_MISFIT_RATIO}}
    reasons = []
    if out["reject_rate"] > MAX_REJECT_RATE:
        reasons.append(f"{out['reject_rate']:.0%} of the windows were rejected (more than "
                       f"{MAX_REJECT_RATE:.0%}: most of the stream was faulty)")
    if calibration is not None:
        phase = float(calibration.omega_c * calibration.dt_eff * 2 * settings.half_width)
        out["window_phase"] = phase
        if phase > MAX_WINDOW_PHASE:
            reasons.append(f"one window spans {phase:.3g} rad of the calibrated motion (more than pi: m = "
                           f"{calibration.m} is too long a step for omega_c = {calibration.omega_c:.4g} rad/s, or the "
                           f"calibration record was corrupted)")
        if gate_history is not None and bool(torch.isfinite(gate_history[:, :n_states]).any()):
            dof = 2 * settings.half_width - settings.order
            tap = torch.full((n_states,), 1.0 / math.sqrt(calibration.m) if settings.tap_average else 1.0,
                             dtype=torch.float64)
            tap[list(derived)] = 1.0
            noise = calibration.sigma[:n_states].to(torch.float64) * tap * math.sqrt(chi2.median(dof))
            median = gate_history[:, :n_states].to(torch.float64).nanmedian(dim=0).values
            ratio = (median / noise).tolist()
            out["misfit_ratio"] = ratio
            worst = max(ratio)
            if worst > MAX_MISFIT_RATIO:
                reasons.append(f"the typical window is {worst:.3g} times further off its polynomial than the "
                               f"measured noise explains (more than {MAX_MISFIT_RATIO:g}: spikes or steps in most "
                               f"windows set the misfit gate's reference)")
    retries = out["calibration_retries"]
    if retries:
        reasons.append(f"the calibration succeeded only after {retries} failed attempt(s)")
    out["degraded"] = reasons
    return out

"""Do a log's jets hold the torque response? The lab's model form fitted to jet matching's targets.

The same first-order targets jet matching trains on (Savitzky-Golay windows of ``half_width`` and
``order`` at tap spacing m: the acceleration ``D_1 . q'_taps / (m / fs)`` against the window's smoothed
state and torque ``D_0 . taps``, every window of every segment, no gate, no reservoir) are fitted by
linear least squares in the DFKI lab's model form

    q'' = a tau + b sin q + c q' + d atan(100 q') + e,

i.e. ``J = 1 / a``, ``m cx = -b J / g``, ``Fv = -c J``, ``Fc = -d J``, ``offset = -e J``
(`torch_ude.systems.TorquePendulumModel`). Scored on validation logs
(`torch_ude.prediction.prediction_errors`), a good fit says the targets carry the torque response and a
network residual is what falls short; a poor one points at the targets (``benchmarks.real.dfki_jet_regression``).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .recorded import RecordedLog
from .savgol import savgol_rows
from .systems.controlled import TorquePendulumModel

__all__ = ["jet_targets", "fit_lab_form"]


def jet_targets(logs: Sequence[RecordedLog], spacing: int, half_width: int = 5,
                order: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """First-order jet targets of the rate channel, and the windows' smoothed state and torque.

    Args:
        logs: single-pendulum logs with channels (q [rad], q' [rad/s], tau [N m]).
        spacing: tap spacing m in samples (>= 1).
        half_width: M, 2M + 1 taps per window.
        order: polynomial order P.

    Returns:
        ``centre`` (N, 3): SG-smoothed (q, q', tau) at each window's centre, and ``accel`` (N,):
        the SG derivative of q' there in rad/s^2; one row per window that fits inside a segment (float64).

    Raises:
        ValueError: for a spacing below 1, logs that are not (q, q', tau), or no window at all.
    """
    if isinstance(spacing, bool) or not isinstance(spacing, int) or spacing < 1:
        raise ValueError(f"spacing must be an integer >= 1 (samples); got {spacing!r}.")
    rows = savgol_rows(half_width, order, 1).numpy()
    taps = np.arange(-half_width, half_width + 1) * spacing
    centre, accel = [], []
    for log in logs:
        if log.n_states != 2 or log.n_inputs != 1:
            raise ValueError(f"jet_targets needs logs of (q, q', tau); got channels {log.names}.")
        for seg in log.segments:
            idx = np.arange(half_width * spacing, seg.shape[0] - half_width * spacing)[:, None] + taps  # (N, 2M+1)
            if idx.shape[0] == 0:
                continue
            window = seg[idx]                                                         # (N, 2M+1, 3)
            centre.append(np.einsum("t,ntc->nc", rows[0], window))
            accel.append(window[:, :, 1] @ rows[1] * log.fs / spacing)
    if not centre:
        raise ValueError(f"no window of {2 * half_width + 1} taps at spacing {spacing} fits in any segment.")
    return np.concatenate(centre), np.concatenate(accel)


def fit_lab_form(centre: np.ndarray, accel: np.ndarray, gravity: float) -> TorquePendulumModel:
    """Least squares of ``accel`` on (tau, sin q, q', atan(100 q'), 1): the lab's model form (module doc).

    Args:
        centre: (N, 3) smoothed (q, q', tau), as `jet_targets` returns.
        accel: (N,) accelerations in rad/s^2.
        gravity: g in m/s^2.

    Returns:
        The fitted `TorquePendulumModel` (float64 constants).

    Raises:
        ValueError: when the fitted torque gain is not positive (no physical inertia).
    """
    q, v, tau = centre.T
    design = np.stack([tau, np.sin(q), v, np.arctan(100.0 * v), np.ones_like(q)], axis=1)
    a, b, c, d, e = np.linalg.lstsq(design, accel, rcond=None)[0]
    if not a > 0:
        raise ValueError(f"the fitted torque gain {a:.4g} (1/J) is not positive; the targets hold no torque response.")
    inertia = 1.0 / a
    return TorquePendulumModel(inertia=float(inertia), mass_com=float(-b * inertia / gravity), gravity=gravity,
                               viscous=float(-c * inertia), coulomb=float(-d * inertia), offset=float(-e * inertia))

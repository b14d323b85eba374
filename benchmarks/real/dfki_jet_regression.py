"""Do the jets of the DFKI logs hold the torque response? The lab's model form fitted to jet matching's targets.

    python -m benchmarks.real.dfki_jet_regression [--config configs/dfki_pendulum.yaml] [--spacings 1 2 3]

Issue 15's single-pendulum run misses its target (jet matching's 1 s open-loop error is about
twice the RK4 baseline's). This separates the targets from the function class: the same
first-order targets jet matching trains on (Savitzky-Golay windows of the config's
``half_width`` and ``order`` at tap spacing m on the config's training logs: the acceleration
``D_1 . q'_taps / (m / fs)`` against the window's smoothed state and torque ``D_0 . taps``) are
fitted by linear least squares in the lab's model form

    q'' = a tau + b sin q + c q' + d atan(100 q') + e,

i.e. ``J = 1 / a``, ``m cx = -b J / g``, ``Fv = -c J``, ``Fc = -d J``, ``offset = -e J``
(`torch_ude.systems.TorquePendulumModel`), and the fitted model is scored on the validation logs
with jet matching's metrics (`torch_ude.prediction.prediction_errors`). Every window of every
training segment is used (no gate, no reservoir). A good score means the targets carry the
torque response and the network residual is what falls short; a poor one points at the targets.

Writes results/dfki_jet_regression/dfki_jet_regression.json. Float64. The data are read from
../shared/data/dfki_pendulum (see its README); nothing is copied.
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from benchmarks.common import KEYS, require_data, save
from torch_ude.cli import main as cli_main
from torch_ude.field import HybridField
from torch_ude.prediction import prediction_errors
from torch_ude.recorded import RecordedLog
from torch_ude.savgol import savgol_rows
from torch_ude.systems.controlled import TorquePendulumModel

__all__ = ["jet_targets", "fit_lab_form", "main"]


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
        the SG derivative of q' there in rad/s^2; one row per window that fits inside a segment.

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
        centre: (N, 3) smoothed (q, q', tau).
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


def main(argv: list[str] | None = None) -> None:
    """Fit at each tap spacing, score on the validation logs, print and save the JSON."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", type=Path, default=Path("configs/dfki_pendulum.yaml"))
    ap.add_argument("--spacings", type=int, nargs="+", default=[1, 2, 3], help="tap spacings m in samples")
    args = ap.parse_args(argv)
    require_data(args.config, "dfki_jet_regression")
    cli = cli_main(["--config", str(args.config), "--trainer.logger", "false"], run=False)
    dm, stream = cli.datamodule, cli.model.hparams["stream"]
    half_width, order = int(stream["half_width"]), int(stream["order"])
    known = dm.system.known
    if not isinstance(known, TorquePendulumModel):
        raise SystemExit(f"benchmarks.real.dfki_jet_regression: {args.config} is not a single-pendulum config "
                         f"(known model {type(known).__name__}).")
    out = {"config": str(args.config), "half_width": half_width, "order": order, "fits": []}
    for m in args.spacings:
        centre, accel = jet_targets(dm.train_logs, m, half_width, order)
        model = fit_lab_form(centre, accel, known.gravity)
        scores = prediction_errors(HybridField.configured_physics(model), dm.val_logs, dm.horizons)
        row = {"spacing": m, "windows": int(accel.shape[0]), "parameters": model.init_args()} | \
              {k: scores.get(k) for k in KEYS}
        out["fits"].append(row)
        print(f"m {m}: {row['windows']} windows, " + ", ".join(f"{k} {row[k]:.4g}" for k in KEYS)
              + " | " + ", ".join(f"{k} {v:.4g}" for k, v in row["parameters"].items()), flush=True)
    print(f"saved {save('dfki_jet_regression', out)}")


if __name__ == "__main__":
    main()

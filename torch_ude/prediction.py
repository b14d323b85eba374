"""Metrics without ground truth: one-step and open-loop prediction errors on recorded logs.

On a real machine there is no true field; a model is scored by how well it predicts the
log. From a measured state ``y_k`` the model is integrated by classical RK4 at the log's
nominal step ``h = 1 / fs`` with the recorded input interpolated linearly over each step
(as `baselines.rk4` does), and compared with the measured states:

* one step: ``x_hat_{k+1}`` from every ``y_k`` against ``y_{k+1}``;
* open loop over a horizon ``H``: from measured states ``H`` seconds apart (the start of
  each non-overlapping stretch of ``H`` inside one segment), ``H fs`` steps with the
  recorded inputs, every predicted state against the measured one.

Errors are RMS per channel and normalized by the channel's RMS over the scored samples
(NRMSE); the reported scalar is the mean over channels. A diverging rollout gives inf.
Periodic channels (angles in rad, the plant's ``periodic`` states) are compared on the
circle: the error is wrapped to ``(-pi, pi]`` and the normalizing RMS is that of the
measured angle wrapped likewise, so a prediction a whole turn off is right and a log's
number of turns does not change its score.

A field with a trust envelope (`torch_ude.envelope`) also reports the share of the logged
samples (states with their inputs) that lie outside it, pooled and per log.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import Tensor

from .recorded import RecordedLog

__all__ = ["rk4_input_rollout", "open_loop_rollouts", "prediction_errors", "nrmse", "wrap_angle", "held_out_metric",
           "full_simulation", "prediction_and_simulation"]


@torch.no_grad()
def rk4_input_rollout(field: Callable[[Tensor, Tensor], Tensor], x0: Tensor, inputs: Tensor, h: float) -> Tensor:
    """RK4 with inputs interpolated linearly over each step (stage inputs ``u_k``, midpoint, ``u_{k+1}``).

    Args:
        field: ``F(x, u)``, (B, n), (B, n_u) -> (B, n).
        x0: initial states, (B, n).
        inputs: the inputs at the step times ``t_0 .. t_K``, (K + 1, B, n_u).
        h: step in s.

    Returns:
        The trajectories including ``x0``, (K + 1, B, n).
    """
    out = [x0]
    x = x0
    for k in range(inputs.shape[0] - 1):
        u0, u1 = inputs[k], inputs[k + 1]
        um = 0.5 * (u0 + u1)
        k1 = field(x, u0)
        k2 = field(x + 0.5 * h * k1, um)
        k3 = field(x + 0.5 * h * k2, um)
        k4 = field(x + h * k3, u1)
        x = x + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        out.append(x)
    return torch.stack(out)


def wrap_angle(a: Tensor) -> Tensor:
    """Angles wrapped to ``(-pi, pi]``, any shape, in rad."""
    return torch.atan2(torch.sin(a), torch.cos(a))


def nrmse(pred: Tensor, meas: Tensor, periodic: Sequence[int] = ()) -> tuple[list[float], list[float]]:
    """RMSE per channel and RMSE over the channel's RMS (the NRMSE of every prediction error here).

    Args:
        pred: predictions, (T, c).
        meas: the measured values at the same rows, (T, c).
        periodic: channels that are angles: their error and their RMS are taken on the circle (rad).

    Returns:
        ``(rms, nrmse)``, c floats each; ``inf`` for a non-finite error or a channel whose RMS is 0.
    """
    diff = pred - meas
    if periodic:
        idx = list(periodic)
        diff, meas = diff.clone(), meas.clone()
        diff[:, idx] = wrap_angle(diff[:, idx])
        meas[:, idx] = wrap_angle(meas[:, idx])
    err = torch.sqrt((diff ** 2).mean(dim=0))
    scale = torch.sqrt((meas ** 2).mean(dim=0))
    rms = [float(e) if torch.isfinite(e) else float("inf") for e in err]
    return rms, [r / float(s) if float(s) > 0 else float("inf") for r, s in zip(rms, scale)]


@torch.no_grad()
def open_loop_rollouts(field: Callable[[Tensor, Tensor], Tensor], segment: Tensor, n_states: int, steps: int,
                       h: float) -> tuple[Tensor, Tensor] | None:
    """Open-loop predictions over ``steps`` steps from the start of each non-overlapping stretch of a segment.

    Args:
        field: ``F(x, u)``, (B, n), (B, n_u) -> (B, n).
        segment: one log segment, (T, n + n_u): states, then inputs.
        n_states: n.
        steps: K, steps per prediction (the horizon times ``fs``).
        h: step in s.

    Returns:
        ``(idx, traj)``: the sample indices of each window, (K + 1, B), and the predicted
        trajectories from the measured states at ``idx[0]`` with the recorded inputs,
        (K + 1, B, n); None when the segment holds no window of ``K + 1`` samples.
    """
    starts = np.arange(0, segment.shape[0] - steps, steps)
    if starts.size == 0:
        return None
    idx = torch.as_tensor(starts).unsqueeze(0) + torch.arange(steps + 1).unsqueeze(1)
    return idx, rk4_input_rollout(field, segment[starts, :n_states], segment[idx][..., n_states:], h)


def prediction_errors(field, logs: Sequence[RecordedLog], horizons: Sequence[float] = (1.0, 5.0),
                      periodic: Sequence[int] | None = None) -> dict:
    """One-step and open-loop prediction errors of a field on logs (module doc).

    Args:
        field: a `torch_ude.field.HybridField` (or any ``F(x, u)`` with ``n_states`` and a
            ``dtype``); a field without inputs is called as ``F(x)``.
        logs: the logs (`torch_ude.recorded.read_log`), all with the same channels.
        horizons: open-loop horizons in s; a horizon longer than every segment is skipped
            (its entries are None).
        periodic: the state channels compared on the circle (module doc); None takes the
            field's periodic states (none for a field without an input map). Pass the
            plant's when comparing fields that read their states differently.

    Returns:
        ``one_step_rms`` / ``one_step_nrmse_per_channel`` (lists over the states),
        ``one_step_nrmse`` (their mean), the same ``open_loop_{H}s_*`` keys per horizon,
        ``open_loop_nrmse`` (the longest horizon evaluated), ``open_loop_windows_{H}s``, and
        ``outside_envelope`` / ``outside_envelope_per_log``: the share of logged samples
        outside the field's trust envelope (None without one).
    """
    n = logs[0].n_states
    if periodic is None:
        imap = getattr(field, "input_map", None)
        periodic = () if imap is None else imap.periodic
    dtype = getattr(field, "dtype", torch.float64)
    has_inputs = getattr(field, "n_inputs", logs[0].n_inputs) > 0

    def f(x: Tensor, u: Tensor) -> Tensor:
        return field.evaluate_unchecked(x, u) if has_inputs else field.evaluate_unchecked(x)

    h = 1.0 / logs[0].fs
    segments = [torch.as_tensor(s, dtype=dtype) for log in logs for s in log.segments]
    pred = [rk4_input_rollout(f, s[:-1, :n], torch.stack((s[:-1, n:], s[1:, n:])), h)[1] for s in segments]
    rms, per_channel = nrmse(torch.cat(pred), torch.cat([s[1:, :n] for s in segments]), periodic)
    out: dict = {"one_step_rms": rms, "one_step_nrmse_per_channel": per_channel,
                 "one_step_nrmse": float(np.mean(per_channel)),
                 "open_loop_nrmse": None, **_outside_shares(field, logs, dtype)}
    for horizon in horizons:
        steps = int(round(horizon / h))
        key = f"open_loop_{horizon:g}s"
        preds, meas, windows = [], [], 0
        for s in segments:
            rollouts = open_loop_rollouts(f, s, n, steps, h)
            if rollouts is None:
                continue
            idx, traj = rollouts
            windows += idx.shape[1]
            preds.append(traj[1:].reshape(-1, n))
            meas.append(s[idx][1:, :, :n].reshape(-1, n))
        if not preds:
            out.update({f"{key}_rms": None, f"{key}_nrmse_per_channel": None, f"{key}_nrmse": None,
                        f"open_loop_windows_{horizon:g}s": 0})
            continue
        rms, per_channel = nrmse(torch.cat(preds), torch.cat(meas), periodic)
        out.update({f"{key}_rms": rms, f"{key}_nrmse_per_channel": per_channel,
                    f"{key}_nrmse": float(np.mean(per_channel)), f"open_loop_windows_{horizon:g}s": windows})
        out["open_loop_nrmse"] = out[f"{key}_nrmse"]
    return out


def _outside_shares(field, logs: Sequence[RecordedLog], dtype: torch.dtype) -> dict:
    """``outside_envelope`` (pooled) and ``outside_envelope_per_log``: the share of each log's
    samples outside the field's envelope (`HybridField.outside`); None for a field without one."""
    if getattr(field, "envelope", None) is None:
        return {"outside_envelope": None, "outside_envelope_per_log": None}
    n = logs[0].n_states
    counts = []
    for log in logs:
        rows = torch.as_tensor(np.concatenate(log.segments), dtype=dtype)
        u = rows[:, n:] if field.n_inputs else None
        counts.append((int(field.outside(rows[:, :n], u).sum()), rows.shape[0]))
    total = sum(c for c, _ in counts), sum(t for _, t in counts)
    return {"outside_envelope": total[0] / total[1], "outside_envelope_per_log": [c / t for c, t in counts]}


def held_out_metric(errors: dict) -> str:
    """The key of `prediction_errors`' result that judges a model on held-out data: the open-loop
    NRMSE at the shortest horizon that could be scored, else the one-step NRMSE."""
    horizons = sorted(float(k[len("open_loop_"):-len("s_nrmse")]) for k in errors
                      if k.startswith("open_loop_") and k.endswith("s_nrmse") and errors[k] is not None)
    return f"open_loop_{horizons[0]:g}s_nrmse" if horizons else "one_step_nrmse"


def full_simulation(field, log: RecordedLog) -> dict:
    """The EMPS benchmark's protocol: one open-loop RK4 simulation of the whole record (each segment).

    From the record's first state (measured ``q``, derived ``q'``), RK4 at the nominal step with
    the recorded input interpolated linearly over each step (`rk4_input_rollout`).

    Args:
        field: a trained field with ``evaluate_unchecked(x, u)`` (a `torch_ude.HybridField`).
        log: the record; state 0 is the position (m), state 1 its velocity.

    Returns:
        ``rms_q_m`` and ``rms_q_mm`` (position error RMS), ``r2_q`` (``1 - SSE / SST`` of the
        position), ``rms_v`` (m/s, against the derived velocity), ``fit_percent_q``
        (``100 (1 - ||e|| / ||q - mean q||)``) and, not saved, the ``series`` for the plot.
        A diverging simulation gives inf errors and R^2 = -inf.
    """
    n = log.n_states
    dtype = getattr(field, "dtype", torch.float64)
    preds, meas = [], []
    for seg in log.segments:
        s = torch.as_tensor(seg, dtype=dtype)
        traj = rk4_input_rollout(lambda x, u: field.evaluate_unchecked(x, u), s[:1, :n], s[:, n:].unsqueeze(1),
                                 1.0 / log.fs)
        preds.append(traj[:, 0].to(torch.float64).numpy())
        meas.append(seg[:, :n])
    pred, y = np.concatenate(preds), np.concatenate(meas)
    if not np.isfinite(pred).all():
        return {"rms_q_m": float("inf"), "rms_q_mm": float("inf"), "r2_q": float("-inf"), "rms_v": float("inf"),
                "fit_percent_q": float("-inf"), "series": None}
    err = pred - y
    sst = float(((y[:, 0] - y[:, 0].mean()) ** 2).sum())
    rms_q = float(np.sqrt(np.mean(err[:, 0] ** 2)))
    return {"rms_q_m": rms_q, "rms_q_mm": 1e3 * rms_q, "r2_q": 1.0 - float((err[:, 0] ** 2).sum()) / sst,
            "rms_v": float(np.sqrt(np.mean(err[:, 1] ** 2))),
            "fit_percent_q": 100.0 * (1.0 - float(np.linalg.norm(err[:, 0])) / np.sqrt(sst)),
            "series": {"measured": y[:, 0], "simulated": pred[:, 0]}}


def prediction_and_simulation(field, logs: Sequence[RecordedLog], horizons: Sequence[float] = (1.0, 5.0)) -> dict:
    """`prediction_errors` on ``logs`` and the `full_simulation` of the first, as the EMPS rows report them.

    Args:
        field: as `full_simulation`.
        logs: the validation records; the first is simulated whole.
        horizons: the open-loop horizons in s.

    Returns:
        The prediction errors, the simulation's scalars prefixed ``simulation_`` (``simulation_rms_q_mm``,
        ``simulation_r2_q``, ...) and its ``series`` (not saved).
    """
    out = prediction_errors(field, logs, horizons)
    sim = full_simulation(field, logs[0])
    out.update({f"simulation_{k}": v for k, v in sim.items() if k != "series"})
    return out | {"series": sim["series"]}

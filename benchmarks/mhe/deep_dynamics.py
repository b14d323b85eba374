"""Table 2 of the PEM-MHE paper on the real IAC racecar, the EKF->PEM (adaptive) row: the Deep Dynamics model.

Data, model, bounds, split and EKF are those of ``benchmarks.mhe.iac`` (``configs/mhe_iac_physics_gn.yaml``:
the first 70 % of the gated stretch of IAC log B trains, the rest, the last 30 % (``--validation-part``
another part), validates; y = (vx, omega), vy unmeasured; Euler at 0.04 s). The row (Chrosniak et al., 2024;
`mhe.peers.deep_dynamics`):

1. `mhe.peers.ekf.ExtendedKalmanFilter` with the config's start model over the training part (noise
   model and prior from the config's MHE weights and arrival cost, as the EKF->PEM row);
2. the Deep Dynamics network (a GRU over the last ``--history`` rows of (EKF state, input), dense
   layers, the sigmoid physics guard into the config's 16 bounds) trained with Adam on the EKF's
   (vx, vy, omega): loss = mean of the squared one-step state error, weights (1, 1, 1) on
   (vx, vy, omega) as Deep Dynamics, float32, one thread. Settings default to Deep Dynamics'
   ``deep_dynamics_iac.yaml`` (history 15, GRU width 15 x 3 layers, 2 x 188 Mish, batch 128,
   400 epochs, lr 1e-3, the epoch kept by a random 20 % hold-out of the training samples).

Metrics. No MHE runs for this row (its coefficients change per sample, the MHE's model has
constant ones), so its state estimate ``x^_k`` is the EKF's (start model, filtered ``x^_{k|k}``, which
saw ``y~_0..y~_k``) on each part:

* one-step prediction error (Table 1's form): ``r_k = C f_d(x^_k, u~_k; theta_k) - y~_{k+1}`` with
  ``theta_k`` from the rows ``k - h + 1..k``; the mean of ``r^2`` over all samples with a full
  history and both outputs, in m/s and rad/s (not normalized); on training and validation;
* 1 s open loop on validation: from ``x^_k`` at the validation windows' ``x^_{N-1}`` samples of
  ``benchmarks.mhe.iac`` (those with a full history), ``--rollout-s`` of open-loop steps on the
  logged inputs, each prediction becoming the newest history row; mean over windows, steps and
  outputs of the squared output error, and the RMSE of each output at the end;
* training time: EKF + training (wall time);
* for comparison under the same ``x^`` (EKF) the constant-parameter models: the config's start,
  EKF->PEM (`mhe.peers.ekf_pem.ekf_pem`), and the mean of Deep Dynamics' coefficients over the
  training samples (a constant estimate, e.g. a start for PEM-MHE).

Prints the table and writes ``deep_dynamics.json``, ``deep_dynamics.png`` (validation vx and omega with
the 1 s open-loop predictions, and the coefficients over time) and the trained weights
``deep_dynamics.pt`` to ``--out``::

    python -m benchmarks.mhe.deep_dynamics
    python -m benchmarks.mhe.deep_dynamics --epochs 5 --out results/mhe_iac_short

Further arguments are ``torch-ude`` overrides of the config.
"""
from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from benchmarks.common import IAC_PAPER as PAPER, add_split_arguments, iac_ekf_pem_row, markdown_table
from mhe.models.bounds import clip_inside
from mhe.peers.deep_dynamics import (DeepDynamicsSettings, coefficient_summary, ekf_deep_dynamics, history_rows,
                                     next_state_errors, rollout, usable_samples)
from mhe.peers.ekf_pem import run_ekf
from mhe.problems.iac import validation_source
from mhe.scoring import logged_after, open_loop_error, rollouts, with_values
from mhe.training import load_experiment

__all__ = ["ROW", "main"]

ROW = "EKF->PEM (adaptive)"


def plot(path: Path, t: np.ndarray, y: np.ndarray, curves: Mapping[str, tuple[Tensor, Tensor]], theta_t: np.ndarray,
         theta: np.ndarray, names: tuple[str, ...]) -> None:
    """Validation vx and omega with the 1 s open-loop predictions of each row; coefficients in their ranges."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 1, figsize=(12, 9), sharex=True)
    colors = {ROW: "tab:green", "EKF->PEM": "tab:orange"}
    for j, (ax, label) in enumerate(zip(axes[:2], ("vx (m/s)", "omega (rad/s)"))):
        ax.plot(t, y[:, j], color="k", lw=0.8, label="measured")
        for name, (first, pred) in curves.items():
            for i, (f, p) in enumerate(zip(first.tolist(), pred[:, :, j].numpy())):
                ax.plot(t[f + 1:f + 1 + len(p)], p, color=colors.get(name, "tab:blue"), lw=0.8,
                        label=f"{name}, 1 s open loop" if i == 0 else None)
        ax.set_ylabel(label)
    axes[0].legend(loc="lower left", fontsize=8)
    for j, n in enumerate(names):
        axes[2].plot(theta_t, theta[:, j], lw=0.7, color=plt.cm.tab20(j), label=n)
    axes[2].set_ylabel("coefficient, fraction\nof its range")
    axes[2].legend(ncol=8, fontsize=7, loc="upper left")
    axes[2].set_xlabel("time (s)")
    axes[0].set_title("IAC log B, validation part: measured, 1 s open loop from the EKF estimates, Deep Dynamics' "
                      "coefficients")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    """Train the Deep Dynamics model on the EKF's estimates, score it and the constant rows, print and write."""
    d = DeepDynamicsSettings()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog="Further arguments are torch-ude "
                                 "overrides of the config, e.g. --data.problem.recording.init_args.part '[0, 0.1]'.")
    add_split_arguments(ap)
    ap.add_argument("--history", type=int, default=d.history, help="rows of (state, input) the network sees")
    ap.add_argument("--gru-width", type=int, default=d.gru_width)
    ap.add_argument("--gru-layers", type=int, default=d.gru_layers)
    ap.add_argument("--dense-width", type=int, default=d.dense_width)
    ap.add_argument("--dense-layers", type=int, default=d.dense_layers)
    ap.add_argument("--epochs", type=int, default=d.epochs)
    ap.add_argument("--batch-size", type=int, default=d.batch_size)
    ap.add_argument("--lr", type=float, default=d.lr)
    ap.add_argument("--state-weights", type=float, nargs="+", default=list(d.state_weights),
                    help="loss weight of each state's squared one-step error (vx, vy, omega)")
    ap.add_argument("--holdout", type=float, default=d.holdout, help="fraction held out to pick the kept epoch")
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads for the training")
    ap.add_argument("--rollout-s", type=float, default=1.0, help="length of the open-loop predictions (s)")
    ap.add_argument("--log-every", type=int, default=20, help="epochs between progress lines")
    ap.add_argument("--out", type=Path, default=Path("results/mhe_iac"))
    args, overrides = ap.parse_known_args(argv)
    settings = DeepDynamicsSettings(args.history, args.gru_width, args.gru_layers, args.dense_width, args.dense_layers,
                                    args.epochs, args.batch_size, args.lr, args.state_weights, args.holdout, args.seed)
    torch.set_num_threads(args.threads)
    exp = load_experiment(args.config, overrides)
    problem, build = exp.problem, Path(exp.solver.build_dir)
    val_source = validation_source(problem, args.validation_part)
    start = problem.start_values()
    parts = {"train": problem, "validation": with_values(problem, val_source, start, None)}
    steps = round(args.rollout_s / problem.recording.dt)
    h = settings.history

    # the row: EKF on the training part, then Deep Dynamics on its estimates
    row = ekf_deep_dynamics(problem, settings, build / "deep_dynamics" / "ekf_train", args.log_every)
    model, fit, training_s = row.model, row.fit, row.wall_s
    filtered, x_hat, last = {"train": row.ekf}, {"train": torch.as_tensor(row.ekf.states)}, {"train": row.last}

    x_hat["validation"] = torch.as_tensor(run_ekf(parts["validation"], build / "deep_dynamics" / "ekf_val").states)
    val_rec = parts["validation"].recording
    last["validation"] = usable_samples(len(val_rec.outputs), h, 1, val_rec.breaks)
    windows = parts["validation"].windows
    first = windows.start + windows.horizon - 1  # benchmarks.mhe.iac's rollout samples (x^_{N-1})
    ok = usable_samples(len(val_rec.outputs), h, steps, val_rec.breaks)
    first = first[torch.isin(first, ok)]

    with torch.no_grad():
        theta = {p: model.coefficients(history_rows(x_hat[p].float(), parts[p].recording.inputs.float(), last[p], h))
                 for p in parts}
    mean_values = clip_inside({**start, **{n: float(v) for n, v in zip(model.names, theta["train"].double().mean(0))}},
                              problem.physics.params.bounds)
    print(f"{ROW}: trained in {training_s:.1f} s (EKF {filtered['train'].wall_s:.1f} s, network {fit.wall_s:.1f} s, "
          f"kept epoch {fit.best_epoch})", flush=True)
    constant = {"start": {"values": start},
                "EKF->PEM": iac_ekf_pem_row(problem, build / "deep_dynamics" / "ekf_pem", filtered["train"]),
                "Deep Dynamics mean coefficients": {"values": mean_values}}

    rows_out: dict[str, dict] = {ROW: {"training_s": training_s, "ekf_s": filtered["train"].wall_s,
                                       "network_s": fit.wall_s, "best_epoch": fit.best_epoch,
                                       "samples": list(fit.samples),
                                       "coefficients": {p: coefficient_summary(model.names, theta[p]) for p in parts}}}
    curves = {}
    for p, prob in parts.items():
        with torch.no_grad():
            nxt = model(history_rows(x_hat[p].float(), prob.recording.inputs.float(), last[p], h))
        rows_out[ROW][p] = next_state_errors(nxt, prob.recording, prob.measured, x_hat[p], last[p])
    u_val = val_rec.inputs.float()
    with torch.no_grad():
        future = u_val[first[:, None] + torch.arange(1, steps)[None, :]]
        pred = rollout(model, history_rows(x_hat["validation"].float(), u_val, first, h), future).double()
    pred = pred[:, :, list(problem.measured)]
    rows_out[ROW]["validation"]["multi_step"] = open_loop_error(pred, logged_after(val_rec.outputs, first, steps))
    curves[ROW] = (first, pred)

    for name, row in constant.items():
        out = {k: v for k, v in row.items() if k != "values"} | {"values": row["values"]}
        for p, prob in parts.items():
            on = with_values(problem, prob.source, row["values"], None)
            x = x_hat[p][last[p]]
            with torch.no_grad():
                nxt = on.model().step(x, on.recording.inputs[last[p]], torch.zeros_like(x))
            out[p] = next_state_errors(nxt, on.recording, on.measured, x_hat[p], last[p])
            if p == "validation":
                cpred = rollouts(on, x_hat[p][first], first, steps)
                out[p]["multi_step"] = open_loop_error(cpred, logged_after(on.recording.outputs, first, steps))
                curves[name] = (first, cpred)
        rows_out[name] = out

    args.out.mkdir(parents=True, exist_ok=True)
    table = {"config": args.config, "overrides": overrides, "validation_part": list(val_source.part),
             "settings": asdict(settings), "threads": args.threads, "coefficients": list(model.names),
             "state_estimate": "the EKF's filtered x^_{k|k} with the config's start model on each part",
             "one_step_error": "mean over samples k with a full history and the outputs (vx in m/s, omega in rad/s) "
                               "of r^2, r = C f_d(x^_k, u~_k; theta_k) - y~_{k+1}",
             "multi_step_error": f"mean over rollouts, {steps} steps and outputs of the squared error of the open-loop "
                                 "prediction from x^_k at benchmarks.mhe.iac's validation rollout samples with a full "
                                 "history, logged inputs",
             "paper": PAPER["ekf_pem_adaptive"], "rows": rows_out,
             "loss": {"train": fit.train_loss, "holdout": fit.holdout_loss}}
    (args.out / "deep_dynamics.json").write_text(json.dumps(table, indent=1) + "\n")
    torch.save(model.state_dict(), args.out / "deep_dynamics.pt")
    lo, hi = model.lower.double(), model.upper.double()
    t_val = (torch.arange(len(val_rec.outputs)) * val_rec.dt).numpy()
    plot(args.out / "deep_dynamics.png", t_val, val_rec.outputs.numpy(),
         {k: curves[k] for k in ("EKF->PEM", ROW)}, t_val[last["validation"].numpy()],
         ((theta["validation"].double() - lo) / (hi - lo)).numpy(), model.names)
    multi = {k: r["validation"]["multi_step"] for k, r in rows_out.items()}
    markdown_table(("method (x^ = EKF)", "one-step train", "one-step validation", "1 s open loop, validation",
                    "training time"),
                   [(k, f"{r['train']['mse']:.3g}", f"{r['validation']['mse']:.3g}",
                     f"{multi[k]['mse']:.3g} ({multi[k]['rmse_end'][0]:.3g} m/s, {multi[k]['rmse_end'][1]:.3g} rad/s)",
                     f"{r['training_s']:.1f} s" if "training_s" in r else "-") for k, r in rows_out.items()])
    print(f"written {args.out / 'deep_dynamics.json'}, {args.out / 'deep_dynamics.png'} and "
          f"{args.out / 'deep_dynamics.pt'}")


if __name__ == "__main__":
    torch.set_default_dtype(torch.float64)
    main()

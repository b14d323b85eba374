"""Table 2's Joint-MHE and SUBNET rows on the real IAC racecar, beside ``benchmarks.mhe.iac``'s rows.

Data, split and metrics are those of ``benchmarks.mhe.iac`` (``configs/mhe_iac_physics_gn.yaml``: the
first 70 % of the gated stretch of IAC log B trains, the rest (the last 30 %; ``--validation-part``) validates,
y = (vx, omega), vy unmeasured):

* ``joint_mhe`` (Kühl et al., 2011; `mhe.peers.joint.JointMHE`): the config's 16 parameters as constant
  states (random walk of ``--joint-random-walk-std``, bounded ``rho`` coordinates) of the config's MHE
  (N, Q, R, arrival-cost start of the physical states), slid over the training part
  ``--joint-stride`` samples at a time, ``--joint-passes`` times, from the config's start (the start
  of every row of Table 2). One run per ``--joint-parameter-std``; the smallest training one-step
  error is reported (the data alone), all are listed. Scored as ``benchmarks.mhe.iac`` scores its
  rows (`mhe.scoring.score_problem`, the config's arrival-cost start): one-step error on the training
  and validation windows, and the 1 s open loop from each validation window's ``x^_{N-1}``.
  Training time = the run's wall time (all window solves and the CasADi build).
* ``subnet`` (Beintema et al., 2023): deepSI's SUBNET (`mhe.peers.subnet.train_subnet`, latent
  dimension ``--subnet-nx``) on the training part, u = (delta, pedal), y = (vx, omega); one-step =
  ``h`` of the encoded state (outputs and inputs up to t - 1; `mhe.peers.subnet`'s definition)
  over every sample t >= max(na, nb); the 1 s open loop on validation from the encoded state at the
  same samples as the MHE rows' rollouts (the sample after each window's end: the encoder has seen
  the outputs up to the window's last sample, as ``x^_{N-1}`` has), ``h(f^k(x^_t))`` for 25 steps.
  Training time = the wall time of ``deepSI.fit``.

Prints the rows and writes ``baselines.json`` (rows of earlier runs of the other method are kept) and
``baselines_<method>.png`` (measured and 1 s open-loop predictions on the validation part) to ``--out``::

    python -m benchmarks.mhe.iac_baselines
    python -m benchmarks.mhe.iac_baselines --methods subnet
    python -m benchmarks.mhe.iac_baselines --joint-parameter-std 0.01 --joint-windows 50 --subnet-iterations 50 \\
        --out results/mhe_iac_short

Further arguments are ``torch-ude`` overrides of the config.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import torch

from benchmarks.common import IAC_PAPER as PAPER, add_split_arguments, markdown_table, plot_validation
from mhe import IdentificationProblem, JointMHE, JointSettings
from mhe.data.logs import IACRecording
from mhe.models.bounds import clip_inside
from mhe.peers.subnet import SubnetSettings, subnet_data, subnet_errors, subnet_rollouts, train_subnet
from mhe.problems.iac import validation_source
from mhe.scoring import open_loop_error, score_problem, with_values
from mhe.training import load_experiment

__all__ = ["METHODS", "joint_mhe", "subnet", "main"]

METHODS = ("joint_mhe", "subnet")
ONE_STEP = {"joint_mhe": "mean over windows and outputs (vx in m/s, omega in rad/s) of r^2, r = C x^_N - y~_N "
                         "(Eq. 9), x^_N from each window's MHE at the identified parameters (config's arrival cost)",
            "subnet": "mean over samples t >= max(na, nb) and outputs of (h(x^_t) - y_t)^2, x^_t the encoder's state "
                      "from u, y up to t - 1"}


def joint_mhe(problem: IdentificationProblem, val_source: IACRecording, settings: JointSettings, build: Path,
              starts: int, steps: int) -> tuple[dict, dict]:
    """One Joint-MHE run over the training part from the config's start, scored as `benchmarks.mhe.iac` scores
    (`mhe.scoring.score_problem`).

    Returns:
        The row (settings, identified values, one-step train and validation with the ``steps``-step open
        loop, training time, counts) and the validation rollouts for the plot.
    """
    res = JointMHE(problem, settings, build / "joint").run()
    values = clip_inside({**problem.start_values(), **res.values}, problem.physics.params.bounds)
    arrival = (list(problem.arrival.mean), list(problem.arrival.std))
    train_row, _ = score_problem(with_values(problem, problem.source, values, arrival), build / "train", starts)
    val_row, curve = score_problem(with_values(problem, val_source, values, arrival), build / "validation", starts,
                                   steps)
    return {"settings": dataclasses.asdict(settings), "values": values, "train": train_row, "validation": val_row,
            "training_s": res.wall_s, "window_solves": res.windows, "failed": res.failed}, curve


def subnet(problem: IdentificationProblem, val_source: IACRecording, settings: SubnetSettings,
           steps: int) -> tuple[dict, dict]:
    """SUBNET trained on the training part; one-step errors and the ``steps``-step open loop on validation.

    The open loop starts at the samples of the MHE rows' rollouts: each validation window's end + 1
    (window start ``s``, horizon N: samples ``s + N .. s + N + steps - 1``), where the record allows.

    Returns:
        The row and the validation rollouts for the plot (``first`` sample, ``pred`` (M, steps, n_y)).
    """
    val_problem = problem.replace(recording=val_source)
    train_data = subnet_data(problem.recording, "IAC training part")
    val_data = subnet_data(val_problem.recording, "IAC validation part")
    model, info = train_subnet(train_data, settings)
    rows = {label: subnet_errors(model, data, settings.horizon)
            for label, data in (("train", train_data), ("validation", val_data))}
    windows = val_problem.windows
    first, pred, meas = subnet_rollouts(model, val_data, windows.start + windows.horizon, steps)
    multi = open_loop_error(torch.as_tensor(pred, dtype=torch.float64), torch.as_tensor(meas, dtype=torch.float64))
    row = {"settings": dataclasses.asdict(settings), "training": info, "training_s": info["seconds"],
           "train": {"mse": rows["train"]["one_step"]["mse"], **rows["train"]},
           "validation": {"mse": rows["validation"]["one_step"]["mse"], **rows["validation"], "multi_step": multi}}
    return row, {"first": first, "pred": torch.as_tensor(pred, dtype=torch.float64)}


def main(argv: list[str] | None = None) -> dict:
    """Run the ``--methods``, print their rows, write ``baselines.json`` and the plots; returns the JSON dict."""
    d = SubnetSettings()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog="Further arguments are torch-ude "
                                 "overrides of the config.")
    add_split_arguments(ap)
    ap.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS), help="baselines to run")
    ap.add_argument("--starts", type=int, default=3, help="cold starts per window of the MHE evaluation")
    ap.add_argument("--rollout-s", type=float, default=1.0, help="length of the open-loop predictions (s)")
    ap.add_argument("--joint-parameter-std", type=float, nargs="+", default=[0.1, 0.01, 0.001],
                    help="Joint-MHE: prior std of the parameter states (rho units), one run each")
    ap.add_argument("--joint-random-walk-std", type=float, default=1e-3,
                    help="Joint-MHE: random-walk std of the parameter states (rho units per second)")
    ap.add_argument("--joint-stride", type=int, default=2, help="Joint-MHE: samples between window starts")
    ap.add_argument("--joint-passes", type=int, default=1, help="Joint-MHE: passes over the training part")
    ap.add_argument("--joint-windows", type=int, default=None, help="Joint-MHE: slide over the first this many "
                    "windows only (default: all)")
    ap.add_argument("--subnet-nx", type=int, default=d.nx, help="SUBNET: latent state dimension")
    ap.add_argument("--subnet-na", type=int, default=d.na, help="SUBNET: past outputs the encoder reads")
    ap.add_argument("--subnet-nb", type=int, default=d.nb, help="SUBNET: past inputs the encoder reads")
    ap.add_argument("--subnet-T", type=int, default=25, help="SUBNET: steps of the multiple-shooting loss (25 = 1 s)")
    ap.add_argument("--subnet-batch-size", type=int, default=d.batch_size)
    ap.add_argument("--subnet-iterations", type=int, default=d.iterations, help="SUBNET: Adam steps")
    ap.add_argument("--subnet-val-freq", type=int, default=d.val_freq)
    ap.add_argument("--seed", type=int, default=d.seed, help="SUBNET: torch seed of the initialization")
    ap.add_argument("--out", type=Path, default=Path("results/mhe_iac"))
    args, overrides = ap.parse_known_args(argv)
    exp = load_experiment(args.config, overrides)
    problem, build = exp.problem, Path(exp.solver.build_dir) / "baselines"
    val_source = validation_source(problem, args.validation_part)
    steps = round(args.rollout_s / problem.recording.dt)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "baselines.json"
    table = json.loads(path.read_text()) if path.is_file() else {"rows": {}}
    table.update({"config": args.config, "overrides": overrides, "validation_part": list(val_source.part),
                  "one_step_error": ONE_STEP, "paper": {k: PAPER[k] for k in METHODS},
                  "multi_step_error": f"mean over rollouts, {steps} steps and outputs of the squared error of the "
                                      "open-loop prediction with the logged inputs"})
    curves = {}
    if "joint_mhe" in args.methods:
        runs = []
        for std in args.joint_parameter_std:
            settings = JointSettings(parameter_std=std, random_walk_std=args.joint_random_walk_std,
                                     stride=args.joint_stride, passes=args.joint_passes, windows=args.joint_windows)
            run, curve = joint_mhe(problem, val_source, settings, build / f"{std:g}", args.starts, steps)
            runs.append((run, curve))
            print(f"Joint-MHE, parameter std {std:g}: one-step train {run['train']['mse']:.3e}, validation "
                  f"{run['validation']['mse']:.3e}, 1 s open loop {run['validation']['multi_step']['mse']:.3e}, "
                  f"{run['training_s']:.1f} s, {run['failed']} of {run['window_solves']} solves failed", flush=True)
        best = min(range(len(runs)), key=lambda i: runs[i][0]["train"]["mse"])
        table["rows"]["Joint-MHE"] = {**runs[best][0], "chosen": best, "selection": "smallest training one-step "
                                      "error over parameter_std", "all": [r for r, _ in runs],
                                      "all_training_s": sum(r["training_s"] for r, _ in runs)}
        curves["Joint-MHE"] = runs[best][1]
    if "subnet" in args.methods:
        settings = SubnetSettings(nx=args.subnet_nx, na=args.subnet_na, nb=args.subnet_nb, T=args.subnet_T,
                                  batch_size=args.subnet_batch_size, iterations=args.subnet_iterations,
                                  val_freq=args.subnet_val_freq, horizon=steps, seed=args.seed)
        row, curves["SUBNET"] = subnet(problem, val_source, settings, steps)
        table["rows"]["SUBNET"] = {**row, "torch_threads": torch.get_num_threads()}
    path.write_text(json.dumps(table, indent=1) + "\n")
    rec = val_source.record()
    t = (torch.arange(len(rec.outputs)) * rec.dt).numpy()
    for name, curve in curves.items():
        plot_validation(args.out / f"baselines_{name.lower().replace('-', '_')}.png", t, rec.outputs.numpy(),
                        {name: curve})
    multi = {name: r["validation"]["multi_step"] for name, r in table["rows"].items()}
    markdown_table(("method", "one-step train", "one-step validation",
                    "1 s open loop, validation (RMSE vx, omega at 1 s)", "training time"),
                   [(name, f"{r['train']['mse']:.3g}", f"{r['validation']['mse']:.3g}",
                     f"{multi[name]['mse']:.3g} ({multi[name]['rmse_end'][0]:.3g} m/s, "
                     f"{multi[name]['rmse_end'][1]:.3g} rad/s)", f"{r['training_s']:.1f} s")
                    for name, r in table["rows"].items()])
    print(f"written {path}")
    return table


if __name__ == "__main__":
    torch.set_default_dtype(torch.float64)
    main()

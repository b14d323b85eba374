"""How the solver baseline was tuned: the chosen settings switched on one at a time.

Single pendulum, Case A, K = 40, 128 windows, 1200 full-batch Adam iterations, the
same streams and initial weights as jet matching. The first row is a plain
configuration (constant learning rate 1e-3, torch's Adam moments, the shooting
states held at the noisy observations, the unweighted mean squared error); each
following row adds one setting of ``configs/baseline_pendulum_case_a.yaml``, and the
last row is that config.

    python -m benchmarks.baseline.tuning [--seeds 0 1 2] [--noise 0.01]

Writes ``results/baseline_tuning/baseline_tuning.json``.
"""
from __future__ import annotations

import argparse

from benchmarks.common import BASELINE_CONFIGS, RESULTS, baseline_run, save, summarize
from torch_ude.cli import fit_config

STEPS = [
    ("plain: lr 1e-3 constant, betas (0.9, 0.999), states fixed, plain MSE",
     ["--model.lr", "0.001", "--model.lr_final", "null", "--model.betas", "[0.9, 0.999]",
      "--model.fit_states", "false", "--model.normalize", "false"]),
    ("+ error weighted by 1 / x_rms^2", ["--model.normalize", "true"]),
    ("+ shooting states estimated", ["--model.fit_states", "true"]),
    ("+ lr 4e-2 with cosine decay to 1e-3", ["--model.lr", "0.04", "--model.lr_final", "0.001"]),
    ("+ Adam betas (0.9, 0.99) (= the config)", ["--model.betas", "[0.9, 0.99]"]),
    ("+ AdamW weight decay 1.0", ["--model.weight_decay", "1.0"]),
    ("+ AdamW weight decay 0.1 instead (jet matching's v2 setting)", ["--model.weight_decay", "0.1"]),
]
NAME = "baseline_tuning"
CONFIG_ROW = 4  # the row that equals configs/baseline_pendulum_case_a.yaml: its runs are the shared ones


def main(argv: list[str] | None = None) -> None:
    """Run the cumulative tuning steps, print the table and save the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--noise", type=float, default=0.01)
    ap.add_argument("--steps", type=int, nargs="+", default=list(range(len(STEPS))),
                    help="which rows to run (the overrides of earlier rows still apply)")
    args = ap.parse_args(argv)
    overrides: list[str] = ["--data.noise", str(args.noise)]
    table = []
    for i, (name, extra) in enumerate(STEPS):
        overrides = overrides + extra
        if i not in args.steps:
            continue
        runs = []
        for seed in args.seeds:
            if i == CONFIG_ROW:
                m = baseline_run(40, args.noise, seed)
            else:
                m = fit_config(BASELINE_CONFIGS["single"], RESULTS / NAME / f"step{i}_{args.noise}_{seed}", seed,
                               overrides, reuse=True)
            runs.append(m)
            print(f"[{i}] {name} seed={seed}: e_field_visited={m['e_field_visited']:.5f} "
                  f"e_field={m['e_field']:.5f} c_hat={m['c_hat']:.4f}", flush=True)
        table.append({"step": i, "name": name, "overrides": list(overrides),
                      "per_seed": [r["e_field_visited"] for r in runs],
                      **{k: summarize([r[k] for r in runs]) for k in ("e_field", "e_field_visited", "c_hat")}})
    for row in table:
        print(f"[{row['step']}] {row['name']}: e_field_visited {row['e_field_visited']['mean']:.5f} "
              f"+- {row['e_field_visited']['std']:.5f}, e_field {row['e_field']['mean']:.5f}, "
              f"c_hat {row['c_hat']['mean']:.4f}")
    folder = save(NAME, {"command": "python -m benchmarks.baseline.tuning", "seeds": args.seeds,
                         "noise": args.noise, "table": table})
    print(f"wrote {folder / (NAME + '.json')}")


if __name__ == "__main__":
    main()

"""Choose a gray-box residual's form on the training part only: how well does it predict the physics' misfit?

Before an expensive PEM-MHE run (about 15 min on 2 cores), a residual's form (width, input history,
the state channels it drives) can be checked on the logged states of the training part, which the IAC
log holds in full (vy too; PEM-MHE itself sees only vx and omega). The targets are the one-step residuals
of the physics at the config's start values, ``(x_{k+1} - f_d(x_k, u~_k)) / h``
(`mhe.peers.state_pem.state_residuals`, dx/dt units); the config's own `mhe.models.model.NeuralResidual`
(its width, scales, input history and outputs, zero last layer, the hidden layers seeded per seed) is
fitted by full-batch Adam to the rows of the first ``--fraction`` of the training part and scored on the
rest: per driven state channel, ``R^2 = 1 - mean((N - target)^2) / var(target)`` on the held-out rows
(`mhe.peers.state_pem.fit_residual_on_states`).
The validation part is never read. For the gray-box configs the start values are the physics-only
PEM-MHE result, so the targets are what that fit leaves::

    python -m benchmarks.mhe.iac_residual_check     # configs/mhe_iac_gray.yaml + its variant small.yaml
    python -m benchmarks.mhe.iac_residual_check --data.problem.residual.input_lags 2

Further arguments are ``torch-ude`` overrides of the config. Prints one line per seed and writes the
numbers to ``--out`` (JSON).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from mhe.peers.state_pem import fit_residual_on_states
from mhe.training import load_experiment

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    """Run the check for each seed, print it and write ``--out``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 epilog="Further arguments are torch-ude overrides of the config.")
    ap.add_argument("--config", nargs="+",
                    default=["configs/mhe_iac_gray.yaml", "configs/mhe_iac_gray_variants/small.yaml"],
                    help="a gray-box PEM-MHE config, optionally followed by variants layered on it")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--fraction", type=float, default=0.7, help="share of the training part's rows that fit")
    ap.add_argument("--steps", type=int, default=1500, help="full-batch Adam steps")
    ap.add_argument("--out", type=Path, default=Path("results/mhe_iac/residual_check.json"))
    args, overrides = ap.parse_known_args(argv)
    problem = load_experiment(args.config, overrides).problem
    names = problem.physics.state_names
    runs = []
    for seed in args.seeds:
        runs.append(fit_residual_on_states(problem, seed, args.fraction, args.steps))
        r = runs[-1]
        print(f"seed {seed}: R^2 " + ", ".join(f"{names[c]} {a:.3f} / held out {b:.3f}" for c, a, b in
                                               zip(r["channels"], r["train_r2"], r["held_out_r2"]))
              + f" ({r['fit_rows']} rows fit, {r['held_out_rows']} held out, {r['wall_s']:.1f} s)", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"config": args.config, "overrides": overrides, "fraction": args.fraction,
                                    "steps": args.steps, "runs": runs}, indent=1) + "\n")
    print(f"written {args.out}")


if __name__ == "__main__":
    torch.set_default_dtype(torch.float64)
    main()

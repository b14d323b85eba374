"""What the input hold costs: zero-order, first-order and midpoint hold on a linear oscillator at 9 samples per period
(issue 33).

The plant is `mhe.problems.oscillator.OscillatorSimulation`: ``p'' + 2 zeta omega p' + omega^2 p = g u(t)``
driven by an analogue multisine (a function of continuous time, recorded at the samples), 9 samples
per natural period, the position measured with Gaussian noise of ``--noise`` (no process noise). The
multisine's tones reach ``--max-hz`` times the natural frequency (default 0.5: at least 18 samples per
period of the input, so linear interpolation follows it; at 1.5 its fastest tone has 6 samples per
period and a first-order hold's own interpolation error shows).
For each hold (`mhe.models.hold`) the same `LinearOscillator` model, started 10 % off in ``omega`` and
``gain`` and at ``zeta`` 0.08 (truth 0.05, `mhe.problems.oscillator.oscillator_problem`), is identified by
Gauss-Newton PEM-MHE, then refined on the free-run error (`mhe.outer.free_run.refine_output_error`). For both it
reports (`mhe.pem.compare_refinement`)

* ``free_run_rmse``: the free-run RMSE against the measured position (initial state estimated);
* ``free_run_rmse_clean``: the same free run against the plant's noise-free position (the model's
  own error, without the noise);
* the relative errors of ``omega``, ``zeta`` and ``gain``;

and the noise floor: the noise's standard deviation and the RMSE of the noise itself. The issue's
target: with the first-order hold the free-run RMSE within 10 % of the noise floor, the zero-order
hold's error removed.

    python -m benchmarks.mhe.oscillator_hold          # seeds 0 1 2; results/mhe_oscillator_hold/results.json
    python -m benchmarks.mhe.oscillator_hold --max-hz 1.5    # a faster input
    python -m benchmarks.mhe.oscillator_hold --seeds 0 --steps 400 --max-steps 3
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from mhe import OuterSettings, PEMIdentifier, SolverSettings
from mhe.models.hold import HOLDS
from mhe.pem import compare_refinement
from mhe.problems.oscillator import OscillatorSimulation, oscillator_problem

__all__ = ["run_hold", "main"]


def run_hold(hold: str, steps: int, noise: float, seed: int, max_hz: float, max_steps: int, build: str) -> dict:
    """Gauss-Newton PEM-MHE with input hold ``hold``, then the free-run refinement; both models scored by free run
    (`mhe.pem.compare_refinement`, against the plant's noise-free position)."""
    prob = oscillator_problem(hold, steps, noise, seed, max_hz)
    outer = OuterSettings(optimizer="gauss_newton")
    with PEMIdentifier(prob, max_steps, outer, SolverSettings(build_dir=build)) as pem:
        return compare_refinement(pem, prob.logged.states[:, :1])


def main(argv: list[str] | None = None) -> dict:
    """Run every hold on every seed, print one line per run and write ``results.json``.

    Raises:
        ValueError: for ``--steps`` below 100, a non-positive ``--noise`` or ``--max-hz``, or ``--max-steps`` < 1.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=2000, help="samples of each recording (default 2000)")
    parser.add_argument("--noise", type=float, default=0.01, help="position noise std (default 0.01)")
    parser.add_argument("--max-hz", type=float, default=0.5,
                        help="the input's highest frequency / the natural frequency (default 0.5)")
    parser.add_argument("--max-steps", type=int, default=20, help="Gauss-Newton iterations at most (default 20)")
    parser.add_argument("--out", default="results/mhe_oscillator_hold")
    parser.add_argument("--build", default="build/l4casadi/mhe_oscillator_hold")
    args = parser.parse_args(argv)
    for name, ok, need in (("--steps", args.steps >= 100, ">= 100 (windows of 15 samples)"),
                           ("--noise", args.noise > 0, "> 0"), ("--max-hz", args.max_hz > 0, "> 0"),
                           ("--max-steps", args.max_steps >= 1, ">= 1")):
        if not ok:
            raise ValueError(f"{name} must be {need}; got {getattr(args, name[2:].replace('-', '_'))}.")
    rows = []
    for seed in args.seeds:
        rec = OscillatorSimulation(steps=args.steps, noise=args.noise, seed=seed, max_hz=args.max_hz).record()
        floor = float((rec.outputs - rec.states[:, :1]).pow(2).mean().sqrt())
        for hold in HOLDS:
            row = {"seed": seed, "hold": hold, "noise_std": args.noise, "noise_rmse": floor,
                   **run_hold(hold, args.steps, args.noise, seed, args.max_hz, args.max_steps, args.build)}
            rows.append(row)
            a, b = row["pem_mhe"], row["refined"]
            print(f"seed {seed} {hold:>8}: free-run RMSE  PEM-MHE {a['free_run_rmse']:.5f}  refined "
                  f"{b['free_run_rmse']:.5f}  (noise std {args.noise:.5f}, noise RMSE {floor:.5f}); against the clean "
                  f"position {a['free_run_rmse_clean']:.5f} vs {b['free_run_rmse_clean']:.5f}; rel. errors PEM-MHE "
                  + ", ".join(f"{k} {100 * v:.2f} %" for k, v in a["rel_errors"].items()), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {"settings": vars(args), "rows": rows,
              "foh_within_10_percent_of_noise_std": [r["pem_mhe"]["free_run_rmse"] <= 1.1 * r["noise_std"]
                                                     for r in rows if r["hold"] == "foh"]}
    (out / "results.json").write_text(json.dumps(report, indent=2))
    print(f"wrote {out / 'results.json'}")
    return report


if __name__ == "__main__":
    main()

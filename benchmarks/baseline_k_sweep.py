"""Solver baseline versus the shooting window length K (and the observation rate).

Single pendulum, Case A, 60 s stream, 128 windows, 1200 iterations; for every
observation rate, K, noise level and seed one ``torch-ude fit`` of
``configs/baseline_pendulum_case_a.yaml``. Reports e_field (grid and visited
states), c_hat and the tape bytes per K (Figure 3 B/C and Figure 13 of the
jet-matching paper).

    python -m benchmarks.baseline_k_sweep [--steps 1 3 5 10 20 40 80] [--levels 0.01 0.05] [--seeds 0 1 2]
        [--rates 50] [--reuse]

Writes ``results/baseline_k_sweep/baseline_k_sweep.json`` and ``baseline_k_sweep.png``.
"""
from __future__ import annotations

import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from benchmarks.jet_runs import RESULTS, fit, save, summarize  # noqa: E402

CONFIG = "configs/baseline_pendulum_case_a.yaml"
NAME = "baseline_k_sweep"


def run(rate: float, steps: int, level: float, seed: int, reuse: bool) -> dict:
    """One run's metrics (from disk with ``reuse`` when present)."""
    root = RESULTS / NAME / f"r{rate:g}_K{steps}_{level}_{seed}"
    done = root / "metrics.json"
    if reuse and done.is_file():
        m = json.loads(done.read_text())
    else:
        m = fit(CONFIG, root, seed, ["--data.noise", str(level), "--data.steps", str(steps), "--data.rate", str(rate)])
    print(f"rate={rate:g} K={steps} noise={level:.3f} seed={seed}: e_field_visited={m['e_field_visited']:.5f} "
          f"e_field={m['e_field']:.5f} c_hat={m['c_hat']:.4f} tape={m['tape_bytes'] / 1e6:.2f} MB "
          f"wall={m['wall_s']:.0f}s", flush=True)
    return {k: m[k] for k in ("e_field", "e_field_visited", "c_hat", "tape_bytes", "wall_s", "skipped_steps")} | {
        "rate": rate, "K": steps, "noise": level, "seed": seed}


def main() -> None:
    """Run (or collect) the sweep, save JSON and the plot."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, nargs="+", default=[1, 3, 5, 10, 20, 40, 80])
    ap.add_argument("--levels", type=float, nargs="+", default=[0.01, 0.05])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--rates", type=float, nargs="+", default=[50.0])
    ap.add_argument("--reuse", action="store_true", help="keep runs whose metrics.json exists")
    args = ap.parse_args()
    runs = [run(rate, k, level, seed, args.reuse) for rate in args.rates for level in args.levels
            for k in args.steps for seed in args.seeds]
    summary = {}
    for rate in args.rates:
        for level in args.levels:
            for k in args.steps:
                rs = [r for r in runs if (r["rate"], r["noise"], r["K"]) == (rate, level, k)]
                summary[f"rate={rate:g} noise={level} K={k}"] = {
                    **{key: summarize([r[key] for r in rs]) for key in ("e_field", "e_field_visited", "c_hat")},
                    "tape_bytes": rs[0]["tape_bytes"]}
    folder = save(NAME, {"command": "python -m benchmarks.baseline_k_sweep", "steps": args.steps,
                         "levels": args.levels, "seeds": args.seeds, "rates": args.rates,
                         "runs": runs, "summary": summary})
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for rate in args.rates:
        for level in args.levels:
            rows = [summary[f"rate={rate:g} noise={level} K={k}"] for k in args.steps]
            axes[0].errorbar(args.steps, [r["e_field_visited"]["mean"] for r in rows],
                             yerr=[r["e_field_visited"]["std"] for r in rows], marker="o", capsize=3,
                             label=f"{100 * level:g} % noise, {rate:g} Hz")
    rows = [summary[f"rate={args.rates[0]:g} noise={args.levels[0]} K={k}"] for k in args.steps]
    axes[1].plot(args.steps, [r["tape_bytes"] / 1e6 for r in rows], "o-")
    axes[0].set(xscale="log", yscale="log", xlabel="K (RK4 steps per window)", ylabel="e_field (visited states)")
    axes[1].set(xscale="log", yscale="log", xlabel="K (RK4 steps per window)", ylabel="tape (MB)")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(folder / f"{NAME}.png", dpi=120)
    print(f"wrote {folder / (NAME + '.json')} and {folder / (NAME + '.png')}")


if __name__ == "__main__":
    main()

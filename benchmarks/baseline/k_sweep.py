"""Solver baseline versus the shooting window length K (and the observation rate).

Single pendulum, Case A, 60 s stream, 128 windows, 1200 iterations; for every
observation rate, K, noise level and seed one ``torch-ude fit`` of
``configs/baseline_pendulum_case_a.yaml``. Reports e_field (grid and visited
states), c_hat and the tape bytes per K (Figure 3 B/C and Figure 13 of the
jet-matching paper).

    python -m benchmarks.baseline.k_sweep [--steps 1 3 5 10 20 40 80] [--levels 0.01 0.05] [--seeds 0 1 2]
        [--rates 50] [--fresh]

Runs finished earlier (here or by the comparison) are reused unless ``--fresh``.

Writes ``results/baseline_k_sweep/baseline_k_sweep.json`` and ``baseline_k_sweep.png``.
"""
from __future__ import annotations

import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from benchmarks.common import baseline_run, save, summarize  # noqa: E402

NAME = "baseline_k_sweep"


def main(argv: list[str] | None = None) -> None:
    """Run (or collect) the sweep, save JSON and the plot."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, nargs="+", default=[1, 3, 5, 10, 20, 40, 80])
    ap.add_argument("--levels", type=float, nargs="+", default=[0.01, 0.05])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--rates", type=float, nargs="+", default=[50.0])
    ap.add_argument("--fresh", action="store_true", help="train again even where a finished run exists")
    args = ap.parse_args(argv)
    runs = [baseline_run(k, level, seed, rate, reuse=not args.fresh) for rate in args.rates for level in args.levels
            for k in args.steps for seed in args.seeds]
    summary = {}
    for rate in args.rates:
        for level in args.levels:
            for k in args.steps:
                rs = [r for r in runs if (r["rate"], r["noise"], r["K"]) == (rate, level, k)]
                summary[f"rate={rate:g} noise={level} K={k}"] = {
                    **{key: summarize([r[key] for r in rs]) for key in ("e_field", "e_field_visited", "c_hat")},
                    "tape_bytes": rs[0]["tape_bytes"]}
    folder = save(NAME, {"command": "python -m benchmarks.baseline.k_sweep", "steps": args.steps,
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

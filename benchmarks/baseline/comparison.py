"""Matched comparison: jet matching v2 against the solver baseline (K = 40 and K = 80).

Jet matching twice: our v2 (``configs/pendulum_case_a.yaml``) and the paper's v2 (the
same without our weight decay). Single pendulum, Case A, 60 s stream; for every noise
level and seed all trainers see the identical stream and start from the identical initial weights
(``torch-ude fit`` with the same ``--seed_everything`` and ``--data.noise``). Per
level: mean e_field (grid and visited states), the ratio jet / baseline of the
means, c_hat, wall time and the baseline's tape; over levels the geometric mean of
the ratios (Section 5.1, Table 2 of the jet-matching paper).

    python -m benchmarks.baseline.comparison [--seeds 0 1 2] [--levels 0 0.001 0.005 0.01 0.02 0.05]
        [--trainers ...] [--fresh]

Every run whose ``metrics.json`` already exists is reused unless ``--fresh`` (so the
grid can be filled by several processes with different ``--levels`` and summarized
at the end); the jet-matching runs are the noise sweep's (``benchmarks.jet.noise_sweep``,
same config, streams and seeds). ``baseline_K40_wd`` is the K = 40 baseline with jet
matching's noise-adaptive weight decay (``benchmarks.common.BASELINE_VARIANTS``), the fair
partner of our v2.
Writes ``results/baseline_comparison/baseline_comparison.json``.
"""
from __future__ import annotations

import argparse
from statistics import geometric_mean

from benchmarks.common import NOISE_VARIANTS, RESULTS, baseline_run, save, summarize
from torch_ude.cli import fit_config

TRAINERS = ("jet_v2", "jet_v2_paper", "baseline_K40", "baseline_K80", "baseline_K40_wd")
KEYS = ("e_field", "e_field_visited", "c_hat", "wall_s", "updates")
NAME = "baseline_comparison"


def jet_run(variant: str, level: float, seed: int, reuse: bool) -> dict:
    """One jet-matching run's metrics: the noise sweep's run of ``variant`` (trained here if missing)."""
    config, extra = NOISE_VARIANTS[variant]
    m = fit_config(config, RESULTS / "jet_noise_sweep" / f"{variant}_{level}_{seed}", seed,
                   ["--data.noise", str(level), *extra], reuse=reuse)
    print(f"jet {variant} noise={level:.3f} seed={seed}: e_field_visited={m['e_field_visited']:.5f} "
          f"e_field={m['e_field']:.5f} c_hat={m['c_hat']:.4f} wall={m['wall_s']:.0f}s", flush=True)
    return {k: m[k] for k in KEYS} | {"noise": level, "seed": seed}


def run(trainer: str, level: float, seed: int, reuse: bool) -> dict:
    """One run of ``trainer`` at ``level`` and ``seed``."""
    if trainer.startswith("jet_"):
        out = jet_run(trainer.removeprefix("jet_"), level, seed, reuse)
    else:
        steps, _, variant = trainer.removeprefix("baseline_K").partition("_")
        out = baseline_run(int(steps), level, seed, reuse=reuse, variant=variant)
    return out | {"trainer": trainer}


def main(argv: list[str] | None = None) -> None:
    """Run (or collect) the grid, print the table and save the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--levels", type=float, nargs="+", default=[0.0, 0.001, 0.005, 0.01, 0.02, 0.05])
    ap.add_argument("--trainers", nargs="+", default=list(TRAINERS), choices=TRAINERS)
    ap.add_argument("--fresh", action="store_true", help="train again even where a finished run exists")
    args = ap.parse_args(argv)
    runs = [run(t, level, seed, not args.fresh) for level in args.levels for seed in args.seeds
            for t in args.trainers]
    summary: dict = {}
    for level in args.levels:
        row = {}
        for t in args.trainers:
            rs = [r for r in runs if r["trainer"] == t and r["noise"] == level]
            row[t] = {k: summarize([r[k] for r in rs]) for k in ("e_field", "e_field_visited", "c_hat", "wall_s")}
            if "tape_bytes" in rs[0]:
                row[t]["tape_bytes"] = rs[0]["tape_bytes"]
        for base in (t for t in args.trainers if t.startswith("baseline")):
            for jet in (t for t in args.trainers if t.startswith("jet_")):
                for key in ("e_field", "e_field_visited"):
                    row[f"ratio_{key}_{jet}_vs_{base}"] = row[jet][key]["mean"] / row[base][key]["mean"]
        summary[str(level)] = row
    geo = {}
    for name in summary[str(args.levels[0])]:
        if name.startswith("ratio_") and all(name in summary[str(level)] for level in args.levels):
            geo[name] = geometric_mean([summary[str(level)][name] for level in args.levels])
    header = "noise  " + "  ".join(f"{t:>22s}" for t in args.trainers)
    print(header + "   (e_field_visited mean; c_hat mean)")
    for level in args.levels:
        row = summary[str(level)]
        cells = "  ".join(f"{row[t]['e_field_visited']['mean']:10.5f} c={row[t]['c_hat']['mean']:.3f}"
                          for t in args.trainers)
        print(f"{100 * level:4.1f}%  {cells}")
    for name, value in geo.items():
        print(f"geometric mean {name}: {value:.3f}")
    folder = save(NAME, {"command": "python -m benchmarks.baseline.comparison", "seeds": args.seeds,
                         "levels": args.levels, "runs": runs, "summary": summary, "geometric_mean": geo})
    print(f"wrote {folder / (NAME + '.json')}")


if __name__ == "__main__":
    main()

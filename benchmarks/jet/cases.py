"""UDE cases A, B, C at 1 % noise with recovered damping, and the double pendulum (Case A, 20 s).

    python -m benchmarks.jet.cases [--seeds 0 1 2] [--double-seeds 0 1 2 3]

Case B's known model already contains the damping, so its learned residual should show
c_hat ~ 0. Writes results/jet_cases/jet_cases.json.
"""
from __future__ import annotations

import argparse

from benchmarks.common import CASE_CONFIGS, RESULTS, save, summarize
from torch_ude.cli import fit_config


def main(argv: list[str] | None = None) -> None:
    """Run the cases and the double pendulum, save JSON."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--double-seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    ap.add_argument("--cases", nargs="+", default=list(CASE_CONFIGS))
    args = ap.parse_args(argv)
    rows, table = [], {}
    for case in args.cases:
        seeds = args.double_seeds if case.startswith("double") else args.seeds
        runs = []
        for seed in seeds:
            m = fit_config(CASE_CONFIGS[case], RESULTS / "jet_cases" / f"{case}_{seed}", seed)
            runs.append(m)
            rows.append({"case": case, "seed": seed, **{k: m[k] for k in ("e_field", "e_field_visited", "c_hat",
                                                                       "c_hat_channels", "m", "lambda2", "wall_s")}})
            print(f"{case} seed={seed}: e_field={m['e_field']:.5f} visited={m['e_field_visited']:.5f} "
                  f"c_hat={m['c_hat_channels']}", flush=True)
        table[case] = {k: summarize([r[k] for r in runs]) for k in ("e_field", "e_field_visited", "c_hat")}
    folder = save("jet_cases", {"runs": rows, "summary": table})
    print(f"saved {folder}")


if __name__ == "__main__":
    main()

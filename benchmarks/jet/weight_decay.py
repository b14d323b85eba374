"""Weight-decay tuning of jet matching across the UDE cases and the double pendulum.

For each case config (`benchmarks.common.CASE_CONFIGS`), decay W and seed, one
``torch-ude fit`` with ``--model.weight_decay W`` (the config's noise-adaptive rule then
scales W by ``min(1, (sigma_rel / 0.01)^2)``; pass ``--constant`` to switch that off with
``--model.weight_decay_full_at null``) at the given noise level. W = 0 is the paper's v2.

    python -m benchmarks.jet.weight_decay [--cases A B C double_A] [--decays 0 0.1 0.3 1]
        [--noise 0.01] [--seeds 0 1 2] [--double-seeds 0 1 2 3] [--constant]

Finished runs under ``results/jet_weight_decay/`` are reused. Writes
``results/jet_weight_decay_<rule>_n<noise>_<cases>/...json`` (one file per invocation).
"""
from __future__ import annotations

import argparse

from benchmarks.common import CASE_CONFIGS, RESULTS, save, summarize
from torch_ude.cli import fit_config

NAME = "jet_weight_decay"


def main(argv: list[str] | None = None) -> None:
    """Run (or collect) the grid and print mean e_field_visited per case and decay."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", nargs="+", default=list(CASE_CONFIGS), choices=list(CASE_CONFIGS))
    ap.add_argument("--decays", type=float, nargs="+", default=[0.0, 0.1, 0.3, 1.0])
    ap.add_argument("--noise", type=float, default=0.01)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--double-seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    ap.add_argument("--constant", action="store_true", help="constant decay (no noise-adaptive rule)")
    args = ap.parse_args(argv)
    rule = "const" if args.constant else "rule"
    table, rows = {}, []
    for case in args.cases:
        seeds = args.double_seeds if case.startswith("double") else args.seeds
        for decay in args.decays:
            runs = []
            for seed in seeds:
                root = RESULTS / NAME / f"{case}_wd{decay:g}_{rule}_n{args.noise:g}_{seed}"
                extra = ["--data.noise", str(args.noise), "--model.weight_decay", str(decay)]
                if args.constant:
                    extra += ["--model.weight_decay_full_at", "null"]
                m = fit_config(CASE_CONFIGS[case], root, seed, extra, reuse=True)
                runs.append(m)
                rows.append({"case": case, "decay": decay, "seed": seed, "noise": args.noise, "rule": rule,
                             **{k: m[k] for k in ("e_field", "e_field_visited", "c_hat")},
                             "decay_used": m.get("weight_decay", decay)})  # runs older than the key: constant W
                print(f"{case} W={decay:g} ({rule}) noise={args.noise:g} seed={seed}: "
                      f"e_field_visited={m['e_field_visited']:.5f} c_hat={m['c_hat']:.4f} "
                      f"decay used={rows[-1]['decay_used']:.4g}", flush=True)
            table[f"{case} W={decay:g}"] = {k: summarize([r[k] for r in runs])
                                            for k in ("e_field", "e_field_visited", "c_hat")}
    for key, row in table.items():
        print(f"{key}: e_field_visited {row['e_field_visited']['mean']:.5f} +- {row['e_field_visited']['std']:.5f}")
    tag = f"{NAME}_{rule}_n{args.noise:g}_{'-'.join(args.cases)}"
    folder = save(tag, {"command": "python -m benchmarks.jet.weight_decay", "args": vars(args), "runs": rows,
                        "summary": table})
    print(f"wrote {folder / (tag + '.json')}")


if __name__ == "__main__":
    main()

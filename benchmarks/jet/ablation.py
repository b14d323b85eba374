"""Ablation at 1 % noise (the paper's Table 4): mechanisms added one at a time to v1.

The last row adds our noise-adaptive weight decay to the paper's v2.

    python -m benchmarks.jet.ablation [--seeds 0 1 2]

Writes results/jet_ablation/jet_ablation.json and a bar plot.
"""
from __future__ import annotations

import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import yaml  # noqa: E402

from benchmarks.common import RESULTS, save, summarize  # noqa: E402
from torch_ude.cli import fit_config  # noqa: E402

V1 = "configs/pendulum_v1.yaml"
V2_MODEL = yaml.safe_load(open("configs/pendulum_case_a.yaml"))["model"]["init_args"]
V2_STREAM = V2_MODEL["stream"]
STEPS = [
    ("v1", []),
    ("+ full-rate phase sampling (s = 5)", ["--model.stream.stride", "5"]),
    ("+ reservoir B = 4096, minibatch 64, replay", ["--model.stream.buffer", "reservoir", "--model.stream.capacity",
                                                    "4096", "--model.batch_size", "64", "--model.replay", "true"]),
    ("+ cosine schedule and weight EMA", ["--model.schedule", "cosine", "--model.lr", str(V2_MODEL["lr"]),
                                          "--model.lr_min", str(V2_MODEL["lr_min"]),
                                          "--model.ema_decay", str(V2_MODEL["ema_decay"])]),
    # jsonargparse cannot set one field of a nested dataclass to null from the command line,
    # so the last two steps give the whole stream block (the v2 settings of pendulum_case_a.yaml)
    ("+ noise estimate, adaptive m, SNR gate of lambda2", ["--model.stream", json.dumps(
        {**V2_STREAM, "quality_gate": False})]),
    ("+ polynomial-misfit quality gate (= the paper's v2)", ["--model.stream", json.dumps(V2_STREAM)]),
    ("+ noise-adaptive weight decay (ours; = our v2)", [
        "--model.weight_decay", str(V2_MODEL["weight_decay"]),
        "--model.weight_decay_full_at", str(V2_MODEL["weight_decay_full_at"])]),
]


def main(argv: list[str] | None = None) -> None:
    """Run the cumulative ablation and save JSON + PNG."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--noise", type=float, default=0.01)
    args = ap.parse_args(argv)
    overrides: list[str] = ["--data.noise", str(args.noise)]
    rows, table = [], []
    for i, (name, extra) in enumerate(STEPS):
        overrides = overrides + extra
        runs = []
        for seed in args.seeds:
            m = fit_config(V1, RESULTS / "jet_ablation" / f"step{i}_{seed}", seed, overrides)
            runs.append(m)
            rows.append({"step": i, "name": name, "seed": seed, "e_field": m["e_field"],
                         "e_field_visited": m["e_field_visited"], "c_hat": m["c_hat"], "m": m["m"]})
            print(f"[{i}] {name} seed={seed}: e_field_visited={m['e_field_visited']:.5f} c_hat={m['c_hat']:.4f}",
                  flush=True)
        table.append({"step": i, "name": name, "overrides": list(overrides),
                      **{k: summarize([r[k] for r in runs]) for k in ("e_field", "e_field_visited", "c_hat")}})
    folder = save("jet_ablation", {"runs": rows, "table": table, "seeds": args.seeds, "noise": args.noise})
    fig, ax = plt.subplots(figsize=(7, 3.8))
    means = [t["e_field_visited"]["mean"] for t in table]
    errs = [t["e_field_visited"]["std"] for t in table]
    ax.barh(range(len(table)), means, xerr=errs)
    ax.set_yticks(range(len(table)), [t["name"] for t in table], fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("e_field (visited states), mean +- std over seeds")
    fig.tight_layout()
    fig.savefig(folder / "jet_ablation.png", dpi=120)
    print(f"saved {folder}")


if __name__ == "__main__":
    main()

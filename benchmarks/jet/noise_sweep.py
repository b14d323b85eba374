"""Noise sweep: single pendulum Case A, 60 s stream, v2, the paper's v2 and v1, noise 0-5 %, 3 seeds.

v2 is ``configs/pendulum_case_a.yaml`` on its defaults (box-averaged taps since issue 31);
``v2_point`` the same with the paper's point taps (our v2 before issue 31); ``v2_paper`` that
without our weight decay (the paper's v2); v1 is ``configs/pendulum_v1.yaml`` (point taps).

    python -m benchmarks.jet.noise_sweep [--seeds 0 1 2] [--levels 0 0.001 ...] [--variants v2 v2_point v2_paper v1]

Writes results/jet_noise_sweep/jet_noise_sweep.json and a PNG of e_field and c_hat vs noise.
"""
from __future__ import annotations

import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from benchmarks.common import NOISE_VARIANTS, RESULTS, save, summarize  # noqa: E402
from torch_ude.cli import fit_config  # noqa: E402

KEYS = ("e_field", "e_field_visited", "c_hat", "m", "lambda2", "wall_s", "reject_rate")


def main(argv: list[str] | None = None) -> None:
    """Run the sweep and save JSON + PNG."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--levels", type=float, nargs="+", default=[0.0, 0.001, 0.005, 0.01, 0.02, 0.05])
    ap.add_argument("--variants", nargs="+", default=list(NOISE_VARIANTS))
    args = ap.parse_args(argv)
    rows, table = [], {}
    for variant in args.variants:
        for level in args.levels:
            runs = []
            for seed in args.seeds:
                config, extra = NOISE_VARIANTS[variant]
                m = fit_config(config, RESULTS / "jet_noise_sweep" / f"{variant}_{level}_{seed}", seed,
                               ["--data.noise", str(level), *extra])
                runs.append({k: m[k] for k in KEYS} | {"seed": seed})
                print(f"{variant} noise={level:.3f} seed={seed}: e_field_visited={m['e_field_visited']:.5f} "
                      f"e_field={m['e_field']:.5f} c_hat={m['c_hat']:.4f} m={m['m']}", flush=True)
            rows += [{"variant": variant, "noise": level, **r} for r in runs]
            table[f"{variant}@{level}"] = {k: summarize([r[k] for r in runs]) for k in
                                           ("e_field", "e_field_visited", "c_hat", "wall_s")}
    folder = save("jet_noise_sweep", {"runs": rows, "summary": table, "seeds": args.seeds})
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for variant in args.variants:
        lv = [lvl for lvl in args.levels]
        e = [table[f"{variant}@{lvl}"]["e_field_visited"]["mean"] for lvl in lv]
        c = [table[f"{variant}@{lvl}"]["c_hat"]["mean"] for lvl in lv]
        x = [100 * lvl for lvl in lv]
        axes[0].plot(x, e, "o-", label=variant)
        axes[1].plot(x, c, "o-", label=variant)
    axes[0].set(xlabel="noise [%]", ylabel="e_field (visited)", yscale="log", title="field error")
    axes[1].axhline(0.40, color="k", ls="--", lw=0.8)
    axes[1].set(xlabel="noise [%]", ylabel="c_hat", title="recovered damping (true 0.40)")
    for ax in axes:
        ax.legend()
    fig.tight_layout()
    fig.savefig(folder / "jet_noise_sweep.png", dpi=120)
    print(f"saved {folder}")


if __name__ == "__main__":
    main()

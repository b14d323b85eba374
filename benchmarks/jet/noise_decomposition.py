"""Where jet matching's field error comes from at high noise (issue 17), and what removes it.

Single pendulum, Case A, 60 s stream, our v2 (``configs/pendulum_case_a.yaml``). For each
noise level and seed the reference run is v2 itself; every other variant removes (or
shrinks) one source of error and keeps everything else:

* ``clean_same_m``: the SG truncation bias alone: the clean signal (noise 0) with the tap
  spacing ``m`` the reference chose at this level and seed, the same constant decay and
  ``lambda2`` as the reference (the noise estimate would otherwise set ``m = 1``, decay 0);
* ``clean_m1``: the same on the clean signal at ``m = 1`` (no truncation bias; the floor of
  the decay, the network and the optimizer);
* ``true_x``: errors-in-variables: the network and the known model are evaluated at the
  true state at the window centre (SG-smoothed clean signal, the same taps) while the
  targets ``xdot_hat, xddot_hat`` stay the noisy ones (`torch_ude.training.TrueStateModule`,
  a diagnostic, not a user setting);
* ``stream_2x``, ``stream_4x``: the variance: a 2x and 4x longer stream with a 2x and 4x
  larger reservoir (the same share of the stream's windows); ``stream_4x_same_B`` keeps B;
* ``updates_2x`` (16000 updates, the extra ones replay) and ``lr_min_low`` (final learning
  rate 5e-6 instead of 5e-5): the optimization noise;
* ``no_misfit_gate``, ``lambda2_on`` (the SNR gate off, ``lambda2 = 0.1`` always),
  ``lambda2_off``: the gates;
* ``no_decay`` (the paper's v2) and ``decay_1`` (W = 1): the weight decay.

``--table remedies`` runs the remedies of issue 17 instead (each switch of
`torch_ude.stream.StreamSettings` on its own and combined) at every noise level, and
compares them with the solver baseline's numbers of RESULTS.md (`BASELINE_K40_WD`,
`BASELINE_K40`; the baseline runs are deterministic for a seed and are not rerun).

    python -m benchmarks.jet.noise_decomposition [--table decomposition|remedies]
        [--case A|double_A] [--levels 0.01 0.02 0.05] [--seeds 0 1 2] [--variants ...]
        [--duration S] [--max-steps N]

Writes ``results/jet_noise_decomposition/<table>.json`` (other seeds: ``<table>_seeds_3_4_5.json``;
``--case double_A``: in the subfolder ``double_A/``, the double pendulum's v2 at its own stream
settings) and a PNG of e_field per variant.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics

import matplotlib
import numpy as np
import yaml

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from benchmarks.common import RESULTS, summarize  # noqa: E402
from torch_ude.cli import fit_config  # noqa: E402

__all__ = ["DECOMPOSITION", "REMEDIES", "variant_overrides", "main", "BASELINE_K40_WD", "BASELINE_K40"]

#: the v2 configs the tables run on (the comparison with the baseline is Case A's)
CONFIGS = {"A": "configs/pendulum_case_a.yaml", "double_A": "configs/double_pendulum_case_a.yaml"}
NAME = "jet_noise_decomposition"
_V2 = yaml.safe_load(open(CONFIGS["A"]))["model"]["init_args"]

#: mean e_field on the visited states of the K = 40 baseline with our decay (W = 0.1), seeds 0-2,
#: RESULTS.md "Both with the weight decay" (python -m benchmarks.baseline.comparison)
BASELINE_K40_WD = {0.0: 0.00177, 0.001: 0.00183, 0.005: 0.00206, 0.01: 0.00200, 0.02: 0.00216, 0.05: 0.00356}
#: the same for the unregularized K = 40 baseline (RESULTS.md, first table of the matched comparison)
BASELINE_K40 = {0.0: 0.00177, 0.001: 0.00190, 0.005: 0.00206, 0.01: 0.00251, 0.02: 0.00364, 0.05: 0.00923}


def _stream(block: dict, **changes) -> list[str]:
    """``--model.stream`` with the config's stream ``block`` and ``changes`` (jsonargparse sets a
    nested dataclass as a whole)."""
    return ["--model.stream", json.dumps({**block, **changes})]


def _ref_m(ref: dict, block: dict) -> int:
    return int(ref["m"])


def _ref_lambda2(ref: dict, block: dict) -> float:
    return float(ref["lambda2"])


def _capacity(times: int):
    def capacity(ref: dict, block: dict) -> int:
        return times * int(block["capacity"])
    return capacity


_CONSTANT_DECAY = ["--model.weight_decay", str(_V2["weight_decay"]), "--model.weight_decay_full_at", "null"]
_SAME_M = {"m": _ref_m, "snr_gate": False, "lambda2": _ref_lambda2}

#: name -> (noise override or None, extra CLI arguments, changes of the config's stream block; a
#: callable change is computed from the reference run's metrics.json and the config's block)
DECOMPOSITION: dict[str, tuple[float | None, list[str], dict]] = {
    "reference": (None, [], {}),
    "clean_same_m": (0.0, _CONSTANT_DECAY, _SAME_M),
    "clean_m1": (0.0, _CONSTANT_DECAY, {**_SAME_M, "m": 1}),
    "true_x": (None, ["--model.class_path", "torch_ude.training.TrueStateModule",
                      "--data.class_path", "torch_ude.training.TrueStateDataModule"], {}),
    "stream_2x": (None, ["--data.duration", "120"], {"capacity": _capacity(2)}),
    "stream_4x": (None, ["--data.duration", "240"], {"capacity": _capacity(4)}),
    "stream_4x_same_B": (None, ["--data.duration", "240"], {}),
    "updates_2x": (None, ["--trainer.max_steps", "16000"], {}),
    "lr_min_low": (None, ["--model.lr_min", "5e-6"], {}),
    "no_misfit_gate": (None, [], {"quality_gate": False}),
    "lambda2_on": (None, [], {"snr_gate": False}),
    "lambda2_off": (None, [], {"lambda2": 0.0}),
    "no_decay": (None, ["--model.weight_decay", "0"], {}),
    "decay_1": (None, ["--model.weight_decay", "1"], {}),
}

#: remedies of issue 17 (each a default-off switch of StreamSettings), alone and combined
REMEDIES: dict[str, tuple[float | None, list[str], dict]] = {
    "reference": (None, [], {}),
    "tap_average": (None, [], {"tap_average": True}),
    # sensitivity of the carried-over Eq. (24) constant (not a tuning: 0.117 is kept)
    "tap_average_dt_scale_0.09": (None, [], {"tap_average": True, "dt_scale": 0.09}),
    "tap_average_dt_scale_0.15": (None, [], {"tap_average": True, "dt_scale": 0.15}),
}

_TABLES = {"decomposition": DECOMPOSITION, "remedies": REMEDIES}


def variant_overrides(variant: tuple[float | None, list[str], dict], reference: dict, block: dict) -> list[str]:
    """The CLI arguments of a variant, with the reference run's values filled in.

    Args:
        variant: an entry of `DECOMPOSITION` or `REMEDIES`.
        reference: the reference run's ``metrics.json`` at the same level and seed.
        block: the config's stream settings (``model.init_args.stream``).

    Returns:
        The arguments for `torch_ude.cli.fit_config` (without the noise level).
    """
    _, extra, changes = variant
    resolved = {k: v(reference, block) if callable(v) else v for k, v in changes.items()}
    return [*extra, *(_stream(block, **resolved) if resolved else [])]


def main(argv: list[str] | None = None) -> None:
    """Run the table's variants, print a summary, save JSON + PNG."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--table", choices=list(_TABLES), default="decomposition")
    ap.add_argument("--case", choices=list(CONFIGS), default="A",
                    help="the v2 config (default: the single pendulum's Case A, the baseline comparison's)")
    ap.add_argument("--levels", type=float, nargs="+", default=None,
                    help="noise levels (default: 0.01 0.02 0.05; remedies: 0 0.001 0.005 0.01 0.02 0.05)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--variants", nargs="+", default=None, help="a subset of the table's variants")
    ap.add_argument("--fresh", action="store_true", help="train again where a finished run exists")
    ap.add_argument("--duration", type=float, default=None, help="stream length in s (default: the config's 60)")
    ap.add_argument("--max-steps", type=int, default=None, help="updates per run (default: the config's 8000)")
    args = ap.parse_args(argv)
    base = [*([] if args.duration is None else ["--data.duration", str(args.duration)]),
            *([] if args.max_steps is None else ["--trainer.max_steps", str(args.max_steps)])]
    # runs of other lengths get their own folder, so that they are never reused as the default's
    folder = RESULTS / NAME if not base else RESULTS / NAME / f"duration_{args.duration}_steps_{args.max_steps}"
    folder = folder if args.case == "A" else folder / args.case
    config = CONFIGS[args.case]
    block = yaml.safe_load(open(config))["model"]["init_args"]["stream"]
    # the held-out seeds get their own table file
    stem = args.table if args.seeds == [0, 1, 2] else f"{args.table}_seeds_{'_'.join(map(str, args.seeds))}"
    table = _TABLES[args.table]
    variants = args.variants or list(table)
    unknown = sorted(set(variants) - set(table))
    if unknown:
        raise SystemExit(f"unknown --variants {unknown} for --table {args.table}; choose from {sorted(table)}.")
    levels = args.levels or ([0.01, 0.02, 0.05] if args.table == "decomposition"
                             else [0.0, 0.001, 0.005, 0.01, 0.02, 0.05])
    runs = []
    for level in levels:
        for seed in args.seeds:
            ref = fit_config(config, folder / f"reference_{level}_{seed}", seed, ["--data.noise", str(level), *base],
                             reuse=not args.fresh)
            for variant in variants:
                noise = table[variant][0]
                m = ref if variant == "reference" else fit_config(
                    config, folder / f"{variant}_{level}_{seed}", seed,
                    ["--data.noise", str(level if noise is None else noise), *base,
                     *variant_overrides(table[variant], ref, block)],
                    reuse=not args.fresh)
                runs.append({"variant": variant, "noise": level, "seed": seed,
                             **{k: m[k] for k in ("e_field", "e_field_visited", "c_hat", "m", "lambda2", "wall_s")}})
                print(f"{variant} noise={level:.3f} seed={seed}: e_field_visited={m['e_field_visited']:.5f} "
                      f"c_hat={m['c_hat']:.4f} m={m['m']} lambda2={m['lambda2']}", flush=True)
    summary: dict = {}
    for level in levels:
        row = {}
        for variant in variants:
            rs = [r for r in runs if r["variant"] == variant and r["noise"] == level]
            row[variant] = {k: summarize([r[k] for r in rs]) for k in ("e_field", "e_field_visited", "c_hat")}
        ref_mean = row["reference"]["e_field_visited"]["mean"] if "reference" in row else math.nan
        for variant in variants:
            row[variant]["change_vs_reference"] = row[variant]["e_field_visited"]["mean"] / ref_mean - 1
        if args.case == "A" and level in BASELINE_K40_WD:
            for variant in variants:
                row[variant]["ratio_vs_K40_wd"] = row[variant]["e_field_visited"]["mean"] / BASELINE_K40_WD[level]
                row[variant]["ratio_vs_K40"] = row[variant]["e_field_visited"]["mean"] / BASELINE_K40[level]
        summary[str(level)] = row
    print("variant" + "".join(f"  {100 * lv:>15.1f}%" for lv in levels)
          + "   (e_field visited mean, change vs reference)")
    for variant in variants:
        cells = "".join(f"  {summary[str(lv)][variant]['e_field_visited']['mean']:.5f} "
                        f"({100 * summary[str(lv)][variant]['change_vs_reference']:+4.0f}%)" for lv in levels)
        print(f"{variant:20s}{cells}")
    geo = {}
    if args.case == "A" and all(lv in BASELINE_K40 for lv in levels):
        for variant in variants:
            geo[variant] = math.exp(statistics.fmean(math.log(summary[str(lv)][variant]["ratio_vs_K40"])
                                                     for lv in levels))
            print(f"geometric mean of e_field visited / unregularized K = 40 baseline, {variant}: {geo[variant]:.3f}")
    payload = {"command": f"python -m benchmarks.{NAME} --table {args.table} --case {args.case}", "config": config,
               "levels": levels, "seeds": args.seeds,
               "runs": runs, "summary": summary, "geometric_mean_vs_K40": geo,
               "baseline_K40_wd": BASELINE_K40_WD, "baseline_K40": BASELINE_K40}
    (folder / f"{stem}.json").write_text(json.dumps(payload, indent=2))
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(variants) + 1.5))
    for j, level in enumerate(levels):
        means = [summary[str(level)][v]["e_field_visited"]["mean"] for v in variants]
        errs = [summary[str(level)][v]["e_field_visited"]["std"] for v in variants]
        ax.errorbar(means, np.arange(len(variants)) + 0.15 * j, xerr=errs, fmt="o", label=f"{100 * level:g} % noise")
    ax.set_yticks(range(len(variants)), variants, fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("e_field (visited states), mean +- std over seeds")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(folder / f"{stem}.png", dpi=120)
    print(f"wrote {folder / (stem + '.json')}")


if __name__ == "__main__":
    main()

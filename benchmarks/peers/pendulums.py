"""Peers: PySINDy and torchdiffeq against jet matching and the RK4 baseline on the same streams.

For every plant, noise level and seed, each method sees the jet-matching run's stream
(`baselines.peers.config_stream`: the config's plant, case and 60 s duration, the
run's noise and seed) and is scored by the same metric (`torch_ude.metrics.evaluate_field`
on the data module's evaluation states: ``e_field``, ``e_field_visited``, ``c_hat``):

* ``jet``: ``torch-ude fit`` of the plant's jet-matching config;
* ``rk4``: ``torch-ude fit`` of its RK4 multiple-shooting baseline config;
* ``sindy_<mode>_<diff>``: PySINDy, residual on top of f_known or whole field, its default
  differentiation or a Savitzky-Golay smoothed one (`baselines.peers.sindy`; window,
  threshold and degree chosen on seed 0 of each plant and noise level, then fixed);
* ``torchdiffeq_backprop`` / ``torchdiffeq_adjoint``: the baseline's UDE and objective with
  torchdiffeq's gradient (`baselines.peers.neural_ode`), the adjoint on ``--adjoint-seeds``;
* ``pem_theta`` / ``pem_theta_omega``: physics-only PEM–MHE (an identified damping) from theta
  alone (omega unmeasured) or from both; ``pem_gray_theta``: gray-box PEM–MHE from theta (the
  known model plus the 2-16-16-2 residual, started as `mhe` starts it, with the jet run's
  calibration scales); ``pem_gray_theta_warm``: the same started from the jet-matching run's
  trained field (`baselines.peers.pem`; the gray-box rows on ``--pem-gray-noise`` only).

Each run is made in a fresh process that measures its wall time and peak memory
(`baselines.peers.run_measured`). Plants: ``case_a`` (single pendulum, Case A,
noise 1 % and 5 %) and ``friction`` (`torch_ude.systems.FrictionPendulum`, noise 0.1, 1
and 5 %).

    python -m benchmarks.peers.pendulums [--plants case_a friction] [--seeds 0 1 2]
        [--methods jet rk4 sindy torchdiffeq [pem]] [--adjoint-seeds 0] [--fresh]

The comparison with PEM–MHE (Case A at 0, 0.1, 1 and 5 % noise) is the same command:

    python -m benchmarks.peers.pendulums --plants case_a --case-a-noise 0 0.001 0.01 0.05 \
        --methods jet rk4 pem --name jet_vs_pem

Finished runs are kept in ``results/peers/runs/`` and reused (unless ``--fresh``) when
their settings are unchanged. Writes ``results/peers/peers.json`` and ``peers.png``.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from baselines.peers import (DEGREES, SINDY_VARIANTS, THRESHOLDS, WINDOWS, choose_variants,  # noqa: E402
                             config_stream, run_measured)
from baselines.peers.pem import reach_ratio  # noqa: E402  (loaded before a PEM-MHE child forks)
from benchmarks.common import PLANTS, RESULTS, ROOT, save, summarize, trainer_job  # noqa: E402

NOISE = {"case_a": [0.01, 0.05], "friction": [0.001, 0.01, 0.05]}
METHODS = ("jet", "rk4", "sindy", "torchdiffeq", "pem")
#: The PEM–MHE rows: name -> `baselines.peers.pem.PEMSettings` fields (``warm``: start from the jet run).
PEM_VARIANTS = {"pem_theta": {"variant": "physics", "measured": [0]},
                "pem_theta_omega": {"variant": "physics", "measured": [0, 1]},
                "pem_gray_theta": {"variant": "gray", "measured": [0]},
                "pem_gray_theta_warm": {"variant": "gray", "measured": [0], "warm": True}}


def _cached(path: Path, key: dict, compute, fresh: bool) -> dict:
    """The record at ``path`` if it was made with ``key`` (and not ``fresh``), else ``compute()``, stored."""
    key = json.loads(json.dumps(key))
    if not fresh and path.is_file():
        record = json.loads(path.read_text())
        if record.get("key") == key:
            return record
    record = {"key": key, **compute()}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2))
    return record


def _stream(plant: str, noise: float, seed: int, args: argparse.Namespace, streams: dict) -> tuple:
    """The recorded stream of a run, simulated once (``streams`` keeps it for the other methods)."""
    if (plant, noise, seed) not in streams:
        streams[(plant, noise, seed)] = config_stream(ROOT / PLANTS[plant][0], noise, seed, args.duration)
    return streams[(plant, noise, seed)]


def _sindy_choices(plant: str, noise: float, args: argparse.Namespace, folder: Path, streams: dict) -> dict:
    """The PySINDy settings per variant, chosen on seed 0's stream (`baselines.peers.sindy.choose_variants`)."""
    grid = {"windows": args.windows, "thresholds": args.thresholds, "degrees": args.degrees,
            "duration": args.duration}

    def compute() -> dict:
        dm, rec = _stream(plant, noise, 0, args, streams)
        return {"choices": choose_variants(dm.system, dm.case, rec, dm.evaluation_states(), args.windows,
                                           args.thresholds, args.degrees)}

    return _cached(folder / "runs" / f"{plant}_{noise}_sindy_choice.json", grid, compute, args.fresh)["choices"]


def _run(plant: str, noise: float, seed: int, variant: str, args: argparse.Namespace, folder: Path,
         sindy: dict, streams: dict) -> dict:
    """One measured run of ``variant`` (``streams`` holds the recorded streams, filled on demand)."""
    if variant in ("jet", "rk4"):
        kind = "trainer"
        kwargs = trainer_job(plant, variant, noise, seed, folder, args.duration,
                             args.updates if variant == "jet" else args.iterations)
    elif variant.startswith("sindy_"):
        kind, kwargs = "sindy", {"options": sindy[variant]["settings"]}
    elif variant.startswith("pem_"):
        kind, kwargs = "pem", {"options": _pem_options(plant, variant, noise, seed, args, folder)}
    else:
        mode = variant.removeprefix("torchdiffeq_")
        kind, kwargs = "torchdiffeq", {"options": {"mode": mode, "iterations": args.iterations or 1200}}
    key = {"kind": kind, **kwargs}
    if kind != "trainer":
        key |= {"plant": plant, "noise": noise, "seed": seed, "duration": args.duration}

    def compute() -> dict:
        if kind == "trainer":  # the config relative to the repository, as the key has it
            out = run_measured(kind, **kwargs | {"config": str(ROOT / kwargs["config"])})
        else:
            out = run_measured(kind, **kwargs, stream=_stream(plant, noise, seed, args, streams))
        print(f"{plant} noise={noise:.3f} seed={seed} {variant}: e_field_visited={out['e_field_visited']:.5f} "
              f"e_field={out['e_field']:.5f} c_hat={out['c_hat']:.4f} wall={out['wall_s']:.2f}s "
              f"peak={out['peak_rss_mb']:.1f} MiB", flush=True)
        return out

    return _cached(folder / "runs" / f"{plant}_{noise}_{seed}_{variant}.json", key, compute,
                   args.fresh) | {"plant": plant, "noise": noise, "seed": seed, "variant": variant}


def _pem_options(plant: str, variant: str, noise: float, seed: int, args: argparse.Namespace, folder: Path) -> dict:
    """The `baselines.peers.pem.PEMSettings` of a PEM–MHE variant; a gray-box one reads the jet run's field."""
    options = dict(PEM_VARIANTS[variant])
    warm = options.pop("warm", False)
    if options["variant"] == "gray":
        jet = Path(trainer_job(plant, "jet", noise, seed, folder, args.duration, args.updates)["root"])
        if warm:
            options["start"] = str(jet)
        else:
            sidecar = json.loads((jet / "field.json").read_text())
            options["scales"] = [sidecar["in_scale"], sidecar["out_scale"]]
        options["max_steps"] = args.pem_gray_steps
    return options


def _variants(methods: list[str], seed: int, adjoint_seeds: list[int], gray: bool) -> list[str]:
    """The variants of one run, in order (a gray-box PEM–MHE variant needs the jet run, made first)."""
    out = [m for m in ("jet", "rk4") if m in methods]
    if "sindy" in methods:
        out += list(SINDY_VARIANTS)
    if "torchdiffeq" in methods:
        out += ["torchdiffeq_backprop"] + (["torchdiffeq_adjoint"] if seed in adjoint_seeds else [])
    if "pem" in methods:
        if gray and "jet" not in methods:
            raise ValueError("the gray-box PEM-MHE variants start from the jet-matching runs: add 'jet' to "
                             "--methods, or leave --pem-gray-noise empty.")
        out += [v for v in PEM_VARIANTS if gray or not v.startswith("pem_gray")]
    return out


def _summary(runs: list[dict]) -> dict:
    """Per plant, noise and variant: statistics over seeds; per plant and noise: the key ratios."""
    table: dict = {}
    for r in runs:
        table.setdefault(f"{r['plant']}@{r['noise']}", {}).setdefault(r["variant"], []).append(r)
    out = {}
    for setting, by_variant in table.items():
        rows = {v: {k: summarize([r[k] for r in rs]) for k in ("e_field_visited", "e_field", "c_hat", "wall_s",
                                                              "peak_rss_mb")} for v, rs in by_variant.items()}
        sindy = {v: s for v, s in rows.items() if v.startswith("sindy_")}
        best = min(sindy, key=lambda v: sindy[v]["e_field_visited"]["mean"]) if sindy else None
        ratios = {}
        if "jet" in rows and best is not None:
            jet = rows["jet"]["e_field_visited"]["mean"]
            ratios["jet_over_best_sindy"] = jet / sindy[best]["e_field_visited"]["mean"]
        if "jet" in rows and "torchdiffeq_backprop" in rows:
            td = rows["torchdiffeq_backprop"]
            ratios["jet_over_torchdiffeq"] = rows["jet"]["e_field_visited"]["mean"] / td["e_field_visited"]["mean"]
            ratios["jet_time_over_torchdiffeq"] = rows["jet"]["wall_s"]["mean"] / td["wall_s"]["mean"]
        cold = {r["seed"]: r for r in by_variant.get("pem_gray_theta", [])}
        warm = [reach_ratio(r, cold[r["seed"]]) for r in by_variant.get("pem_gray_theta_warm", []) if r["seed"] in cold]
        if warm:
            ratios["pem_warm_time_to_cold_J_over_cold_time"] = warm
        out[setting] = {"variants": rows, "best_sindy": best, "ratios": ratios}
    return out


def _plot(summary: dict, runs: list[dict], path: Path) -> None:
    """e_field on the visited states per setting and variant, and error against wall time."""
    variants = sorted({r["variant"] for r in runs})
    settings = list(summary)
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    for j, variant in enumerate(variants):
        xs = [i + (j - len(variants) / 2) * 0.8 / len(variants) for i, s in enumerate(settings)
              if variant in summary[s]["variants"]]
        ys = [summary[s]["variants"][variant]["e_field_visited"]["mean"] for s in settings
              if variant in summary[s]["variants"]]
        axes[0].bar(xs, ys, width=0.8 / len(variants), label=variant)
        pts = [(r["wall_s"], r["e_field_visited"]) for r in runs if r["variant"] == variant]
        axes[1].scatter(*zip(*pts), label=variant, s=18)
    axes[0].set_xticks(range(len(settings)), [s.replace("@", "\n") for s in settings])
    axes[0].set(yscale="log", ylabel="e_field (visited), mean over seeds", title="field error")
    axes[1].set(xscale="log", yscale="log", xlabel="wall time of the fit [s]", ylabel="e_field (visited)",
                title="error against time, every run")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    """Run the grid, summarize, save JSON + PNG and print the table."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plants", nargs="+", choices=list(PLANTS), default=list(PLANTS))
    ap.add_argument("--case-a-noise", type=float, nargs="+", default=NOISE["case_a"])
    ap.add_argument("--friction-noise", type=float, nargs="+", default=NOISE["friction"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--methods", nargs="+", choices=METHODS, default=[m for m in METHODS if m != "pem"],
                    help="default: the peer libraries with jet matching and the RK4 baseline; 'pem' adds PEM-MHE")
    ap.add_argument("--adjoint-seeds", type=int, nargs="*", default=[0],
                    help="seeds that also run torchdiffeq's adjoint mode (its gradient equals backprop's to ~1e-7)")
    ap.add_argument("--duration", type=float, default=None, help="stream length in s (default: the configs' 60 s)")
    ap.add_argument("--updates", type=int, default=None, help="jet-matching updates (default: the config's)")
    ap.add_argument("--iterations", type=int, default=None,
                    help="Adam iterations of the RK4 baseline and torchdiffeq (default: 1200)")
    ap.add_argument("--windows", type=int, nargs="+", default=list(WINDOWS),
                    help="PySINDy Savitzky-Golay windows tried")
    ap.add_argument("--thresholds", type=float, nargs="+", default=list(THRESHOLDS), help="STLSQ thresholds tried")
    ap.add_argument("--degrees", type=int, nargs="+", default=list(DEGREES), help="polynomial degrees tried")
    ap.add_argument("--pem-gray-noise", type=float, nargs="*", default=[0.01, 0.05],
                    help="noise levels with the gray-box PEM-MHE variants (about 5 min a run)")
    ap.add_argument("--pem-gray-steps", type=int, default=15, help="cap of gray-box PEM-MHE iterations")
    ap.add_argument("--name", default="peers", help="results folder name under results/")
    ap.add_argument("--fresh", action="store_true", help="rerun finished runs")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    folder = RESULTS / args.name
    levels = {"case_a": args.case_a_noise, "friction": args.friction_noise}
    runs, choices = [], {}
    for plant in args.plants:
        for noise in levels[plant]:
            streams: dict = {}  # recorded streams of this plant and noise, simulated once for all peer runs
            sindy = _sindy_choices(plant, noise, args, folder, streams) if "sindy" in args.methods else {}
            choices[f"{plant}@{noise}"] = {v: c["settings"] for v, c in sindy.items()}
            for seed in args.seeds:
                runs += [_run(plant, noise, seed, v, args, folder, sindy, streams)
                         for v in _variants(args.methods, seed, args.adjoint_seeds, noise in args.pem_gray_noise)]
    summary = _summary(runs)
    out = save(args.name, {"runs": [{k: v for k, v in r.items() if k != "key"} for r in runs],
                           "summary": summary, "sindy_settings": choices, "settings": vars(args)})
    _plot(summary, runs, out / f"{args.name}.png")
    for setting, s in summary.items():
        print(f"\n{setting}  (best PySINDy: {s['best_sindy']}; ratios {json.dumps(s['ratios'])})")
        print("| variant | e_field visited | e_field grid | c_hat (min-max) | wall s | peak MiB |")
        for v, row in s["variants"].items():
            e, g, c = row["e_field_visited"], row["e_field"], row["c_hat"]
            print(f"| {v} | {e['mean']:.5f} +- {e['std']:.5f} | {g['mean']:.5f} | {c['min']:.4f}-{c['max']:.4f} | "
                  f"{row['wall_s']['mean']:.2f} | {row['peak_rss_mb']['mean']:.1f} |")
    print(f"saved {out}")


if __name__ == "__main__":
    main()

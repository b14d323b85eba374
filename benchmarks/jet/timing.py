"""Wall time, profile, MACs per update and resident memory of the streaming trainer.

    python -m benchmarks.jet.timing run        # one default run: wall_s, update_ms (3 seeds)
    python -m benchmarks.jet.timing profile    # cProfile of one run, grouped by component
    python -m benchmarks.jet.timing compare    # the trainer at issue 15's filing vs now, side by side
    python -m benchmarks.jet.timing macs       # matmul MACs per update (`torch_ude.jet.jet_update_macs`)
    python -m benchmarks.jet.timing memory     # RSS over a one-hour stream

Writes results/jet_timing/<what>.json (and memory.png, compare.png).
"""
from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import lightning as L
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from benchmarks.common import RESULTS, summarize  # noqa: E402
from torch_ude.cli import fit_config  # noqa: E402
from torch_ude.export import same_weights  # noqa: E402
from torch_ude import HybridField, SinglePendulum  # noqa: E402
from torch_ude.jet import jet_update_macs  # noqa: E402

CONFIG = "configs/pendulum_case_a.yaml"
# The trainer before issue 15's work on it: the newest commit before the issue's first commit
# (caa700a, known inputs). The issue was filed earlier; trainer changes between its filing and this
# commit (the TorchScript plant, 7dde3bb) only made it faster, so "before" is not slower than at filing.
BEFORE = "68b5d304c1492adfa24c55d88efa409d997ba0fd"
# one `torch_ude.cli.fit_config` run, written out so that it runs in the tree of BEFORE too
RUN_ONE = ("import json, sys, torch; from torch_ude.cli import main; torch.set_num_threads(1); r = sys.argv[2]; "
           "main(['fit', '--config', sys.argv[1], '--seed_everything', sys.argv[3], '--trainer.enable_progress_bar', "
           "'false', '--trainer.default_root_dir', r, '--trainer.logger.init_args.save_dir', r]); "
           "m = json.load(open(r + '/metrics.json')); "
           "print(json.dumps({k: m[k] for k in ('wall_s', 'update_ms', 'e_field', 'e_field_visited', 'updates')}))")
COMPONENTS = {  # (file fragment, function) -> component; cumulative time, nested calls included
    ("torch_ude/jet.py", "value_and_grad"): "hand-written jet gradient",
    ("torch_ude/update.py", "optimizer_step"): "Adam step",
    ("torch/optim/lr_scheduler.py", "step"): "learning-rate schedule",
    ("torch_ude/update.py", "update_parameters"): "EMA update",
    ("torch_ude/update.py", "_clip_grads"): "gradient clipping",
    ("torch_ude/reservoir.py", "sample"): "minibatch draw",
    ("torch_ude/stream.py", "push"): "stream estimator (calibration, windows, gate, reservoir)",
    ("torch_ude/systems/simulate.py", "_clean_block"): "simulated sensor: RK4 of the plant",
    ("torch_ude/training/module.py", "training_step"): "training_step total",
    ("torch_ude/training/module.py", "on_train_end"): "final evaluation and export",
    ("lightning/pytorch/trainer/trainer.py", "fit"): "Trainer.fit total",
}


def timing(seeds: list[int]) -> dict:
    """Default single-pendulum runs; wall time measured inside each run."""
    runs = [fit_config(CONFIG, RESULTS / "jet_timing" / f"run_{s}", s) for s in seeds]
    keys = ("wall_s", "update_ms", "stream_s", "e_field_visited")
    return {"runs": [{k: r[k] for k in keys} for r in runs], **{k: summarize([r[k] for r in runs]) for k in keys}}


def export_tree(ref: str, folder: Path) -> Path:
    """Write the files of commit ``ref`` of this repository into ``folder`` (``git archive``).

    Raises:
        ValueError: if ``ref`` is not a commit of this repository (or git is missing).
    """
    try:
        archive = subprocess.run(["git", "archive", "--format=tar", ref], capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        detail = getattr(err, "stderr", b"") or b""
        raise ValueError(f"cannot export commit {ref!r} with git archive (run from the repository root with git "
                         f"installed): {detail.decode().strip() or err}") from err
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def run_in(tree: Path, root: Path, seed: int) -> dict:
    """One default run of the trainer in source tree ``tree`` (a fresh interpreter whose imports
    come from that tree, one torch thread); returns its metrics (wall time measured inside the run)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", RUN_ONE, CONFIG, str(root.resolve()), str(seed)], cwd=tree, env=env,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"the run in {tree} (seed {seed}) failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def compare(seeds: list[int], repeats: int, before: str = BEFORE) -> dict:
    """Default runs of the trainer at commit ``before`` and of this working tree, alternating run
    by run (same seeds, same machine, each in a fresh interpreter); the trained (EMA) weights of
    each pair are compared bit for bit."""
    folder = RESULTS / "jet_timing"
    rows, identical, load_start = [], True, os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="jet_timing_before_") as tmp:
        trees = {"before": export_tree(before, Path(tmp)), "after": Path.cwd()}
        for r in range(repeats):
            for s in seeds:
                for variant, tree in trees.items():
                    m = run_in(tree, folder / f"compare_{variant}_{s}", s)
                    rows.append({"variant": variant, "seed": s, "repeat": r, **m})
                same = same_weights(folder / f"compare_before_{s}", folder / f"compare_after_{s}")
                identical = identical and same and rows[-1]["e_field"] == rows[-2]["e_field"]
    res = {"before_commit": before, "runs": rows, "bit_identical": identical, "load_average_start": load_start,
           "load_average_end": os.getloadavg()}
    for variant in ("before", "after"):
        for k in ("wall_s", "update_ms"):
            res[f"{variant}_{k}"] = summarize([r[k] for r in rows if r["variant"] == variant])
    res["wall_ratio_after_before"] = res["after_wall_s"]["mean"] / res["before_wall_s"]["mean"]
    return res


def plot_compare(result: dict, path: Path) -> None:
    """Wall time of every run of `compare`, in the order they ran."""
    fig, ax = plt.subplots(figsize=(6, 3))
    for variant, color in (("before", "tab:gray"), ("after", "tab:blue")):
        idx = [i for i, r in enumerate(result["runs"]) if r["variant"] == variant]
        ax.plot(idx, [result["runs"][i]["wall_s"] for i in idx], "o", color=color,
                label=f"{variant}: mean {result[f'{variant}_wall_s']['mean']:.2f} s")
    ax.set(xlabel="run (in the order run)", ylabel="wall time [s]", ylim=(0, None),
           title=f"default pendulum run, after/before = {result['wall_ratio_after_before']:.2f}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def profile() -> dict:
    """cProfile one run; self time grouped by component."""
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    fit_config(CONFIG, RESULTS / "jet_timing" / "profile_run", 0)
    prof.disable()
    total = time.perf_counter() - t0
    stats = pstats.Stats(prof)
    comps: dict[str, float] = {}
    for (path, _, func), (_, _, _, cumtime, _) in stats.stats.items():
        for (frag, name), label in COMPONENTS.items():
            if frag in path and func == name:
                comps[label] = max(comps.get(label, 0.0), cumtime)
    return {"profiled_total_s": total, "cumulative_s_by_component": comps,
            "note": "cProfile adds overhead to every Python call; the unprofiled wall time is in run.json"}


def macs() -> dict:
    """Matmul MACs of one update (B = 64), with and without the second-order term."""
    field = HybridField.from_seed(SinglePendulum().known_field("A"), 0)
    out = {"paper_macs_per_update": 184_960, "batch": 64}
    for lam2 in (0.0, 0.1):
        out[f"lambda2={lam2}"] = jet_update_macs(field, lam2, 64)
    return out


def memory(duration: float) -> dict:
    """RSS over a long stream (replay off: training stops when the stream does)."""
    from torch_ude.stream import StreamSettings
    from torch_ude.training import JetMatchingModule, ResidentMemory, StreamDataModule

    cb = ResidentMemory(every_n_batches=30)  # every 30 s of stream, as measured (a step is 25 chunks: 1 s)
    dm = StreamDataModule(SinglePendulum(), duration=duration, noise=0.01, seed=0)
    model = JetMatchingModule(stream=StreamSettings(), replay=False)
    trainer = L.Trainer(max_steps=int(duration * 25), logger=False, enable_progress_bar=False,
                        enable_checkpointing=False, callbacks=[cb], default_root_dir=RESULTS / "jet_timing" / "memory",
                        num_sanity_val_steps=0, limit_val_batches=0)
    t0 = time.perf_counter()
    trainer.fit(model, dm)
    rss = [s["rss_mb"] for s in cb.samples]
    half = len(rss) // 2
    return {"duration_s": duration, "wall_s": time.perf_counter() - t0, "samples": cb.samples,
            "rss_first_half_max_mb": max(rss[:half]), "rss_second_half_max_mb": max(rss[half:]),
            "rss_growth_second_half_mb": max(rss[half:]) - rss[half], "updates": model.stats["updates"]}


def main(argv: list[str] | None = None) -> None:
    """Dispatch to one measurement and save its JSON."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("what", choices=("run", "profile", "macs", "memory", "compare"))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--duration", type=float, default=3600.0)
    ap.add_argument("--repeats", type=int, default=2, help="compare: rounds over the seeds")
    ap.add_argument("--before", default=BEFORE, help="compare: the commit of the 'before' trainer")
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error(f"--repeats must be >= 1; got {args.repeats}.")
    torch.set_num_threads(1)
    result = {"run": lambda: timing(args.seeds), "profile": profile, "macs": macs,
              "memory": lambda: memory(args.duration),
              "compare": lambda: compare(args.seeds, args.repeats, args.before)}[args.what]()
    folder = RESULTS / "jet_timing"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{args.what}.json").write_text(json.dumps(result, indent=2))
    if args.what == "memory":
        fig, ax = plt.subplots(figsize=(6, 3))
        ax.plot([s["stream_s"] / 60 for s in result["samples"]], [s["rss_mb"] for s in result["samples"]], "o-")
        ax.set(xlabel="stream time [min]", ylabel="RSS [MiB]", title="resident memory over a one-hour stream")
        fig.tight_layout()
        fig.savefig(folder / "memory.png", dpi=120)
    if args.what == "compare":
        plot_compare(result, folder / "compare.png")
    print(json.dumps({k: v for k, v in result.items() if k not in ("samples", "top_cumulative", "runs")}, indent=2))


if __name__ == "__main__":
    main()

"""Accuracy of the C trainer from Python beside the Python trainer, on the same streams.

``python -m benchmarks.device.accuracy`` trains single pendulum Case A at 1 % noise with
``configs/pendulum_case_a_c.yaml`` (B = 2048, float32, the C trainer) and the same settings with
the Python trainer (float64), seeds 0-2; and the double pendulum (configs/double_pendulum_case_a.yaml,
B = 2048) with both engines, seeds 0-3. Prints and saves ``results/c_accuracy/c_accuracy.json``:
e_field (grid and visited states), c_hat and the wall time of every run.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from torch_ude.cli import fit_config
from benchmarks.common import C_CASES, C_CONFIG, RESULTS, save, summarize

C_MODULE = "microcontroller.training.CJetMatchingModule"
PY_MODULE = "torch_ude.training.JetMatchingModule"
EXPERIMENTS = {
    "single": (C_CONFIG, [], (0, 1, 2)),
    "double": (*C_CASES["double pendulum, B = 2048"], (0, 1, 2, 3)),
}


def run(name: str, engine: str, seed: int, reuse: bool) -> dict:
    """One run; ``engine`` is ``"c"`` or ``"python"``."""
    config, overrides, _ = EXPERIMENTS[name]
    module = C_MODULE if engine == "c" else PY_MODULE
    extra = ["--model.class_path", module, "--model.chunks_per_step", "25"]
    m = fit_config(config, RESULTS / "c_accuracy" / f"{name}-{engine}-seed{seed}", seed, [*overrides, *extra],
                   reuse=reuse)
    return {k: m[k] for k in ("e_field", "e_field_visited", "c_hat", "m", "wall_s", "updates")}


def main(argv: list[str] | None = None) -> None:
    """Command line: see the module doc."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.device.accuracy", description=__doc__.split("\n\n")[0])
    parser.add_argument("--reuse", action="store_true", help="reuse finished runs in results/c_accuracy")
    parser.add_argument("--only", choices=sorted(EXPERIMENTS), help="run one experiment")
    args = parser.parse_args(argv)
    out = {}
    for name, (_, _, seeds) in EXPERIMENTS.items():
        if args.only and name != args.only:
            continue
        for engine in ("c", "python"):
            runs = [run(name, engine, s, args.reuse) for s in seeds]
            out[f"{name}-{engine}"] = {"runs": runs, **{k: summarize([r[k] for r in runs])
                                                         for k in ("e_field", "e_field_visited", "c_hat", "wall_s")}}
            s = out[f"{name}-{engine}"]
            seeds_text = ", ".join(f"{r['e_field_visited']:.5f}" for r in runs)
            print(f"{name:6s} {engine:6s} e_field_visited mean {s['e_field_visited']['mean']:.5f} "
                  f"(seeds {seeds_text}), e_field mean "
                  f"{s['e_field']['mean']:.5f}, c_hat mean {s['c_hat']['mean']:.4f}, wall {s['wall_s']['mean']:.1f} s")
    print(f"saved in {save('c_accuracy', out)}")


if __name__ == "__main__":
    main()

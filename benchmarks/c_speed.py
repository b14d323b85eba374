"""Wall time of the whole run, C trainer against Python trainer, side by side in one process.

``python -m benchmarks.c_speed`` runs single pendulum Case A, 1 % noise, 60 s stream, 8000
updates, B = 2048 (``configs/pendulum_case_a_c.yaml``) with the C trainer and with the Python
trainer on the same settings (its default granularity: one chunk per step, 25 replay updates per step), alternating,
``--repeats`` times each (default 3). Both include the simulated plant. Reports the run's own
``wall_s`` (fit start to end: stream, calibration, updates, periodic evaluation and checkpoints)
and the split of the C run into the plant, the C library and the rest; saves
``results/c_speed/c_speed.json``. Run it on a quiet machine: the ratio, not the seconds, is the
result.
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from .jet_runs import RESULTS, fit, save

CONFIG = "configs/pendulum_case_a_c.yaml"
#: the Python trainer's granularity (speed only); its settings are the config's (`python_config`)
PYTHON = ["--model.replay_updates", "25", "--model.chunks_per_step", "1"]


def python_config() -> Path:
    """`CONFIG` with the Python trainer as its model class, written to ``results/c_speed/python.yaml``.

    A ``--model.class_path`` override would not do: LightningCLI then gives the new class its own
    defaults, not the config's settings (B = 4096 and box-averaged taps instead of the device's).
    """
    text = Path(CONFIG).read_text()
    engine = "class_path: microcontroller.training.CJetMatchingModule"
    if engine not in text:
        raise RuntimeError(f"{CONFIG} no longer names {engine}; update benchmarks.c_speed.python_config.")
    path = RESULTS / "c_speed" / "python.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.replace(engine, "class_path: torch_ude.training.JetMatchingModule"))
    return path


def plant_seconds() -> float:
    """Seconds the simulated plant takes to produce the 60 s stream alone (the data module's chunks)."""
    from torch_ude.systems import SinglePendulum
    from torch_ude.training.data import StreamDataModule

    dm = StreamDataModule(SinglePendulum(), duration=60.0, noise=0.01, seed=0)
    t0 = time.perf_counter()
    while dm.live:
        dm.next_chunk()
    return time.perf_counter() - t0


def speedup(repeats: int) -> dict:
    """The whole run with the C trainer and with the Python trainer, alternating, ``repeats`` times each.

    Returns:
        ``wall_s`` (per engine, s), ``median_wall_s``, ``speedup`` (Python over C, medians), ``runs``
        (each run's wall_s, update_ms, stream_s, e_field_visited, c_hat), ``plant_s_median`` (the
        simulated plant alone) and ``c_updates_s_median`` (8000 C updates with their Python calls).
    """
    walls = {"c": [], "python": []}
    runs = {"c": [], "python": []}
    python = str(python_config())
    for k in range(repeats):
        for engine, config, extra in (("c", CONFIG, []), ("python", python, PYTHON)):
            m = fit(config, RESULTS / "c_speed" / f"{engine}-{k}", 0, extra)
            walls[engine].append(m["wall_s"])
            runs[engine].append({k2: m[k2] for k2 in ("wall_s", "update_ms", "stream_s", "e_field_visited", "c_hat",
                                                      "m")})
    plant = [plant_seconds() for _ in range(repeats)]
    med = {e: statistics.median(v) for e, v in walls.items()}
    c_update = statistics.median(r["update_ms"] for r in runs["c"]) * 8000 / 1e3
    return {"wall_s": walls, "median_wall_s": med, "speedup": med["python"] / med["c"], "runs": runs,
            "plant_s_median": statistics.median(plant), "c_updates_s_median": c_update}


def summary(out: dict) -> str:
    """One line of `speedup`'s result."""
    med, repeats = out["median_wall_s"], len(out["wall_s"]["c"])
    return (f"whole run, median of {repeats}: C trainer {med['c']:.2f} s, Python trainer {med['python']:.2f} s, "
            f"speed-up {out['speedup']:.1f}x; of the C run: plant {out['plant_s_median']:.2f} s, "
            f"8000 C updates (with their Python calls) {out['c_updates_s_median']:.2f} s")


def main(argv: list[str] | None = None) -> None:
    """Command line: see the module doc."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.c_speed", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    out = speedup(args.repeats)
    print(summary(out))
    print(f"saved in {save('c_speed', out)}")


if __name__ == "__main__":
    main()

"""The C library as the host's training backend against the Python trainer: the whole run's wall time.

`host_speedup` runs ``torch-ude fit`` in this process on a config of the C trainer
(`microcontroller.training.CJetMatchingModule`) and on the same config with the Python trainer
(`python_config`), alternating, and times the config's data module alone (`stream_seconds`). Both runs
include the data module's stream; a run's ``wall_s`` is its fit from start to end (stream, calibration,
updates, periodic evaluation and checkpoints). Run it on a quiet machine: the ratio, not the seconds, is
the result.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from pathlib import Path

from torch_ude.cli import fit_config

from .golden import data_module

__all__ = ["PYTHON_GRANULARITY", "python_config", "stream_seconds", "host_speedup"]

_C_ENGINE = "class_path: microcontroller.training.CJetMatchingModule"
_PYTHON_ENGINE = "class_path: torch_ude.training.JetMatchingModule"
#: The Python trainer's granularity in `host_speedup` (speed only: one chunk per training step, 25 replay updates
#: per step, its own defaults); its settings are the config's (`python_config`).
PYTHON_GRANULARITY = ("--model.replay_updates", "25", "--model.chunks_per_step", "1")


def python_config(config: str | Path, out: str | Path) -> Path:
    """A config of the C trainer with the Python trainer as its model class, written to ``out``.

    A ``--model.class_path`` override would not do: LightningCLI then gives the new class its own
    defaults, not the config's settings (e.g. B = 4096 and box-averaged taps instead of the device's).

    Args:
        config: a YAML config whose model is ``microcontroller.training.CJetMatchingModule``.
        out: the path of the new YAML config (its folder is created).

    Returns:
        ``out``.

    Raises:
        ValueError: if ``config`` does not name the C trainer's class.
    """
    text = Path(config).read_text()
    if _C_ENGINE not in text:
        raise ValueError(f"config {config} does not name the C trainer ({_C_ENGINE}); give a config of "
                         f"microcontroller.training.CJetMatchingModule, e.g. configs/pendulum_case_a_c.yaml.")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text.replace(_C_ENGINE, _PYTHON_ENGINE))
    return out


def stream_seconds(config: str | Path, overrides: Sequence[str] = ()) -> float:
    """Seconds the data module of ``config`` (with CLI ``overrides``) takes to produce its whole stream alone
    (its chunks; for a simulated plant, the simulation)."""
    dm = data_module(config, list(overrides))
    t0 = time.perf_counter()
    while dm.live:
        dm.next_chunk()
    return time.perf_counter() - t0


def host_speedup(config: str | Path, repeats: int, folder: str | Path, overrides: Sequence[str] = ()) -> dict:
    """The whole run with the C trainer and with the Python trainer, alternating, ``repeats`` times each.

    Args:
        config: a config of the C trainer (`python_config` derives the Python trainer's).
        repeats: runs of each engine (>= 1).
        folder: where the runs (``c-K``, ``python-K``) and the Python trainer's config go.
        overrides: CLI overrides of both engines' runs and of the data module timed alone.

    Returns:
        ``wall_s`` (per engine, s), ``median_wall_s``, ``speedup`` (Python over C, medians), ``runs``
        (each run's wall_s, update_ms, stream_s, e_field_visited, c_hat, m), ``plant_s_median`` (the data
        module alone, `stream_seconds`) and ``c_updates_s_median`` (the C run's updates with their Python
        calls: the median ms per update times the updates of a run).

    Raises:
        ValueError: for ``repeats`` below 1, or a config that does not name the C trainer.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1; got {repeats}.")
    folder = Path(folder)
    runs = {"c": [], "python": []}
    python = str(python_config(config, folder / "python.yaml"))
    for k in range(repeats):
        for engine, engine_config, extra in (("c", config, []), ("python", python, PYTHON_GRANULARITY)):
            m = fit_config(engine_config, folder / f"{engine}-{k}", 0, [*overrides, *extra])
            runs[engine].append({key: m[key] for key in ("wall_s", "update_ms", "stream_s", "e_field_visited",
                                                         "c_hat", "m")})
            if engine == "c":
                updates = m["updates"]
    plant = [stream_seconds(config, overrides) for _ in range(repeats)]
    walls = {e: [r["wall_s"] for r in v] for e, v in runs.items()}
    med = {e: statistics.median(v) for e, v in walls.items()}
    c_update = statistics.median(r["update_ms"] for r in runs["c"]) * updates / 1e3
    return {"wall_s": walls, "median_wall_s": med, "speedup": med["python"] / med["c"], "runs": runs,
            "plant_s_median": statistics.median(plant), "c_updates_s_median": c_update}

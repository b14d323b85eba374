"""Shared runner for the jet-matching benchmarks: one `torch-ude fit` per (config, overrides, seed)."""
from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from torch_ude.cli import main

__all__ = ["fit", "summarize", "save", "RESULTS"]

RESULTS = Path("results")


def fit(config: str, root: Path, seed: int, overrides: list[str] | tuple[str, ...] = (), reuse: bool = False) -> dict:
    """Run ``torch-ude fit`` in-process and return its ``metrics.json``.

    Args:
        config: path of the YAML config.
        root: run folder (outputs and TensorBoard logs).
        seed: ``seed_everything`` value.
        overrides: further CLI arguments, e.g. ``["--data.noise", "0.02"]``.
        reuse: return the ``metrics.json`` of a finished run in ``root`` instead of training again.
    """
    root = Path(root)
    if reuse and (root / "metrics.json").is_file():
        return json.loads((root / "metrics.json").read_text())
    args = ["fit", "--config", config, "--seed_everything", str(seed), "--trainer.enable_progress_bar", "false",
            "--trainer.default_root_dir", str(root), "--trainer.logger.init_args.save_dir", str(root), *overrides]
    main(args)
    return json.loads((root / "metrics.json").read_text())


def summarize(values: list[float]) -> dict:
    """Mean, sample standard deviation, min and max of a list of numbers."""
    return {"mean": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1 else 0.0,
            "min": min(values), "max": max(values), "n": len(values)}


def save(name: str, payload: dict) -> Path:
    """Write ``results/<name>/<name>.json`` and return the folder."""
    folder = RESULTS / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(payload, indent=2, default=lambda v: None if
                                                     isinstance(v, float) and not math.isfinite(v) else str(v)))
    return folder

"""The files every trainer of the project writes at the end of a run."""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import torch
from matplotlib.figure import Figure

from ..export import export_field
from ..field import HybridField
from ..systems.base import System

__all__ = ["METRIC_KEYS", "write_run_outputs", "residual_figure", "to_jsonable", "tensor_bytes"]

METRIC_KEYS = ("e_field", "e_field_visited", "c_hat", "sigma_hat", "m", "lambda2", "reject_rate", "updates",
               "wall_s")


def to_jsonable(value: object) -> object:
    """Convert tensors, arrays, dataclasses, tuples and non-finite floats for JSON."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_jsonable(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, (torch.Tensor, np.ndarray)):
        return to_jsonable(value.tolist())
    if isinstance(value, (np.floating, np.integer)):
        return to_jsonable(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def tensor_bytes(*objects: object) -> int:
    """Bytes of every tensor in ``objects`` (nested dicts, lists, tuples and dataclasses).

    Used for the ``state_bytes`` every trainer reports: the memory its training state
    holds for the whole run (buffers, weights, gradients, optimizer moments, averages).
    """
    total = 0
    for obj in objects:
        if isinstance(obj, torch.Tensor):
            total += obj.numel() * obj.element_size()
        elif isinstance(obj, np.ndarray):
            total += obj.nbytes
        elif isinstance(obj, dict):
            total += tensor_bytes(*obj.values())
        elif isinstance(obj, (list, tuple)):
            total += tensor_bytes(*obj)
        elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            total += tensor_bytes(*(getattr(obj, f.name) for f in dataclasses.fields(obj)))
    return total


def write_run_outputs(directory: str | Path, field: HybridField, system: System, case: str, metrics: dict,
                      trainer: str, config: dict | None = None) -> dict[str, Path]:
    """Write ``field.pt``, ``field.json`` and ``metrics.json`` into ``directory``.

    Args:
        directory: the run folder (``trainer.default_root_dir``).
        field: the trained field to export (the EMA weights where a trainer averages).
        system: the plant.
        case: the known-model case.
        metrics: must contain every key of `METRIC_KEYS` (None where not applicable).
        trainer: the trainer's name, recorded in both JSON files.
        config: the run's hyperparameters, recorded in ``field.json``.

    Returns:
        Paths of the three files.

    Raises:
        KeyError: if a required metric key is missing.
    """
    missing = [k for k in METRIC_KEYS if k not in metrics]
    if missing:
        raise KeyError(f"metrics.json must contain {list(METRIC_KEYS)}; missing {missing}.")
    out = Path(directory)
    pt, js = export_field(field, out, system, case, extra=to_jsonable({"trainer": trainer, "config": config}))
    mpath = out / "metrics.json"
    payload = {"trainer": trainer, "plant": type(system).__name__, "case": case, **metrics}
    mpath.write_text(json.dumps(to_jsonable(payload), indent=2) + "\n")
    return {"field": pt, "sidecar": js, "metrics": mpath}


def residual_figure(field: HybridField, system: System, case: str, states: torch.Tensor) -> Figure:
    """Parity plot of the learned residual against the true one, per state channel.

    The true residual is ``f*(x) - f_known(x)``; the learned one ``F(x) - f_known(x)``,
    both on the visited ``states`` (V, n). The figure is backend-free (no pyplot state),
    so it neither needs nor selects a display backend.
    """
    with torch.no_grad():
        known = system.known_field(case)(states)
        true = (system.true_field()(states) - known).numpy()
        learned = (field.evaluate(states) - known).numpy()
    n = states.shape[1]
    fig = Figure(figsize=(3.2 * n, 3.0))
    axes = fig.subplots(1, n, squeeze=False)
    for i, ax in enumerate(axes[0]):
        ax.plot(true[:, i], learned[:, i], ".", ms=2)
        lim = [min(true[:, i].min(), learned[:, i].min()), max(true[:, i].max(), learned[:, i].max())]
        ax.plot(lim, lim, "k--", lw=0.8)
        ax.set_title(f"residual d{system.state_names[i]}/dt")
        ax.set_xlabel("true")
        ax.set_ylabel("learned")
    fig.tight_layout()
    return fig

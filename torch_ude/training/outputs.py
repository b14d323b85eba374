"""The files every trainer of the project writes: ``field.pt``, ``field.json``, ``metrics.json``.

A run's folder goes through three states, each file written atomically (a temporary
file moved into place, `torch_ude.atomic`):

* at fit start, stale ``field.pt``/``field.json`` of an earlier run in the folder are
  deleted and ``metrics.json`` says ``"status": "running"``; a run killed from here on
  leaves exactly that behind, never an earlier run's model that looks current, and
  ``torch-ude fit`` run again in the folder resumes it (`torch_ude.training.run_folder`);
* at the end, ``field.pt`` and ``field.json`` are written, then ``metrics.json`` with
  ``"status": "finished"`` and the metrics, or ``"degraded"`` for a streaming run whose
  quality indicators say it learned from a stream it could not trust
  (`torch_ude.training.quality`);
* a run that ends without a trained model (see the trainers) writes ``metrics.json``
  with ``"status": "failed"`` and the ``reason``, and no ``field.pt``/``field.json``.

Every ``metrics.json`` and ``field.json`` records the trainer, the seed, the run
config, the torch-ude and torch versions and the start time.
"""
from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable
import json
import math
from pathlib import Path

import lightning as L
import numpy as np
import torch
from matplotlib.figure import Figure

from .. import __version__
from ..atomic import write_text_atomic
from ..export import FIELD_FILE, SIDECAR_FILE, export_field
from ..field import HybridField
from ..systems.base import System

__all__ = ["METRIC_KEYS", "METRICS_FILE", "RunOutputs", "residual_figure", "to_jsonable", "tensor_bytes"]

METRICS_FILE = "metrics.json"
METRIC_KEYS = ("e_field", "e_field_visited", "c_hat", "sigma_hat", "m", "lambda2", "reject_rate", "updates",
               "wall_s")


def to_jsonable(value: object) -> object:
    """Convert tensors, arrays, dataclasses, tuples, plants and non-finite floats for JSON."""
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
    if isinstance(value, System):
        return to_jsonable(value.spec())
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


class RunOutputs:
    """The output files of one run in its folder (see the module doc).

    Args:
        directory: the run folder (``trainer.default_root_dir``), created if missing.
        trainer: the trainer's name, recorded in both JSON files.
        system: the plant, or None for a trainer whose model is not a `System`'s field
            (PEM-MHE); `finish` then needs its own writer (`finish_with`).
        case: the known-model case (None without a ``system``).
        seed: the seed that fixed the stream and the initial weights.
        config: the run's settings (JSON-serializable after `to_jsonable`).
        plant: the plant's name in the records (default: the system's class name).
    """

    def __init__(self, directory: str | Path, trainer: str, system: System | None, case: str | None, seed: int,
                 config: dict, plant: str | None = None) -> None:
        self.directory = Path(directory)
        self.system, self.case = system, case
        self.record = {
            "trainer": trainer, "plant": plant or type(system).__name__, "case": case, "seed": int(seed),
            "config": to_jsonable(config), "library_version": __version__, "torch_version": torch.__version__,
            "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        }

    @classmethod
    def of(cls, module: L.LightningModule, trainer: str) -> RunOutputs:
        """The outputs of ``module``'s run: its trainer's folder, its data module's plant, case,
        seed and settings (``config()``), its hyperparameters and ``trainer.max_steps``."""
        dm = module.trainer.datamodule
        config = {"model": dict(module.hparams), "data": dm.config(), "max_steps": module.trainer.max_steps}
        return cls(module.trainer.default_root_dir, trainer, dm.system, dm.case, dm.seed, config)

    @property
    def metrics_path(self) -> Path:
        """``metrics.json`` of this run."""
        return self.directory / METRICS_FILE

    def _write_metrics(self, status: str, extra: dict) -> Path:
        payload = {"status": status, **self.record, **extra}
        return write_text_atomic(self.metrics_path, json.dumps(to_jsonable(payload), indent=2) + "\n")

    def _remove_field(self) -> None:
        for name in (FIELD_FILE, SIDECAR_FILE):
            (self.directory / name).unlink(missing_ok=True)

    def start(self) -> Path:
        """Delete an earlier run's field files and write ``metrics.json`` with ``"status": "running"``."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self._remove_field()
        return self._write_metrics("running", {})

    def finish(self, field: HybridField, metrics: dict, status: str = "finished") -> dict[str, Path]:
        """Write ``field.pt`` and ``field.json``, then ``metrics.json`` with ``"status": "finished"``.

        Args:
            field: the trained field to export (the EMA weights where a trainer averages).
            metrics: must contain every key of `METRIC_KEYS` (None where not applicable).
            status: the status to record: ``"finished"``, or ``"residual rejected"`` for a run
                that exports its physics alone (`torch_ude.training.JetMatchingModule.check_residual`).

        Returns:
            Paths of the three files (``"field"``, ``"sidecar"``, ``"metrics"``).

        Raises:
            KeyError: if a required metric key is missing.
        """
        return self.finish_with(lambda folder, extra: export_field(field, folder, self.system, self.case, extra=extra),
                                metrics, status)

    def finish_with(self, write_field: Callable[[Path, dict], tuple[Path, Path]], metrics: dict,
                    status: str = "finished") -> dict[str, Path]:
        """`finish` with another exporter: ``write_field(folder, extra)`` writes ``field.pt`` and
        ``field.json`` (atomically, recording ``extra``: trainer, seed, config, start time) and
        returns their paths; then ``metrics.json`` says ``"status": "finished"``.

        Raises:
            KeyError: if a key of `METRIC_KEYS` is missing from ``metrics``.
        """
        missing = [k for k in METRIC_KEYS if k not in metrics]
        if missing:
            raise KeyError(f"metrics.json must contain {list(METRIC_KEYS)}; missing {missing}.")
        extra = {k: self.record[k] for k in ("trainer", "seed", "config", "started")}
        if status != "finished":
            extra["status"] = status
        if metrics.get("physical_parameters"):
            extra["physical_parameters"] = metrics["physical_parameters"]
        pt, js = write_field(self.directory, extra)
        return {"field": pt, "sidecar": js, "metrics": self._write_metrics(status, metrics)}

    def fail(self, reason: str, metrics: dict | None = None) -> Path:
        """Remove any field files and write ``metrics.json`` with ``"status": "failed"`` and ``reason``."""
        self._remove_field()
        return self._write_metrics("failed", {"reason": reason, **(metrics or {})})


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

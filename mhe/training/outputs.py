"""Run outputs of a PEM-MHE fit: ``field.pt``, ``field.json`` and ``metrics.json``, with the
status protocol, atomic writes and records of every trainer (`torch_ude.training.outputs`).

The project's `torch_ude.export.export_field` exports a ``HybridField`` of an autonomous
plant; an identified state-space model has inputs, so ``field.pt`` here is the
TorchScript of ``(x, u) -> f_c(x, u, 0)`` (shapes (B, n_x), (B, n_u) -> (B, n_x)) with a
sidecar in the same spirit; a residual with a trust envelope (`mhe.models.envelope`) has it in both: the fade in
the program, the box (``"envelope"``: columns, low, high, margin in ``z = [x, u] / in_scale``, the
scales, and the span of the raw inputs it was recorded from) in the sidecar, as
`torch_ude.export` records a field's. ``metrics.json`` carries the project's `METRIC_KEYS`
(null where they do not apply to PEM-MHE) plus the identification results.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import torch
from torch import Tensor, nn

from torch_ude import __version__
from torch_ude.atomic import atomic_path, write_text_atomic
from torch_ude.export import FIELD_FILE, MHE_FORMAT, SIDECAR_FILE
from torch_ude.training.data import run_seed
from torch_ude.training.outputs import METRIC_KEYS, RunOutputs, to_jsonable

from ..models.model import StateSpaceModel
from ..data.input_history import history_names
from ..estimator.estimator import MovingHorizonEstimator
from ..identification import IdentificationProblem
from ..outer.report import PEMResult
from ..outer.residual_check import without_residual

__all__ = ["pem_outputs", "write_pem_outputs"]


class _Field(nn.Module):
    def __init__(self, model: StateSpaceModel) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: Tensor, u: Tensor) -> Tensor:
        return self.model.field(x, u, torch.zeros_like(x))


def pem_outputs(directory: str | Path, problem: IdentificationProblem, config: dict[str, object]) -> RunOutputs:
    """The run files of a PEM run in ``directory`` (`torch_ude.training.outputs.RunOutputs`: marked
    running at the start, written atomically, recording the seed, settings and versions).

    Args:
        directory: the run folder.
        problem: the identification problem (its settings are recorded).
        config: the front-end's settings (``outer``, ``solver``).
    """
    physics = problem.physics
    return RunOutputs(directory, "pem_mhe", None, None, run_seed(), {**config, "problem": problem.describe()},
                      plant=None if physics is None else type(physics).__name__)


def write_pem_outputs(outputs: RunOutputs, estimator: MovingHorizonEstimator, result: PEMResult
                      ) -> dict[str, Path]:
    """Write ``field.pt``, ``field.json`` and ``metrics.json`` (``"status": "finished"``) of a PEM run.

    Both front-ends call this (the CLI's module and the benchmark's in-process identifier),
    so one experiment leaves the same files whichever way it ran. ``metrics.json`` holds the residual check's
    report (``"residual_check"``, null without a check); where the check rejected the residual
    (`PEMResult.residual_rejected`) the status is ``"residual rejected"`` and the files hold the physics alone
    (`mhe.outer.residual_check.without_residual`: no residual, no envelope), as a jet-matching run exports its
    physics alone (`torch_ude.training.JetMatchingModule.check_residual`).

    Args:
        outputs: the run's files (`pem_outputs`, started).
        estimator: the identified MHE (its model is exported).
        result: the run's `PEMResult`.

    Returns:
        Paths of ``field.pt``, ``field.json`` and ``metrics.json``.
    """
    c = result.counters
    metrics = {k: None for k in METRIC_KEYS}
    metrics.update(updates=c.updates, wall_s=result.wall_s)
    metrics.update({"steps": c.steps, "J_final": result.loss, "parameters": result.parameters,
                    "rel_errors": result.rel_errors, "mean_rel_error": result.mean_rel_error,
                    "failed_windows_total": c.failed, "failed_trial_windows_total": c.failed_trials,
                    "skipped_steps": c.skipped, "stop_reason": result.stop_reason, "criteria": result.criteria,
                    "envelope": result.envelope, "residual_check": result.residual_check})
    rejected = result.residual_rejected
    model = without_residual(estimator.model) if rejected else estimator.model
    return outputs.finish_with(lambda folder, extra: _export_model(folder, estimator, extra, result.envelope, model),
                               metrics, "residual rejected" if rejected else "finished")


def _lags(model: StateSpaceModel) -> int:
    """The previous samples of input history the model's inputs hold (`mhe.data.input_history`)."""
    n_u = model.physics.n_u
    return model.n_u // n_u - 1 if n_u else 0


def _envelope_record(model: StateSpaceModel, recorded: dict | None) -> dict | None:
    """``field.json``'s ``"envelope"``: the run's record (`mhe.models.envelope.record_envelope`), else the residual's box."""
    net = model.residual
    if net is None or net.envelope is None:
        return None
    if recorded is not None:
        return {k: v for k, v in recorded.items() if k != "windows"}
    n_x = net.n_x
    low, high, margin = (t.tolist() for t in net.envelope)
    return {"columns": [f"x{i}/s" for i in range(n_x)] + [f"u{j}/s" for j in range(net.n_u)], "low": low,
            "high": high, "margin": margin, "in_scale": net.in_scale[:n_x].tolist(),
            "input_scale": net.in_scale[n_x:].tolist()}


def _export_model(out: Path, estimator: MovingHorizonEstimator, extra: dict, envelope: dict | None = None,
                  model: StateSpaceModel | None = None) -> tuple[Path, Path]:
    """Write ``field.pt`` and ``field.json`` of ``model`` (None: the estimator's own; or its physics alone) with the
    estimator's arrival cost."""
    model = estimator.model if model is None else model
    example = (torch.ones(2, model.n_x, dtype=torch.float64), torch.zeros(2, model.n_u, dtype=torch.float64))
    with torch.no_grad(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        with atomic_path(out / FIELD_FILE) as tmp:
            torch.jit.trace(_Field(model).eval(), example, check_trace=False).save(str(tmp))
    physics = model.physics
    sidecar = {
        "format": MHE_FORMAT, "library_version": __version__, "torch_version": torch.__version__,
        "physics": None if physics is None else type(physics).__name__,
        "state_names": None if physics is None else list(physics.state_names),
        "input_names": None if physics is None else history_names(physics.input_names, _lags(model)),
        "measured": list(model.measured), "dt": model.dt,
        "parameters": {} if physics is None else {n: float(v.detach()) for n, v in physics.params().items()},
        "identified": [] if physics is None else list(physics.params.free_names),
        "output_map": None if model.output_map is None else {
            "class": type(model.output_map).__name__,
            "parameters": {n: float(v.detach()) for n, v in model.output_map.params().items()},
            "identified": list(model.output_map.params.free_names)},
        "residual_sizes": None if model.residual is None else list(model.residual.mlp.sizes),
        "num_parameters": sum(p.numel() for p in model.parameters())
        + estimator.arrival_mean_raw.numel() + estimator.arrival_std_raw.numel(),
        "arrival": {"mean": estimator.arrival_mean.detach().tolist(), "std": estimator.arrival_std().detach().tolist()},
        "input": {"shape": [["B", model.n_x], ["B", model.n_u]], "meaning": "states, inputs"},
        "output": {"shape": ["B", model.n_x], "meaning": "f_c(x, u, w=0)"},
        "extra": to_jsonable(extra),
    }
    record = _envelope_record(model, envelope)
    if record is not None:  # the residual's trust envelope (mhe.models.envelope), also inside field.pt's program
        sidecar["envelope"] = record
    write_text_atomic(out / SIDECAR_FILE, json.dumps(sidecar, indent=2) + "\n")
    return out / FIELD_FILE, out / SIDECAR_FILE

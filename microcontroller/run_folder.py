"""Read a trained run's folder for fine-tuning on the device (``generate --run``).

`read_run` checks what the C port needs before anything is built: a readable ``field.json``
of the jet-matching trainers (not a PEM-MHE model), a simulated plant (any importable
`System`: its known field is generated as C, `microcontroller.plant_code`; not a recorded
log), a network that reads the states (scaled; periodic ones as (sin, cos), invariant ones
not at all; with the residual's linear term ``L z`` or without it), and a ``field.pt`` whose
weights match the sidecar. Every refusal is one sentence naming the file and the fix.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

from torch_ude.export import FIELD_FILE, SIDECAR_FILE, load_field
from torch_ude.field import HybridField
from torch_ude.systems import System

__all__ = ["read_run"]

_RECORDED = "torch_ude.training.recorded.RecordedPlant"  # a recorded log's plant (no simulation, inputs)
_FIX = "point --run at the folder of a `torch-ude fit` run of the jet-matching trainer"
_UNSUPPORTED = (  # sidecar entries of networks the C port does not implement: (key, what, setting)
    ("input_affine", "inputs entering the residual affinely", "no known inputs"),
    ("input_names", "known inputs", "no known inputs"),
)


def _sidecar(path: Path) -> dict:
    try:
        sidecar = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path} is not valid JSON ({err}); export the run again, or {_FIX}.") from None
    fmt = sidecar.get("format") if isinstance(sidecar, dict) else None
    if fmt != "torch-ude-field":
        what = "a PEM-MHE model" if fmt == "torch-ude-mhe-model" else f"no torch-ude field (format {fmt!r})"
        raise ValueError(f"{path} describes {what}, not a jet-matching field; the C port fine-tunes the hybrid "
                         f"field of the jet-matching trainer: {_FIX}.")
    missing = [k for k in ("plant", "case", "layer_sizes", "in_scale", "out_scale") if k not in sidecar]
    if missing:
        raise ValueError(f"{path} lacks {missing}; export the run again, or {_FIX}.")
    return sidecar


def _system(path: Path, sidecar: dict) -> System:
    plant = sidecar["plant"] if isinstance(sidecar["plant"], dict) else {}
    if plant.get("class_path") == _RECORDED:
        raise ValueError(
            f"{path}: the run trained plant {plant.get('class_path')!r} (case {sidecar['case']!r}); the C port "
            f"fine-tunes fields of simulated plants only (a recorded log's inputs are issue 32, item 2); fine-tune "
            f"this field with the Python trainer, or {_FIX} on a simulated plant.")
    try:
        return System.from_spec(plant)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{path}: the plant {plant.get('class_path')!r} cannot be rebuilt ({err}); export the run "
                         f"again (its plant's package must be importable), or {_FIX}.") from None


def _layers(state: dict[str, torch.Tensor]) -> list[int]:
    """Layer widths of the MLP weights in a state dict (weight0, weight1, ...)."""
    weights = [state[f"weight{k}"] for k in range(len(state)) if f"weight{k}" in state]
    return [int(weights[0].shape[1]), *(int(w.shape[0]) for w in weights)] if weights else []


def read_run(folder: str | Path) -> tuple[System, str, HybridField]:
    """The plant, case and trained field (float64, its weights and scales) of a run folder.

    Raises:
        FileNotFoundError: if ``field.pt`` or ``field.json`` is missing.
        ValueError: for a sidecar that is not JSON or not a jet-matching field's, a plant
            that cannot be rebuilt or a recorded log's, a network the C port does not
            implement, or a ``field.pt`` that cannot be read or does not match the sidecar.
    """
    folder = Path(folder)
    pt_path, json_path = folder / FIELD_FILE, folder / SIDECAR_FILE
    for p in (pt_path, json_path):
        if not p.is_file():
            raise FileNotFoundError(f"{p} does not exist; {_FIX} (it holds {FIELD_FILE} and {SIDECAR_FILE}).")
    sidecar = _sidecar(json_path)
    for key, what, setting in _UNSUPPORTED:
        if sidecar.get(key):
            raise ValueError(f"the field in {folder} has {what} ({SIDECAR_FILE}: \"{key}\": "
                             f"{json.dumps(sidecar[key])}), which the C port does "
                             f"not implement; fine-tune it with the Python trainer, or train the device's field with "
                             f"{setting}.")
    system, case = _system(json_path, sidecar), sidecar["case"]
    try:
        module, _ = load_field(folder)
    except (RuntimeError, ValueError, OSError) as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"{pt_path} is not a readable TorchScript field ({reason}): it is truncated or was not "
                         f"written by torch_ude.export; export the run again, or {_FIX}.") from None
    sizes = [int(s) for s in sidecar["layer_sizes"]]
    try:
        field = HybridField(system.known_field(case), hidden=tuple(sizes[1:-1]), linear=bool(sidecar.get("linear")),
                            periodic=sidecar.get("periodic", ()), invariant=sidecar.get("invariant", ()))
    except ValueError as err:
        raise ValueError(f"{json_path}: {err} Export the run again, or {_FIX}.") from None
    state = {k.rpartition("mlp.")[2]: v for k, v in module.state_dict().items() if "mlp." in k}
    if {k: tuple(v.shape) for k, v in state.items()} != {k: tuple(p.shape) for k, p in field.mlp.named_parameters()}:
        raise ValueError(f"{pt_path} holds a network of layers {_layers(state)}, but {json_path} describes "
                         f"{type(system).__name__} case {case} with layers {sizes}: the two files come from "
                         f"different runs; copy both from one run folder.")
    with torch.no_grad():
        for name, p in field.mlp.named_parameters():
            p.copy_(state[name].to(p.dtype))
    scales = [torch.tensor(sidecar[k], dtype=torch.float64) for k in ("in_scale", "out_scale")]
    if any(s.shape != (field.n_states,) for s in scales):
        raise ValueError(f"{json_path}: in_scale and out_scale must hold {field.n_states} values each (the states of "
                         f"{type(system).__name__}); export the run again, or {_FIX}.")
    field.set_scales(*scales)
    return system, case, field

"""Export a trained field as TorchScript plus a JSON sidecar; every trainer writes these.

``field.pt`` maps a ``(N, n)`` float tensor of states to ``(N, n)`` values of
``F(x)``; ``field.json`` records the plant, the case, the calibration scales, the
layer sizes and the library version, from which the C port is generated.
TorchScript is deprecated upstream in favour of ``torch.export``; it is kept here
because a traced file loads in any libtorch without Python, and its deprecation
warnings are silenced around the two calls that trigger them.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import torch
from torch import Tensor, nn

from . import __version__
from .field import HybridField
from .systems.base import System

__all__ = ["export_field", "load_field", "FIELD_FILE", "SIDECAR_FILE"]

FIELD_FILE = "field.pt"
SIDECAR_FILE = "field.json"


class _FieldProgram(nn.Module):
    """The traced program: ``F(x)`` with no validation branches baked in."""

    def __init__(self, field: HybridField) -> None:
        super().__init__()
        self.field = field

    def forward(self, x: Tensor) -> Tensor:
        return self.field.evaluate(x)


def export_field(field: HybridField, directory: str | Path, system: System, case: str,
                 extra: dict | None = None) -> tuple[Path, Path]:
    """Write ``field.pt`` (TorchScript) and ``field.json`` (sidecar) into ``directory``.

    Args:
        field: the trained field (its current weights are exported; pass EMA weights).
        directory: output folder, created if missing.
        system: the plant the field was trained on.
        case: the case of its known model.
        extra: further JSON-serializable metadata (trainer name, config, ...).

    Returns:
        The paths of the TorchScript file and the sidecar.
    """
    case = system.check_case(case)
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    dtype = field.in_scale.dtype
    example = torch.zeros(4, field.n_states, dtype=dtype)
    pt_path, json_path = out / FIELD_FILE, out / SIDECAR_FILE
    with torch.no_grad(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*deprecated", category=DeprecationWarning)
        traced = torch.jit.trace(_FieldProgram(field).eval(), example, check_trace=False)
        traced.save(str(pt_path))
    sidecar = {
        "format": "torch-ude-field",
        "library_version": __version__,
        "plant": {"class_path": f"{type(system).__module__}.{type(system).__qualname__}",
                  "init_args": system.init_args()},
        "case": case,
        "state_names": list(system.state_names),
        "layer_sizes": list(field.mlp.sizes),
        "activation": "tanh",
        "num_parameters": field.num_parameters(),
        "in_scale": field.in_scale.tolist(),
        "out_scale": field.out_scale.tolist(),
        "dtype": str(dtype).removeprefix("torch."),
        "input": {"shape": ["N", field.n_states], "meaning": "states"},
        "output": {"shape": ["N", field.n_states], "meaning": "F(x) = f_known(x) + N_theta(x)"},
    }
    if extra:
        sidecar["extra"] = extra
    json_path.write_text(json.dumps(sidecar, indent=2) + "\n")
    return pt_path, json_path


def load_field(directory: str | Path) -> tuple[torch.jit.ScriptModule, dict]:
    """Load an exported field.

    Args:
        directory: the folder holding ``field.pt`` and ``field.json``.

    Returns:
        ``(module, sidecar)``: the TorchScript module, ``(N, n) -> (N, n)``, and the
        sidecar dictionary.

    Raises:
        FileNotFoundError: if either file is missing.
    """
    folder = Path(directory)
    pt_path, json_path = folder / FIELD_FILE, folder / SIDECAR_FILE
    for p in (pt_path, json_path):
        if not p.is_file():
            raise FileNotFoundError(f"{p} does not exist; export a field there with export_field().")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*deprecated", category=DeprecationWarning)
        module = torch.jit.load(str(pt_path))
    return module, json.loads(json_path.read_text())

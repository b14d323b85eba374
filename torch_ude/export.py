"""Export a trained field as TorchScript plus a JSON sidecar; every trainer writes these.

``field.pt`` maps a ``(N, n)`` tensor of states, in the dtype the field was trained
in, to ``(N, n)`` values of ``F(x)``; any other shape or dtype raises a one-line
``ValueError``/``TypeError`` message (from Python it arrives as a ``torch.jit.Error``
whose last line is that message). ``field.json`` records the plant, the case, the
calibration scales, the layer sizes and the library and torch versions, from which the
C port is generated. Both files are written atomically (a temporary file moved into
place), so a reader never sees a half-written one.
A field with recorded inputs (``F(x, u)``) is exported as a map of ``(N, n + n_u)`` rows,
the states then the inputs, to ``(N, n)`` values; the sidecar says so and records the
input scales.
A field that reads periodic states as ``(sin, cos)`` records their indices (``"periodic"``), and
one with a trust envelope records it (``"envelope"``: its box and fade band per network input
column, `torch_ude.envelope`); both are inside the TorchScript program too.
A field with the residual's linear term (``HybridField(..., linear=True)``) exports to
TorchScript like any other; its sidecar says ``"linear": true`` (and ``"input_affine": true``
when the inputs enter through it alone), and the C port (`microcontroller.generate`), which has
no linear term, refuses it.
TorchScript is deprecated upstream in favour of ``torch.export``; it is kept here
because a TorchScript file loads in any libtorch without Python, and its deprecation
warnings are silenced around the calls that trigger them.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import torch
from torch import Tensor, nn

from . import __version__
from .atomic import atomic_path, write_text_atomic
from .field import HybridField
from .systems.base import System

__all__ = ["export_field", "load_field", "FIELD_FILE", "SIDECAR_FILE"]

FIELD_FILE = "field.pt"
SIDECAR_FILE = "field.json"


class _FieldProgram(nn.Module):
    """The traced program: ``F(x)`` with no validation branches (tracing would freeze them)."""

    def __init__(self, field: HybridField) -> None:
        super().__init__()
        self.field = field

    def forward(self, x: Tensor) -> Tensor:
        n = self.field.n_states
        if self.field.n_inputs:
            return self.field.evaluate_unchecked(x[:, :n], x[:, n:])
        return self.field.evaluate_unchecked(x)


def _dtype_name(dtype: torch.dtype) -> str:
    """The name of a dtype in TorchScript, where ``str(dtype)`` is a number."""
    names = [(torch.float64, "torch.float64"), (torch.float32, "torch.float32"), (torch.float16, "torch.float16"),
             (torch.bfloat16, "torch.bfloat16"), (torch.int64, "torch.int64"), (torch.int32, "torch.int32"),
             (torch.bool, "torch.bool"), (torch.complex128, "torch.complex128")]
    for d, name in names:
        if dtype == d:
            return name
    return "a non-float dtype"


class _CheckedProgram(nn.Module):
    """The saved program: the shape and dtype check, scripted, around the traced field."""

    def __init__(self, program: torch.jit.ScriptModule, n_states: int, dtype: torch.dtype) -> None:
        super().__init__()
        self.program = program
        self.n_states = n_states
        self.dtype = dtype
        self.dtype_name = str(dtype)

    def forward(self, x: Tensor) -> Tensor:
        if x.dim() != 2 or x.size(1) != self.n_states:
            raise ValueError("field.pt: the states must have shape (N, " + str(self.n_states) + "); got shape "
                             + str(x.shape) + ". A single state reshapes with x.reshape(1, -1).")
        if x.dtype != self.dtype:
            raise TypeError("field.pt: the states must be " + self.dtype_name + " (the dtype the field was "
                            "exported in); got " + _dtype_name(x.dtype) + ". Convert them with x.to("
                            + self.dtype_name + ").")
        return self.program(x)


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
    width = field.n_states + field.n_inputs
    example = torch.zeros(4, width, dtype=dtype)
    pt_path, json_path = out / FIELD_FILE, out / SIDECAR_FILE
    with torch.no_grad(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*deprecated", category=DeprecationWarning)
        traced = torch.jit.trace(_FieldProgram(field).eval(), example, check_trace=False)
        program = torch.jit.script(_CheckedProgram(traced, width, dtype))
        with atomic_path(pt_path) as tmp:
            program.save(str(tmp))
    sidecar = {
        "format": "torch-ude-field",
        "library_version": __version__,
        "torch_version": torch.__version__,
        "plant": system.spec(),
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
    if field.input_map.periodic:  # only when present: the sidecar of a plain field is unchanged
        sidecar["periodic"] = list(field.input_map.periodic)
    if field.input_map.invariant:
        sidecar["invariant"] = list(field.input_map.invariant)
    if field.envelope is not None:
        low, high, margin = field.envelope
        inputs = tuple(getattr(system, "input_names", ()))
        sidecar["envelope"] = {"columns": field.input_map.columns(system.state_names, inputs), "low": low.tolist(),
                               "high": high.tolist(), "margin": margin.tolist()}
    if field.linear:
        sidecar["linear"] = True
    if field.input_affine:
        sidecar["input_affine"] = True
    if field.n_inputs:
        sidecar["input_names"] = list(getattr(system, "input_names", ()))
        sidecar["input_scale"] = field.input_scale.tolist()
        sidecar["input"] = {"shape": ["N", width], "meaning": "states, then inputs"}
        sidecar["output"] = {"shape": ["N", field.n_states], "meaning": "F(x, u) = f_known(x, u) + N_theta(x, u)"}
    if extra:
        sidecar["extra"] = extra
    write_text_atomic(json_path, json.dumps(sidecar, indent=2) + "\n")
    return pt_path, json_path


def load_field(directory: str | Path) -> tuple[torch.jit.ScriptModule, dict]:
    """Load an exported field.

    Args:
        directory: the folder holding ``field.pt`` and ``field.json``.

    Returns:
        ``(module, sidecar)``: the TorchScript module, ``(N, n) -> (N, n)`` in the
        sidecar's ``dtype`` (it rejects other shapes and dtypes, see the module doc), and
        the sidecar dictionary.

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

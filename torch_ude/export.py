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
`load_field` returns a `LoadedField`: ``F(x, u)`` on separate states and inputs, RK4 rollouts with a
recorded input, and the interface `torch_ude.prediction` scores (it also unpacks as ``(program, sidecar)``).
TorchScript is deprecated upstream in favour of ``torch.export``; it is kept here
because a TorchScript file loads in any libtorch without Python, and its deprecation
warnings are silenced around the calls that trigger them.
"""
from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import NamedTuple

import torch
from torch import Tensor, nn

from . import __version__
from .atomic import atomic_path, write_text_atomic
from .envelope import outside as envelope_outside
from .field import HybridField
from .input_map import InputMap
from .prediction import rk4_input_rollout
from .systems.base import System, check_states

__all__ = ["export_field", "load_field", "same_weights", "LoadedField", "FIELD_FILE", "SIDECAR_FILE", "MHE_FORMAT"]

FIELD_FILE = "field.pt"
SIDECAR_FILE = "field.json"
#: ``field.json``'s ``format`` of a PEM-MHE model (`mhe.training.outputs`): its program takes the states and the
#: inputs as two arguments, ``(B, n), (B, n_u) -> (B, n)``, in float64.
MHE_FORMAT = "torch-ude-mhe-model"


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


def _no_model(folder: Path, missing: Path) -> str:
    """Why ``folder`` holds no exported field: its run's ``metrics.json`` status, or no run at all."""
    metrics = folder / "metrics.json"
    try:
        record = json.loads(metrics.read_text()) if metrics.is_file() else None
    except (OSError, ValueError):
        record = None
    status = record.get("status") if isinstance(record, dict) else None
    if status == "failed":
        return (f"the run in {folder} has no trained model: its metrics.json says \"failed\" ({record.get('reason')}); "
                f"train it again (torch-ude fit) before loading or scoring it.")
    if status == "running":
        return (f"the run in {folder} has no trained model yet: its metrics.json says \"running\" (a run in progress, "
                f"or one that was killed: run its torch-ude fit command again to resume it).")
    return f"{missing} does not exist; export a field there with export_field() (every torch-ude fit run writes one)."


class LoadedField(NamedTuple):
    """An exported field as a user object: ``F(x, u)`` on separate states and inputs, rollouts, and the
    interface `torch_ude.prediction.prediction_errors` reads (``evaluate_unchecked``, ``n_states``,
    ``n_inputs``, ``dtype``, ``input_map``, ``envelope``, ``outside``).

    It unpacks as ``(program, sidecar)``, the pair `load_field` returned before it was an object.

    Attributes:
        program: the TorchScript program of ``field.pt``: ``(N, n + n_u)`` rows (states, then
            inputs) in `dtype` -> ``(N, n)`` time derivatives; for a PEM-MHE model (``format``
            `MHE_FORMAT`) the states ``(N, n)`` and inputs ``(N, n_u)`` as two arguments.
        sidecar: ``field.json`` as a dictionary (plant, scales, layer sizes, envelope, run settings).
    """

    program: torch.jit.ScriptModule
    sidecar: dict

    @property
    def n_states(self) -> int:
        """``n``, the states."""
        return len(self.sidecar["state_names"])

    @property
    def n_inputs(self) -> int:
        """``n_u``, the recorded inputs (0 for an autonomous field)."""
        return len(self.sidecar.get("input_names", ()))

    @property
    def state_names(self) -> tuple[str, ...]:
        """The state names, in the field's order."""
        return tuple(self.sidecar["state_names"])

    @property
    def input_names(self) -> tuple[str, ...]:
        """The input names, in the field's order (empty without inputs)."""
        return tuple(self.sidecar.get("input_names", ()))

    @property
    def dtype(self) -> torch.dtype:
        """The dtype the program computes in (its states and inputs must have it; a PEM-MHE model's is float64)."""
        return getattr(torch, self.sidecar.get("dtype", "float64"))

    @property
    def separate_inputs(self) -> bool:
        """Whether the program takes states and inputs as two arguments (a PEM-MHE model, `MHE_FORMAT`)."""
        return self.sidecar.get("format") == MHE_FORMAT

    @property
    def input_map(self) -> InputMap:
        """The network's input map ``z = phi(x, u)`` (`torch_ude.input_map`): periodic and invariant states."""
        return InputMap(self.n_states, self.n_inputs, self.sidecar.get("periodic", ()),
                        self.sidecar.get("invariant", ()))

    @property
    def envelope(self) -> tuple[Tensor, Tensor, Tensor] | None:
        """``(low, high, margin)`` of the trust envelope in the network's inputs ``z`` (each (width,)), or None."""
        env = self.sidecar.get("envelope")
        if env is None:
            return None
        return tuple(torch.tensor(env[k], dtype=self.dtype) for k in ("low", "high", "margin"))

    def _check(self, x: object, u: object) -> None:
        check_states(x, self.n_states, "x", dtype=self.dtype)
        if self.n_inputs == 0:
            if u is not None:
                raise ValueError("u was given but this field has no inputs (it computes F(x)); call it with x alone.")
            return
        if u is None:
            raise ValueError(f"this field reads {self.n_inputs} recorded input(s) {list(self.input_names)}: pass u of "
                             f"shape (N, {self.n_inputs}) beside the states.")
        check_states(u, self.n_inputs, "u", dtype=self.dtype)
        if u.shape[0] != x.shape[0]:
            raise ValueError(f"u must have one row per state: {x.shape[0]} rows; got {u.shape[0]}.")

    def evaluate(self, x: Tensor, u: Tensor | None = None) -> Tensor:
        """``F(x, u)`` (``F(x)`` without inputs), validated.

        Args:
            x: states, (N, n), in `dtype`, finite.
            u: inputs, (N, n_u), in `dtype`; None for a field without inputs.

        Returns:
            Time derivatives of the states, (N, n) (units of the states per second).

        Raises:
            TypeError, ValueError: for a wrong shape, dtype or non-finite value (one line each).
        """
        self._check(x, u)
        return self.evaluate_unchecked(x, u)

    __call__ = evaluate

    def evaluate_unchecked(self, x: Tensor, u: Tensor | None = None) -> Tensor:
        """`evaluate` without validation, for the library's loops (the program still checks shape and dtype)."""
        with torch.no_grad():
            if self.separate_inputs:
                return self.program(x, u if u is not None else x.new_zeros(x.shape[0], 0))
            return self.program(x if u is None or self.n_inputs == 0 else torch.cat((x, u), dim=1))

    def outside(self, x: Tensor, u: Tensor | None = None) -> Tensor:
        """Which states (N, n) [with inputs (N, n_u)] lie outside the trust envelope, (N,) bool; all False
        without one (`torch_ude.envelope.outside`)."""
        env = self.envelope
        if env is None:
            return torch.zeros(x.shape[0], dtype=torch.bool)
        record = self.sidecar["envelope"]  # a PEM-MHE model's envelope carries its residual's scales (mhe.models.envelope)
        scale = torch.tensor(record.get("in_scale", self.sidecar.get("in_scale")), dtype=self.dtype)
        u_scale = (torch.tensor(record.get("input_scale", self.sidecar.get("input_scale")), dtype=self.dtype)
                   if self.n_inputs else None)
        return envelope_outside(self.input_map(x, u if self.n_inputs else None, scale, u_scale), env[0], env[1])

    def rollout(self, x0: Tensor, inputs: Tensor | None, h: float, steps: int | None = None) -> Tensor:
        """Simulate from ``x0`` with recorded inputs by classical RK4 (inputs interpolated linearly over a
        step, `torch_ude.prediction.rk4_input_rollout`).

        Args:
            x0: the initial state, (n,) or (B, n), in `dtype`.
            inputs: the inputs at the step times ``t_0 .. t_K``, (K + 1, n_u) or (K + 1, B, n_u); None
                for a field without inputs (then ``steps`` gives K).
            h: the step in s (the log's sample period: ``1 / fs``).
            steps: K for a field without inputs; ignored otherwise.

        Returns:
            The trajectory including ``x0``, (K + 1, n) or (K + 1, B, n).

        Raises:
            ValueError, TypeError: for shapes, dtypes or a step that do not fit the field.
        """
        single = x0.dim() == 1
        x = x0.reshape(1, -1) if single else x0
        check_states(x, self.n_states, "x0", dtype=self.dtype)
        if not (isinstance(h, (int, float)) and math.isfinite(h) and h > 0):
            raise ValueError(f"h (the step in s) must be a positive number; got {h!r}.")
        if self.n_inputs:
            if inputs is None:
                raise ValueError(f"this field reads {self.n_inputs} input(s): pass inputs of shape (K + 1, "
                                 f"{self.n_inputs}) at the step times.")
            u = inputs.unsqueeze(1) if single and inputs.dim() == 2 else inputs
            if u.dim() != 3 or u.shape[1:] != (x.shape[0], self.n_inputs) or u.dtype != self.dtype:
                raise ValueError(f"inputs must have shape (K + 1, {self.n_inputs}) for one state or (K + 1, B, "
                                 f"{self.n_inputs}) for B states, in {self.dtype}; got {tuple(inputs.shape)}, "
                                 f"{inputs.dtype}.")
        else:
            if steps is None or int(steps) < 1:
                raise ValueError("a field without inputs needs steps (K >= 1) to simulate.")
            u = torch.zeros(int(steps) + 1, x.shape[0], 0, dtype=self.dtype)
        traj = rk4_input_rollout(self.evaluate_unchecked, x, u, float(h))
        return traj[:, 0] if single else traj


def load_field(path: str | Path) -> LoadedField:
    """Load an exported field as a user object (`LoadedField`).

    Args:
        path: a run folder holding ``field.pt`` and ``field.json``, or the path of either file.

    Returns:
        The `LoadedField`; ``program, sidecar = load_field(path)`` unpacks it into the TorchScript
        module (rows of states then inputs, in the sidecar's ``dtype``) and the sidecar dictionary.

    Raises:
        FileNotFoundError: if either file is missing; for a run folder whose ``metrics.json`` says
            ``"failed"`` or ``"running"``, the message says the run has no trained model and why.
    """
    given = Path(path)
    folder = given.parent if given.name in (FIELD_FILE, SIDECAR_FILE) and given.is_file() else given
    pt_path, json_path = folder / FIELD_FILE, folder / SIDECAR_FILE
    for p in (pt_path, json_path):
        if not p.is_file():
            raise FileNotFoundError(_no_model(folder, p))
    return LoadedField(_load_program(pt_path), json.loads(json_path.read_text()))


def _load_program(pt_path: Path) -> torch.jit.ScriptModule:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*deprecated", category=DeprecationWarning)
        return torch.jit.load(str(pt_path))


def same_weights(a: str | Path, b: str | Path) -> bool:
    """Whether two run folders exported the same field weights, to the last bit (e.g. a resumed run
    and an uninterrupted one, or one seed trained by two versions of the trainer).

    Reads only each folder's ``field.pt``, so runs of older versions compare too.

    Args:
        a, b: run folders holding ``field.pt``.

    Returns:
        True when both state dicts have the same names and bit-equal tensors.
    """
    wa, wb = (_load_program(Path(p) / FIELD_FILE).state_dict() for p in (a, b))
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)

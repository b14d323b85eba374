"""A field trained by any torch-ude trainer, read back as a CasADi model (MHE, MPC, PEM–MHE warm start).

Every trainer of the project (jet matching, the RK4 baseline, the C trainer) exports
``F(x) = f_known(x) + s_out * MLP(x / s_in)`` as ``field.pt`` + ``field.json``
(`torch_ude.export`). `TrainedField` reads both back and gives

* `TrainedField.casadi_function`: ``F`` as a float64 ``casadi.Function`` in SX (the MLP's
  matrix products and tanh written out with the exported weights, so CasADi differentiates
  it exactly to any order, with no compiled library; L4CasADi would evaluate in float32);
* `TrainedField.residual`: the network as a `mhe.models.model.NeuralResidual` with the same
  weights (it reaches CasADi through L4CasADi, as every residual of `mhe`), and
  `TrainedField.model`: known physics + that residual as a `mhe.models.model.StateSpaceModel`,
  the warm start of a gray-box PEM–MHE.

The known part is rebuilt from the run's plant and case (``field.json``); `mhe` has the
pendulum field (`mhe.problems.pendulum`), so single-pendulum plants are supported (Cases A/B/C and the
friction pendulum); another plant is a clear error.

A field that reads periodic states as ``(sin, cos)`` or leaves invariant states out
(`torch_ude.input_map`), or fades its residual outside a trust envelope
(`torch_ude.envelope`), has all of it written out in `TrainedField.casadi_function` (the
fade's branches as ``if_else`` on the distance past each edge, so its derivatives are exact
everywhere but on the edges, where the field is twice continuously differentiable).
`TrainedField.residual` (L4CasADi's MLP of ``x / s_in``) cannot carry the periodic and invariant
maps and refuses such a field; it carries the envelope (`mhe.models.model.NeuralResidual.set_envelope`: the
same box and fade in the same ``z = x / s_in``, `mhe.models.envelope`).
"""
from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from pathlib import Path

import casadi as cs
import numpy as np
import torch

from torch_ude.export import FIELD_FILE, SIDECAR_FILE, load_field
from torch_ude.input_map import InputMap
from torch_ude.systems import System

from .casadi_model import CASADI_OPS
from .envelope import casadi_fade
from .model import NeuralResidual, StateSpaceModel
from .pendulum import PendulumPhysics, known_pendulum

__all__ = ["TrainedField"]

_PREFIX = "program.field."


class TrainedField:
    """A run's exported field ``F = f_known + s_out * MLP(x / s_in)`` (float64 on this side).

    Build it with `load`.

    Attributes:
        system: the plant the field was trained on.
        case: its case.
        physics: the known part ``f_known`` as a `mhe.models.pendulum.PendulumPhysics` (nothing identified).
        layers: the MLP's ``(W, b)`` per layer, float64 arrays (tanh between layers, none after the last).
        in_scale: ``s_in``, shape (n,).
        out_scale: ``s_out``, shape (n,).
        sidecar: the run's ``field.json``.
        input_map: how the network reads the states (`torch_ude.input_map.InputMap`).
        envelope: the trust envelope's ``(low, high, margin)`` in the network's input, or None.
    """

    def __init__(self, system: System, case: str, physics: PendulumPhysics,
                 layers: Sequence[tuple[np.ndarray, np.ndarray]], in_scale: np.ndarray, out_scale: np.ndarray,
                 sidecar: dict, periodic: Sequence[int] = (), invariant: Sequence[int] = (),
                 envelope: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> None:
        self.system, self.case, self.physics = system, case, physics
        self.input_map = InputMap(len(in_scale), 0, periodic, invariant)
        self.envelope = envelope
        self.layers = [(np.asarray(w, np.float64), np.asarray(b, np.float64)) for w, b in layers]
        self.in_scale, self.out_scale = np.asarray(in_scale, np.float64), np.asarray(out_scale, np.float64)
        self.sidecar = sidecar

    @property
    def n_x(self) -> int:
        """State dimension."""
        return int(self.in_scale.shape[0])

    @classmethod
    def load(cls, run: str | Path, system: System | None = None, case: str | None = None) -> TrainedField:
        """Read the field of a run folder (``field.pt`` and ``field.json``).

        Args:
            run: the run folder.
            system: the plant the caller's model is of; if given, the run's plant must be
                the same (same class and constructor arguments).
            case: the case the caller's model is of; if given, the run's case must be it.

        Raises:
            FileNotFoundError: if ``field.pt`` or ``field.json`` is missing.
            ValueError: for a file that is not a torch-ude field, a plant or case other than
                the caller's (naming both), a plant without a known model in `mhe`, or weights
                that disagree with the sidecar's layer sizes.
        """
        folder = Path(run)
        program, sidecar = load_field(folder)
        if sidecar.get("format") != "torch-ude-field":
            raise ValueError(f"{folder / SIDECAR_FILE} is not a torch-ude field (format "
                             f"{sidecar.get('format')!r}); give the folder of a jet-matching or baseline run.")
        run_system = System.from_spec(sidecar["plant"])
        run_case = run_system.check_case(sidecar["case"])
        if system is not None and system.spec() != run_system.spec():
            raise ValueError(f"The field in {folder} was trained on {json.dumps(run_system.spec())}, but the model "
                             f"it is loaded into is of {json.dumps(system.spec())}; use a run of that plant.")
        if case is not None and run_system.check_case(case) != run_case:
            raise ValueError(f"The field in {folder} has the known model of case {run_case}, but the model it is "
                             f"loaded into is case {case!r}; use a run of that case.")
        state = {k.removeprefix(_PREFIX): v.detach().to(torch.float64).numpy()
                 for k, v in program.state_dict().items() if k.startswith(_PREFIX)}
        sizes = [int(s) for s in sidecar["layer_sizes"]]
        try:
            layers = [(state[f"mlp.weight{i}"], state[f"mlp.bias{i}"]) for i in range(len(sizes) - 1)]
        except KeyError as err:
            raise ValueError(f"{folder / FIELD_FILE} lacks the weight {err}; it does not hold the MLP of "
                             f"layer sizes {sizes} that {SIDECAR_FILE} names.") from None
        for i, (w, b) in enumerate(layers):
            if w.shape != (sizes[i + 1], sizes[i]) or b.shape != (sizes[i + 1],):
                raise ValueError(f"{folder / FIELD_FILE}: layer {i} has weights {w.shape} and bias {b.shape}, "
                                 f"but {SIDECAR_FILE} names layer sizes {sizes}.")
        physics = known_pendulum(run_system, run_case)
        width = InputMap(physics.n_x, 0, sidecar.get("periodic", ()), sidecar.get("invariant", ())).width
        if width != sizes[0]:
            raise ValueError(f"{folder}: the network takes {sizes[0]} inputs, the known model's {physics.n_x} "
                             f"states give {width}.")
        envelope = None
        if "envelope" in sidecar:
            envelope = tuple(np.asarray(sidecar["envelope"][k], np.float64) for k in ("low", "high", "margin"))
        return cls(run_system, run_case, physics, layers, state["in_scale"], state["out_scale"], sidecar,
                   periodic=sidecar.get("periodic", ()), invariant=sidecar.get("invariant", ()), envelope=envelope)

    def casadi_function(self, name: str = "F") -> cs.Function:
        """``F`` as ``casadi.Function(name, [x], [F(x)])``, x of shape (n, 1), float64, SX.

        Its Jacobian (``casadi.jacobian``) and higher derivatives are exact.
        """
        x = cs.SX.sym("x", self.n_x)
        values = {n: float(v) for n, v in self.physics.params().items()}
        known = cs.vertcat(*self.physics.vector_field([x[i] for i in range(self.n_x)], [], values, CASADI_OPS))
        imap = self.input_map
        z = cs.vertcat(*[x[i] / float(self.in_scale[i]) for i in imap.plain], *[cs.sin(x[i]) for i in imap.periodic],
                       *[cs.cos(x[i]) for i in imap.periodic])
        out = z
        for i, (w, b) in enumerate(self.layers):
            out = cs.mtimes(cs.DM(w), out) + cs.DM(b)
            if i < len(self.layers) - 1:
                out = cs.tanh(out)
        if self.envelope is not None:
            out = casadi_fade(z, *self.envelope) * out
        return cs.Function(name, [x], [known + cs.DM(self.out_scale) * out], ["x"], [name])

    def residual(self, outputs: Sequence[int] | None = None) -> NeuralResidual:
        """The network as a `mhe.models.model.NeuralResidual` (no inputs) with the exported weights.

        Args:
            outputs: keep only these state channels of the network's output (the rows of its
                last layer); the others get no residual. None: all.

        Raises:
            ValueError: for an MLP other than two hidden layers of equal width (the shape of
                `mhe.models.model.NeuralResidual`), or a field with periodic or invariant states, which that
                network cannot carry (use `casadi_function`).
        """
        if self.input_map.periodic or self.input_map.invariant:
            raise ValueError("this field reads periodic states as (sin, cos) or leaves invariant states out, which "
                             "mhe's NeuralResidual (an MLP of x / s_in) cannot carry; use "
                             "TrainedField.casadi_function, or train with model.periodic: false and "
                             "model.invariant: false.")
        sizes = [self.n_x] + [w.shape[0] for w, _ in self.layers]
        if len(sizes) != 4 or sizes[1] != sizes[2]:
            raise ValueError(f"mhe's NeuralResidual has two hidden layers of one width; this field's MLP has "
                             f"layer sizes {sizes}.")
        net = NeuralResidual(self.n_x, 0, sizes[1], self.in_scale.tolist(), self.out_scale.tolist(), outputs=outputs)
        last = len(self.layers) - 1
        with torch.no_grad():
            for i, (w, b) in enumerate(self.layers):
                rows = list(net.outputs) if i == last else slice(None)
                getattr(net.mlp, f"weight{i}").copy_(torch.as_tensor(w[rows]))
                getattr(net.mlp, f"bias{i}").copy_(torch.as_tensor(b[rows]))
        if self.envelope is not None:  # the same box and fade in the same z = x / s_in (mhe.models.envelope)
            net.set_envelope(*(torch.as_tensor(t) for t in self.envelope))
        return net

    def model(self, dt: float, measured: Sequence[int] = (0,), discretization: str = "rk4") -> StateSpaceModel:
        """Known physics + the trained residual as a state-space model of `mhe` (nothing physical identified).

        Args:
            dt: sample time in seconds.
            measured: indices of the measured states.
            discretization: ``"euler"``, ``"rk4"`` or ``"rkf45"``.
        """
        return StateSpaceModel(copy.deepcopy(self.physics), self.residual(), dt=dt, measured=measured,
                               discretization=discretization)


"""State-space models of Eq. (1)-(2): ``x_{k+1} = f_d(x_k, u_k, w_k; theta)``, ``y_k = C x_k + F eta_k``.

The continuous-time field ``f_c(x, u, w; theta)`` is written once, in torch:

* physics: a `PhysicsField` whose `PhysicsField.vector_field` is plain arithmetic on
  state and input components through an ``ops`` namespace (``sin``, ``atan2``, ...);
  torch runs it with `TORCH_OPS`, and `mhe.models.casadi_model` runs the same code on CasADi
  symbols to obtain the expression for the estimation problem;
* neural: a `NeuralResidual`, a tanh MLP with two hidden layers and a zero last layer
  (Section 4.2), which reaches CasADi through L4CasADi;
* gray-box: the sum of both.

Process noise enters additively in continuous time, ``f_c = h(x, u; theta) + w``, held
constant over a sample (``n_w = n_x``); ``f_d`` is one explicit Runge-Kutta step of ``f_c`` at
the sample time: Euler, RK4 or RKF45 (`mhe.models.discretization`, RK4 by default), with the input
between samples as the model's ``hold`` says (`mhe.models.hold`: zero-order by default, first-order or
midpoint; those two read the step input ``[u_k, u_{k+1}]``).

The output is ``C x`` (the ``measured`` states) by default, or an `mhe.models.output.OutputMap`
``h(x, u; p_y)`` with its own identified parameters (offsets, gains, a smooth saturation).
"""
from __future__ import annotations

import abc
import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import SimpleNamespace

import torch
from torch import Tensor, nn

from torch_ude.envelope import fade, outside
from torch_ude.mlp import TanhMLP

from .bounds import BoundedParameters
from .discretization import tableau
from .hold import input_hold
from .ops import TORCH_OPS
from .output import OutputMap

__all__ = ["PhysicsField", "NeuralResidual", "StateSpaceModel", "float64_default"]


@contextlib.contextmanager
def float64_default() -> Iterator[None]:
    """Make float64 torch's default dtype inside the block, and restore the caller's after it.

    For code whose numbers would otherwise depend on the calling process's default dtype: a recording
    read from its source, and L4CasADi's traces of the residual (`mhe.models.casadi_model`), which
    take their example inputs in the default dtype (float32 in the CLI and in a solver's worker
    processes, float64 where a benchmark sets it).
    """
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(old)



class PhysicsField(nn.Module, abc.ABC):
    """Known physics ``h(x, u; theta_phys)`` with named, bounded parameters.

    Subclasses set ``state_names`` and ``input_names`` and implement `vector_field`.

    Args:
        parameters: the physical parameters, identified ones and fixed ones.
    """

    state_names: tuple[str, ...]
    input_names: tuple[str, ...]

    def __init__(self, parameters: BoundedParameters) -> None:
        super().__init__()
        self.params = parameters

    @property
    def n_x(self) -> int:
        """State dimension."""
        return len(self.state_names)

    @property
    def n_u(self) -> int:
        """Input dimension."""
        return len(self.input_names)

    @abc.abstractmethod
    def vector_field(self, x: Sequence, u: Sequence, p: Mapping[str, object], ops: SimpleNamespace) -> list:
        """The physics ``h`` on components, backend-neutral.

        Args:
            x: state components, each a tensor of shape (B,) or a CasADi scalar/column.
            u: input components, alike.
            p: parameter values by name: 0-d tensors or CasADi symbols.
            ops: `TORCH_OPS` or ``mhe.models.casadi_model.CASADI_OPS``.

        Returns:
            The ``n_x`` components of ``dx/dt``.
        """

    def forward(self, x: Tensor, u: Tensor) -> Tensor:
        """``h(x, u)`` for batches, (B, n_x), (B, n_u) -> (B, n_x)."""
        out = self.vector_field(list(x.unbind(-1)), list(u.unbind(-1)), self.params(), TORCH_OPS)
        return torch.stack(torch.broadcast_tensors(*out), dim=-1)


class NeuralResidual(nn.Module):
    """A tanh MLP ``N(x, u) = out_scale * mlp([x, u] / in_scale)`` (two hidden layers).

    The last layer starts at zero (Section 4.2) so that the model starts at its
    physics, or at a pure random walk for a neural-only model. With ``outputs`` the network
    drives only those state channels (the others get no residual): a residual on a channel
    whose physics is exact and whose state is not measured (``theta' = omega`` with omega
    hidden) is confounded with that state and cannot be identified.

    With a trust envelope (`set_envelope`; `mhe.models.envelope`, the box of `torch_ude.envelope` in
    ``z = [x, u] / in_scale``) the residual fades to zero outside the inputs it was trained on:
    ``N(x, u) = w(z) out_scale * mlp(z)``, ``w`` the fade of `torch_ude.envelope.fade`. The
    envelope's three buffers travel in the state dict; a state dict that holds them gives a residual
    without one its envelope (`load_state_dict`).

    Args:
        n_x: state dimension.
        n_u: input dimension.
        width: hidden width of both hidden layers.
        in_scale: typical magnitudes of ``[x, u]``, shape (n_x + n_u,); ones if None.
        out_scale: typical magnitudes of the residual ``dx/dt``, shape (n_x,); ones if None.
        seed: seed of the hidden layers' initial weights.
        outputs: indices of the state channels the network drives (its outputs, in this
            order); None: all.
    """

    def __init__(self, n_x: int, n_u: int, width: int = 32, in_scale: Sequence[float] | None = None,
                 out_scale: Sequence[float] | None = None, seed: int = 0,
                 outputs: Sequence[int] | None = None) -> None:
        super().__init__()
        if width < 1:
            raise ValueError(f"width must be >= 1; got {width}.")
        outputs = tuple(range(n_x)) if outputs is None else tuple(int(i) for i in outputs)
        if not outputs or len(set(outputs)) != len(outputs) or not all(0 <= i < n_x for i in outputs):
            raise ValueError(f"outputs must list distinct state indices in [0, {n_x}); got {list(outputs)}.")
        gen = torch.Generator().manual_seed(seed)
        self.mlp = TanhMLP((n_x + n_u, width, width, len(outputs)), dtype=torch.float64, generator=gen,
                           last_layer_gain=0.0)
        self.register_buffer("in_scale", _scale(in_scale, n_x + n_u, "in_scale"))
        self.register_buffer("out_scale", _scale(out_scale, n_x, "out_scale"))
        place = torch.zeros(len(outputs), n_x, dtype=torch.float64)
        place[torch.arange(len(outputs)), torch.tensor(outputs)] = 1.0
        self.register_buffer("place", place)  # network output k -> state channel outputs[k]
        self.n_x, self.n_u, self.outputs = n_x, n_u, outputs

    def forward(self, x: Tensor, u: Tensor) -> Tensor:
        """Residual ``dx/dt``, (B, n_x), (B, n_u) -> (B, n_x)."""
        return self.rows(torch.cat([x, u], dim=-1))

    def rows(self, z: Tensor) -> Tensor:
        """Residual of rows ``z = [x, u]`` of any float dtype, faded outside the envelope, (B, n_x + n_u) -> (B, n_x)
        float64.

        This is the function L4CasADi traces: it takes rows of shape (1, n) in float32.
        """
        out = self.network(z)
        if self._envelope is None:
            return out
        return self.fade(z.to(self.in_scale.dtype) / self.in_scale)[0] * out

    def network(self, z: Tensor) -> Tensor:
        """The unfaded residual ``out_scale * mlp([x, u] / in_scale)`` of rows ``z`` of any float dtype,
        (B, n_x + n_u) -> (B, n_x) float64.

        The network written out in CasADi (`mhe.models.casadi_model.CasadiDynamics` with ``residual="sx"``) is this
        function; the fade is multiplied in there (`mhe.models.envelope.casadi_fade`).
        """
        return self.out_scale * (self.mlp(z.to(self.in_scale.dtype) / self.in_scale) @ self.place)

    # ----- trust envelope (mhe.models.envelope) ---------------------------------------------------------
    @property
    def envelope(self) -> tuple[Tensor, Tensor, Tensor] | None:
        """``(low, high, margin)`` of the trust envelope in ``z = [x, u] / in_scale`` (each (n_x + n_u,)), or None."""
        return self._envelope

    @property
    def _envelope(self) -> tuple[Tensor, Tensor, Tensor] | None:
        buffers = self._buffers
        if "envelope_low" not in buffers:
            return None
        return buffers["envelope_low"], buffers["envelope_high"], buffers["envelope_margin"]

    def set_envelope(self, low: Tensor, high: Tensor, margin: Tensor) -> None:
        """Fade the residual outside the box ``[low, high]`` of ``z = [x, u] / in_scale`` (class doc).

        Args:
            low, high: the box, (n_x + n_u,) each, finite, ``low <= high``.
            margin: the fade band per column, (n_x + n_u,), positive.

        Raises:
            ValueError: for a wrong shape, non-finite values, ``low > high`` or a margin <= 0.
        """
        width = self.n_x + self.n_u
        values = {}
        for name, t in (("low", low), ("high", high), ("margin", margin)):
            t = torch.as_tensor(t, dtype=torch.float64)
            if t.shape != (width,) or not bool(torch.isfinite(t).all()):
                raise ValueError(f"the envelope's {name} must be {width} finite numbers (one per residual input "
                                 f"[x, u]); got {t.tolist()}.")
            values[name] = t
        if bool((values["low"] > values["high"]).any()) or bool((values["margin"] <= 0).any()):
            raise ValueError(f"the envelope needs low <= high and a positive margin per column; got low "
                             f"{values['low'].tolist()}, high {values['high'].tolist()}, margin "
                             f"{values['margin'].tolist()}.")
        for name, t in values.items():
            self.register_buffer(f"envelope_{name}", t.clone())

    def fade(self, z: Tensor) -> tuple[Tensor, Tensor]:
        """The fade ``w(z)`` (B, 1) and its gradient (B, n_x + n_u) at network inputs ``z = [x, u] / in_scale``
        (`torch_ude.envelope.fade`); ``w = 1`` without an envelope."""
        if self._envelope is None:
            return torch.ones_like(z[:, :1]), torch.zeros_like(z)
        return fade(z, *self._envelope)

    def outside(self, x: Tensor, u: Tensor) -> Tensor:
        """Which rows of states (B, n_x) and inputs (B, n_u) lie outside the envelope, (B,) bool; all False without
        one."""
        if self._envelope is None:
            return torch.zeros(x.shape[0], dtype=torch.bool)
        low, high, _ = self._envelope
        return outside(torch.cat([x, u], dim=-1).to(torch.float64) / self.in_scale, low, high)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs) -> None:
        """Load a state dict; one that holds an envelope gives this residual one (`set_envelope`)."""
        names = [f"{prefix}envelope_{k}" for k in ("low", "high", "margin")]
        if self._envelope is None and all(k in state_dict for k in names):
            self.set_envelope(*(state_dict[k] for k in names))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)


def _scale(values: Sequence[float] | None, n: int, name: str) -> Tensor:
    out = torch.ones(n, dtype=torch.float64) if values is None else torch.as_tensor(values, dtype=torch.float64)
    if out.shape != (n,) or not bool((out > 0).all()):
        raise ValueError(f"{name} must hold {n} positive numbers; got {values}.")
    return out


class StateSpaceModel(nn.Module):
    """``f_c = h_phys + N + w``, its discretization ``f_d`` and the output map (Eq. 1-2).

    Physics-only: ``residual=None``; neural: ``physics=None``; gray-box: both.

    Args:
        physics: the known physics, or None.
        residual: the neural residual, or None.
        dt: sample time in seconds.
        measured: indices of the measured states, one per output; ``C`` selects them, ``F = I``
            (None: the output map's, else ``(0,)``).
        n_x: state dimension, needed only without physics.
        n_u: input dimension, needed only without physics (default: the residual's, else the
            physics'). The physics reads the first ``physics.n_u`` inputs; a residual may read more
            (the inputs of earlier samples, `mhe.data.input_history`).
        discretization: ``f_d`` as one step of ``"euler"``, ``"rk4"`` or ``"rkf45"``
            (`mhe.models.discretization.TABLEAUS`).
        hold: the input between samples, ``"zoh"``, ``"foh"`` or ``"midpoint"`` (`mhe.models.hold`).
        output: the output map ``y = h(x, u; p_y)`` (None: ``y = C x``).

    Raises:
        ValueError: for no part at all, inconsistent dimensions, bad indices, an unknown
            discretization or hold, or ``measured`` other than the output map's.
    """

    def __init__(self, physics: PhysicsField | None = None, residual: NeuralResidual | None = None,
                 dt: float = 0.02, measured: Sequence[int] | None = None, n_x: int | None = None,
                 n_u: int | None = None, discretization: str = "rk4", hold: str = "zoh",
                 output: OutputMap | None = None) -> None:
        super().__init__()
        self.tableau = tableau(discretization)
        self.hold = input_hold(hold)
        if output is not None and measured is not None and tuple(int(i) for i in measured) != output.measured:
            raise ValueError(f"measured {list(measured)} differs from the output map's {list(output.measured)}; give "
                             f"it once, in the output map.")
        measured = output.measured if output is not None else (0,) if measured is None else measured
        if physics is None and residual is None:
            raise ValueError("A StateSpaceModel needs physics, a neural residual or both; got neither.")
        if not dt > 0:
            raise ValueError(f"dt must be positive (seconds); got {dt}.")
        part = physics if physics is not None else residual
        self.n_x = part.n_x if n_x is None else int(n_x)
        self.n_u = (residual if residual is not None else physics).n_u if n_u is None else int(n_u)
        if residual is not None and (residual.n_x, residual.n_u) != (self.n_x, self.n_u):
            raise ValueError(f"The residual's (n_x, n_u) {(residual.n_x, residual.n_u)} differ from the model's "
                             f"{(self.n_x, self.n_u)}.")
        if physics is not None and (physics.n_x != self.n_x or physics.n_u > self.n_u
                                    or (residual is None and physics.n_u != self.n_u)):
            raise ValueError(f"The physics' (n_x, n_u) {(physics.n_x, physics.n_u)} do not fit the model's "
                             f"{(self.n_x, self.n_u)}: the physics reads the first inputs, and only a residual may "
                             f"read more (an input history, mhe.data.input_history).")
        measured = tuple(int(i) for i in measured)
        if not measured or len(set(measured)) != len(measured) or not all(0 <= i < self.n_x for i in measured):
            raise ValueError(f"measured must list distinct state indices in [0, {self.n_x}); got {measured}.")
        self.physics, self.residual, self.dt, self.measured = physics, residual, float(dt), measured
        self.output_map = output
        c = torch.zeros(len(measured), self.n_x, dtype=torch.float64)
        c[torch.arange(len(measured)), torch.tensor(measured)] = 1.0
        self.register_buffer("C", c)
        self.register_buffer("F", torch.eye(len(measured), dtype=torch.float64))

    @property
    def n_u_step(self) -> int:
        """Columns of one step's input row: ``n_u``, or ``2 n_u`` (``[u_k, u_{k+1}]``) for a paired hold."""
        return self.hold.columns(self.n_u)

    @property
    def n_w(self) -> int:
        """Process-noise dimension (additive, so ``n_x``)."""
        return self.n_x

    @property
    def n_y(self) -> int:
        """Output dimension."""
        return self.C.shape[0]

    @property
    def n_eta(self) -> int:
        """Measurement-noise dimension."""
        return self.F.shape[1]

    def field(self, x: Tensor, u: Tensor, w: Tensor) -> Tensor:
        """``f_c(x, u, w)``, (B, n_x), (B, n_u), (B, n_w) -> (B, n_x)."""
        out = w
        if self.physics is not None:
            out = out + self.physics(x, u[..., :self.physics.n_u])
        if self.residual is not None:
            out = out + self.residual(x, u)
        return out

    def step(self, x: Tensor, u: Tensor, w: Tensor) -> Tensor:
        """``f_d``: one step of ``f_c`` over ``dt``, ``w`` held and the input as the hold says.

        Args:
            x: states, (B, n_x).
            u: step inputs, (B, n_u_step): ``u_k``, or ``[u_k, u_{k+1}]`` for a paired hold.
            w: process noise, (B, n_w).

        Returns:
            ``x_{k+1}``, (B, n_x).
        """
        return self.held_step(lambda s, v: self.field(s, v, w), x, u)

    def held_step(self, field: Callable[[Tensor, Tensor], Tensor], x: Tensor, u: Tensor) -> Tensor:
        """One step over ``dt`` of ``x' = field(x, u(t))`` with the model's tableau, ``u(t)`` as its hold says.

        The one place where the torch side reads the input between samples (`step`; `mhe.peers.cramer_rao`
        steps its physics at other parameter values through it).

        Args:
            field: ``f(states (B, n_x), inputs (B, n_u)) -> (B, n_x)``.
            x: states, (B, n_x).
            u: step inputs, (B, n_u_step): ``u_k``, or ``[u_k, u_{k+1}]`` for a paired hold.

        Returns:
            ``x_{k+1}``, (B, n_x).
        """
        if not self.hold.paired:
            return self.tableau.step(lambda s: field(s, u), x, self.dt)
        now, nxt = u[..., :self.n_u], u[..., self.n_u:]
        return self.tableau.step_timed(lambda s, c: field(s, self.hold.at(now, nxt, c)), x, self.dt)

    def output(self, x: Tensor, u: Tensor | None = None) -> Tensor:
        """Noise-free output ``C x`` or ``h(x, u; p_y)``, (..., n_x), step inputs (..., n_u_step) or None ->
        (..., n_y); an output map reads the input at the sample, the first ``n_u`` columns."""
        if self.output_map is None:
            return x @ self.C.T
        return self.output_map(x, None if u is None else u[..., :self.n_u])

    def state_guess(self, y: Tensor) -> Tensor:
        """The measured states that give the outputs ``y`` (the output map's inverse guess; ``y`` itself for
        ``C x``), (..., n_y) -> (..., n_y)."""
        return y if self.output_map is None else self.output_map.state_guess(y)

"""The hybrid field ``F = f_known + N_theta`` and its hand-written jets (Eq. 2, 11).

``N_theta(x) = s_out * MLP(x / s_in)``: inputs scaled by the calibrated state RMS
``x_rms`` and outputs by the calibrated first-derivative RMS ``s1``. Everything on
the training path (F, the JVP ``J_F v``, the VJP ``J_F^T u``, the Lie derivative
``G = J_F F`` and parameter gradients) is explicit tensor algebra; no autograd.

With a recorded input ``u`` (``known`` a `torch_ude.systems.ControlledField` with
``n_inputs > 0``): ``F(x, u) = f_known(x, u) + s_out * MLP([x / s_in, u / s_u])`` with
``s_u`` the calibrated input RMS, and the second-order target is the time derivative of
``F`` along the model's own velocity and the measured input rate,
``G(x, u, udot) = J_x F(x, u) F(x, u) + J_u F(x, u) udot``. One MLP tangent along
``[F / s_in, udot / s_u]`` gives both terms; ``udot`` does not depend on the weights, so
the gradient of Eq. (14)-(16) keeps its form (the VJP keeps the state block only).
Without inputs every method computes exactly what it did before inputs existed.

With ``linear=True`` the network carries a trainable linear term of its normalized input
(`torch_ude.mlp.TanhMLP`): ``N(x, u) = s_out * (MLP(z) + L z)``, ``z = [x / s_in, u / s_u]``,
``L`` initialised to zero. It lets the residual absorb an error linear in the states or
inputs (a torque gain of the known model) over any range, where tanh units saturate. Every
method here (values, JVPs, VJPs, parameter gradients) includes it through the MLP's own
formulas, so jet matching, the RK4 baseline's adjoint and evaluation share one implementation.

With ``input_affine=True`` (inputs and the linear term only) the tanh layers read the
states alone and the inputs enter the residual linearly: ``N(x, u) = s_out * (MLP(x / s_in)
+ L z)``. The residual's input gain ``dN/du`` is then a constant matrix, as in a plant whose
actuator force enters its equations of motion linearly (a mechanical system driven by a
torque or force), so the network cannot learn a gain that changes sign over the states.

Periodic states (``periodic``: angles in rad, as the plant declares them) enter the network as
``(sin q, cos q)`` instead of ``q / s_in`` (`torch_ude.input_map`): the residual is then
2 pi-periodic in them. Invariant states (``invariant``: cyclic coordinates) are not read.
Every formula below runs through the map's tangent and pull-back, so
the jets, VJPs and parameter gradients stay exact.

With a trust envelope (`set_envelope`, `torch_ude.envelope`) the residual is faded outside the
region training saw: ``N = w(z) s_out MLP(z)``. Its derivatives: the tangent gains
``(grad w . zdot) MLP(z)``, the input cotangent ``grad w (MLP(z) . obar)``, and the parameter
gradient takes the output cotangent ``w obar + (grad w . zdot) tbar`` and the tangent cotangent
``w tbar`` (``w`` does not depend on the weights). Without an envelope (the default, and during
training: every training jet lies inside the envelope training records) ``w = 1``.
"""
from __future__ import annotations

from collections.abc import Sequence
from copy import deepcopy
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .envelope import fade, fade_weight, outside
from .input_map import InputMap
from .mlp import Activations, Tangents, TanhMLP
from .systems.base import VectorField, check_states
from .systems.controlled import ControlledField

__all__ = ["HybridField", "FieldJet"]


@dataclass
class FieldJet:
    """The field and its Lie derivative at a batch of states, with what the reverse sweeps need.

    Attributes:
        x: states, shape (B, n).
        value: ``F(x)`` (``F(x, u)`` with inputs), shape (B, n).
        lie: ``G(x) = J_F(x) F(x)`` (Eq. 11; with inputs ``J_x F F + J_u F udot``), shape
            (B, n), or None if not computed.
        known_jacobian: ``J_fknown(x)`` (the state Jacobian ``J_x``), shape (B, n, n), or
            None without ``lie``.
        acts: MLP activations at ``x / s_in`` (``[x / s_in, u / s_u]`` with inputs).
        tangents: MLP tangents along ``F / s_in`` (``[F / s_in, udot / s_u]``), or None.
    """

    x: Tensor
    value: Tensor
    lie: Tensor | None
    known_jacobian: Tensor | None
    acts: Activations
    tangents: Tangents | None


class HybridField(nn.Module):
    """``F(x) = f_known(x) + s_out * MLP(x / s_in)``, a UDE right-hand side.

    Runs in the dtype of its parameters: float64 for verification and host
    training, float32 where a device would run it.

    Args:
        known: the known physics ``f_known``: an analytic `VectorField`, or a
            `ControlledField` ``f_known(x, u)`` for a plant with a recorded input (the
            network then also reads ``u``, and every method takes ``u``).
        hidden: hidden widths of the tanh MLP, default ``(16, 16)``.
        dtype: parameter dtype.
        generator: random generator for reproducible initial weights.
        last_layer_gain: initial scale of the MLP's output layer.
        linear: add the zero-initialised linear term ``L z`` to the residual (module doc);
            off (the default), the parameters and state dict are those of the plain network.
        input_affine: the tanh layers read the states only, the inputs enter through the
            linear term alone (module doc); needs inputs and ``linear``.
        periodic: indices of the states that are angles (rad), read as ``(sin, cos)``
            (module doc); empty (the default) reads every state scaled.
        invariant: indices of the states the residual does not read (cyclic coordinates the
            dynamics do not depend on, `torch_ude.input_map`); empty by default.

    Raises:
        ValueError: for ``input_affine`` without inputs or without ``linear``, or a periodic
            index out of range.
    """

    def __init__(self, known: VectorField | ControlledField, hidden: Sequence[int] = (16, 16),
                 dtype: torch.dtype = torch.float64, generator: torch.Generator | None = None,
                 last_layer_gain: float = 0.1, linear: bool = False, input_affine: bool = False,
                 periodic: Sequence[int] = (), invariant: Sequence[int] = ()) -> None:
        super().__init__()
        n = int(known.n_states)
        n_u = int(known.n_inputs) if isinstance(known, ControlledField) else 0
        if input_affine and not (n_u and linear):
            raise ValueError("input_affine=True needs a known model with recorded inputs (a ControlledField) and "
                             f"linear=True, through which the inputs then enter; got {n_u} inputs, linear={linear}.")
        self.known = known
        self.n_states = n
        self.n_inputs = n_u
        self.input_map = InputMap(n, n_u, periodic, invariant)
        self._physical = bool(getattr(known, "trainable", False))  # (fixed at construction; read per update)
        self.mlp = TanhMLP((self.input_map.width, *hidden, n), dtype=dtype, generator=generator,
                           last_layer_gain=last_layer_gain, linear=linear,
                           reads=self.input_map.state_width if input_affine else None)
        self.register_buffer("in_scale", torch.ones(n, dtype=dtype))
        self.register_buffer("out_scale", torch.ones(n, dtype=dtype))
        if n_u:  # only with inputs: an autonomous field's state dict is unchanged
            self.register_buffer("input_scale", torch.ones(n_u, dtype=dtype))

    @classmethod
    def from_seed(cls, known: VectorField | ControlledField, seed: int, hidden: Sequence[int] = (16, 16),
                  dtype: torch.dtype = torch.float64, last_layer_gain: float = 0.1,
                  linear: bool = False, input_affine: bool = False, periodic: Sequence[int] = (),
                  invariant: Sequence[int] = ()) -> HybridField:
        """A field whose initial weights depend only on ``seed``.

        Every trainer of the project builds its field this way, so jet matching and the
        solver baselines start from identical weights for the same seed (and the linear
        term, zero at the start, does not change them).
        """
        gen = torch.Generator().manual_seed(int(seed))
        return cls(known, hidden=hidden, dtype=dtype, generator=gen, last_layer_gain=last_layer_gain, linear=linear,
                   input_affine=input_affine, periodic=periodic, invariant=invariant)

    @property
    def linear(self) -> bool:
        """Whether the residual carries the linear term ``L z`` (module doc)."""
        return self.mlp.linear

    @property
    def input_affine(self) -> bool:
        """Whether the inputs enter the residual through the linear term only (module doc)."""
        return self.mlp.reads < self.mlp.sizes[0]

    def set_scales(self, in_scale: Tensor, out_scale: Tensor, input_scale: Tensor | None = None) -> None:
        """Set the calibration scales.

        Args:
            in_scale: state RMS ``x_rms`` per channel, shape (n,), > 0.
            out_scale: first-derivative RMS ``s1`` per channel, shape (n,), > 0.
            input_scale: input RMS ``s_u`` per input, shape (n_u,), > 0; required with
                inputs, None without.

        Raises:
            ValueError: for a wrong shape or a non-positive or non-finite scale, or an
                ``input_scale`` given to a field without inputs (or missing with them).
        """
        if (input_scale is None) != (self.n_inputs == 0):
            raise ValueError(f"input_scale must be {self.n_inputs} positive numbers for a field with "
                             f"{self.n_inputs} inputs (None without inputs); got {input_scale!r}.")
        named = [("in_scale", in_scale, self.n_states), ("out_scale", out_scale, self.n_states)]
        if input_scale is not None:
            named.append(("input_scale", input_scale, self.n_inputs))
        for name, s, size in named:
            s = torch.as_tensor(s)
            if s.shape != (size,) or not bool(torch.isfinite(s).all()) or bool((s <= 0).any()):
                raise ValueError(f"{name} must be {size} positive finite numbers; got {s.tolist()}.")
            getattr(self, name).copy_(s)

    @property
    def physical(self) -> bool:
        """Whether the known model trains physical parameters (`torch_ude.systems.parameters`)."""
        return self._physical

    def parameters_list(self) -> list[Tensor]:
        """The trainable parameters in the order of the hand-written gradients: the network's
        (`TanhMLP.ordered_parameters`), then the known model's ``theta`` when it trains physical
        parameters."""
        params = self.mlp.ordered_parameters()
        return params + [self.known.theta] if self.physical else params

    def num_parameters(self) -> int:
        """Number of trainable scalars (354 for 2-16-16-2, 420 for 4-16-16-4; the linear term
        adds ``n (n + n_u)``; ``input_affine`` removes the first layer's ``d_1 n_u`` input weights;
        trained physical parameters add theirs)."""
        return sum(p.numel() for p in self.parameters_list())

    # ----- values ---------------------------------------------------------------------------
    @property
    def dtype(self) -> torch.dtype:
        """The dtype of the parameters; inputs of `forward`, `evaluate` and `residual` must have it."""
        return self.in_scale.dtype

    def check_input(self, x: object, name: str = "x") -> None:
        """Validate states at the public boundary (see `torch_ude.systems.check_states`).

        Raises:
            TypeError: for a non-tensor, a dtype other than float32/float64, or a dtype
                that differs from the parameters' (`dtype`).
            ValueError: for a shape other than (N, n), or NaN/Inf states.
        """
        check_states(x, self.n_states, name, dtype=self.dtype)

    def check_inputs(self, x: Tensor, u: object, name: str = "u") -> None:
        """Validate recorded inputs beside states ``x`` (N, n): ``u`` must be (N, n_u) in
        `dtype` for a field with inputs, and None for one without.

        Raises:
            TypeError, ValueError: as `check_input`, naming ``name``; also for inputs given
                to a field without inputs or missing for one with them.
        """
        if self.n_inputs == 0:
            if u is not None:
                raise ValueError(f"{name} was given but this field has no inputs (its known model is a "
                                 f"VectorField); build it on a ControlledField to learn F(x, u).")
            return
        if u is None:
            raise ValueError(f"this field reads {self.n_inputs} recorded input(s): pass {name} of shape "
                             f"(N, {self.n_inputs}) beside the states.")
        check_states(u, self.n_inputs, name, dtype=self.dtype)
        if u.shape[0] != x.shape[0]:
            raise ValueError(f"{name} must have one row per state: {x.shape[0]} rows; got {u.shape[0]}.")

    def forward(self, x: Tensor, u: Tensor | None = None) -> Tensor:
        """``F(x)`` (``F(x, u)`` with inputs), validated: (N, n) states [and (N, n_u) inputs]
        -> (N, n) time derivatives, in `dtype`.

        Raises:
            TypeError, ValueError: see `check_input` and `check_inputs`.
        """
        self.check_input(x)
        self.check_inputs(x, u)
        return self.evaluate_unchecked(x, u)

    def evaluate(self, x: Tensor, u: Tensor | None = None) -> Tensor:
        """``F(x)`` (or ``F(x, u)``), validated; the same as calling the field (`forward`)."""
        return self.forward(x, u)

    def net_input(self, x: Tensor, u: Tensor | None = None) -> Tensor:
        """The MLP's input ``z = phi(x, u)`` (`torch_ude.input_map`): ``x / s_in`` (``[x / s_in,
        u / s_u]`` with inputs) when no state is periodic, (N, n) [, (N, n_u)] -> (N, width)."""
        return self.input_map(x, u, self.in_scale, self.input_scale if self.n_inputs else None)

    def evaluate_unchecked(self, x: Tensor, u: Tensor | None = None) -> Tensor:
        """``F(x)`` (``F(x, u)``) without input validation, (N, n) [, (N, n_u)] -> (N, n), for
        the library's hot loops.

        The caller guarantees a finite (N, n) tensor in `dtype` (or complex128 for
        complex-step checks); anything else gives wrong values or a low-level error.
        """
        known = self.known(x) if u is None else self.known(x, u)
        return known + self.residual_of(self.mlp.activations(self.net_input(x, u)))

    def residual(self, x: Tensor, u: Tensor | None = None) -> Tensor:
        """The neural residual ``N_theta(x)`` (``N_theta(x, u)``), (N, n) -> (N, n), validated."""
        self.check_input(x)
        self.check_inputs(x, u)
        return self.residual_of(self.mlp.activations(self.net_input(x, u)))

    def residual_of(self, acts: Activations) -> Tensor:
        """``N = w(z) s_out MLP(z)`` from the MLP's activations at ``z`` (``acts.inputs``), (B, n)."""
        if self._envelope is None:
            return self.out_scale * acts.output
        return self.out_scale * (fade_weight(acts.inputs, *self._envelope) * acts.output)

    def _residual_tangent(self, acts: Activations, tangents: Tangents) -> Tensor:
        """``J_N zdot``, the residual's tangent along ``tangents.inputs``, (B, n)."""
        if self._envelope is None:
            return self.out_scale * tangents.output
        w, dw = self.fade(acts.inputs)
        rate = (dw * tangents.inputs).sum(dim=1, keepdim=True)
        return self.out_scale * (w * tangents.output + rate * acts.output)

    def jet(self, x: Tensor, lie: bool = True, u: Tensor | None = None, udot: Tensor | None = None) -> FieldJet:
        """``F`` and (optionally) ``G = J_F F`` at ``x`` (B, n), keeping the caches.

        ``G`` uses the known field's Jacobian and the MLP's forward-mode tangent
        along ``v = F(x)``. With inputs ``u`` (B, n_u) and their rates ``udot`` (B, n_u,
        needed with ``lie``), ``G = J_x F F + J_u F udot`` (module doc); no validation.
        """
        acts = self.mlp.activations(self.net_input(x, u))
        value = (self.known(x) if u is None else self.known(x, u)) + self.residual_of(acts)
        tangents, g, jk = None, None, None
        if lie:
            jk = self.known.jacobian(x) if u is None else self.known.jacobian(x, u)
            tangents = self.mlp.jvp(acts, self._tangent(acts.inputs, value, udot))
            g = torch.einsum("bij,bj->bi", jk, value)
            if u is not None:
                g = g + torch.einsum("bik,bk->bi", self.known.input_jacobian(x, u), udot)
            g = g + self._residual_tangent(acts, tangents)
        return FieldJet(x=x, value=value, lie=g, known_jacobian=jk, acts=acts, tangents=tangents)

    # ----- state derivatives ------------------------------------------------------------------
    def _tangent(self, z: Tensor, v: Tensor, udot: Tensor | None = None) -> Tensor:
        """The MLP input tangent at ``z`` of a state tangent ``v`` (B, n) and input rates ``udot``
        (None: the inputs held fixed, they are data)."""
        return self.input_map.tangent(z, v, udot, self.in_scale, self.input_scale if self.n_inputs else None)

    def jvp(self, x: Tensor, v: Tensor, inputs: Tensor | None = None) -> Tensor:
        """``J_F(x) v`` for (B, n) states and tangents -> (B, n); with inputs the state
        Jacobian ``J_x F(x, u)`` at ``inputs`` (B, n_u), which a field with inputs requires.

        Raises:
            ValueError: for inputs missing on a field with inputs or given to one without.
        """
        self.check_inputs(x, inputs, "inputs")
        acts = self.mlp.activations(self.net_input(x, inputs))
        known = self.known.jvp(x, v) if inputs is None else torch.einsum("bij,bj->bi", self.known.jacobian(x, inputs), v)
        return known + self._residual_tangent(acts, self.mlp.jvp(acts, self._tangent(acts.inputs, v)))

    def vjp(self, x: Tensor, u: Tensor, inputs: Tensor | None = None) -> Tensor:
        """``J_F(x)^T u`` for (B, n) states and cotangents ``u`` -> (B, n); with inputs the
        state block at ``inputs`` (B, n_u), as `jvp`.

        Raises:
            ValueError: as `jvp`.
        """
        self.check_inputs(x, inputs, "inputs")
        acts = self.mlp.activations(self.net_input(x, inputs))
        known = self.known.vjp(x, u) if inputs is None else self.known.vjp(x, inputs, u)
        return known + self.vjp_residual(acts, u)

    def vjp_residual(self, acts: Activations, u: Tensor) -> Tensor:
        """``J_N^T u`` at the point of ``acts``, (B, n) -> (B, n); with inputs the state block
        ``J_{N,x}^T u`` (the inputs are data, no cotangent flows to them). With an envelope
        ``acts.output`` must hold the MLP's output."""
        obar = self.out_scale * u
        if self._envelope is None:
            zbar = self.mlp.vjp_input(acts, obar)
        else:
            w, dw = self.fade(acts.inputs)
            zbar = self.mlp.vjp_input(acts, w * obar) + dw * (acts.output * obar).sum(dim=1, keepdim=True)
        return self.input_map.pullback(acts.inputs, zbar, self.in_scale)

    def jacobian(self, x: Tensor, inputs: Tensor | None = None) -> Tensor:
        """The state Jacobian ``J_F(x)``, (B, n) -> (B, n, n), from n JVPs; with inputs
        ``J_x F(x, u)`` at ``inputs`` (B, n_u), as `jvp`.

        Raises:
            ValueError: as `jvp`.
        """
        self.check_inputs(x, inputs, "inputs")
        acts = self.mlp.activations(self.net_input(x, inputs))
        cols = []
        eye = torch.eye(self.n_states, dtype=x.dtype)
        for j in range(self.n_states):
            e = eye[j].expand_as(x)
            cols.append(self._residual_tangent(acts, self.mlp.jvp(acts, self._tangent(acts.inputs, e))))
        known = self.known.jacobian(x) if inputs is None else self.known.jacobian(x, inputs)
        return known + torch.stack(cols, dim=2)

    def lie_derivative(self, x: Tensor, inputs: Tensor | None = None, input_rates: Tensor | None = None) -> Tensor:
        """``G(x) = J_F(x) F(x)`` (Eq. 11), (B, n) -> (B, n); with inputs ``u`` = ``inputs``
        (B, n_u) and their rates ``udot`` = ``input_rates`` (B, n_u), ``G = J_x F F + J_u F udot``.

        Raises:
            ValueError: as `jvp`, for ``inputs`` and ``input_rates`` alike.
        """
        self.check_inputs(x, inputs, "inputs")
        self.check_inputs(x, input_rates, "input_rates")
        return self.jet(x, u=inputs, udot=input_rates).lie

    # ----- parameter derivatives ----------------------------------------------------------------
    def parameter_vjp(self, acts: Activations, ubar: Tensor, tangents: Tangents | None = None,
                      wbar: Tensor | None = None, out: Sequence[Tensor] | None = None) -> list[Tensor]:
        """Gradient in theta of ``sum(ubar * N) + sum(wbar * J_N v)`` (Eq. 16).

        Args:
            acts: MLP activations at the states.
            ubar: cotangent of ``N_theta(x)``, shape (B, n).
            tangents: MLP tangents along the input tangent of ``v`` (from `jet`), needed with ``wbar``.
            wbar: cotangent of ``J_N(x) v`` with ``v`` held fixed, shape (B, n), or None.
            out: tensors to write the gradients into, matching `parameters_list` (e.g. the
                parameters' ``.grad``), or None for new tensors (`TanhMLP.backward`).

        Returns:
            Gradients matching `parameters_list`, summed over the batch (``out`` when given).
        """
        obar = self.out_scale * ubar
        tbar = None if wbar is None else self.out_scale * wbar
        if self._envelope is not None:
            w, dw = self.fade(acts.inputs)
            obar = w * obar
            if tbar is not None:
                obar = obar + (dw * tangents.inputs).sum(dim=1, keepdim=True) * tbar
                tbar = w * tbar
        return self.mlp.backward(acts, obar, tangents, tbar, out=out)

    @classmethod
    def configured_physics(cls, model: VectorField | ControlledField) -> HybridField:
        """``model`` as a hybrid field whose residual is switched off (zero network) at the model's configured
        constants: a model that trains physical parameters is reset to its configured values (``theta``
        zeroed), unlike `without_residual`, which keeps trained ones. For scoring the known model alone.

        Args:
            model: the known model; the field wraps it, its trainable physical parameters reset in place.

        Returns:
            The field ``F = f_known`` at the configured constants (the default network, every parameter zero).
        """
        field = cls(model)
        with torch.no_grad():
            for p in field.parameters_list():
                p.zero_()
        return field

    def without_residual(self) -> HybridField:
        """A copy whose residual is zero (its output layer and linear term zeroed): ``F = f_known``
        with the same interface, scales, input map and envelope, for scoring or exporting the
        physics alone."""
        copy = deepcopy(self)
        with torch.no_grad():
            last_w, last_b = copy.mlp.layers[-1]
            last_w.zero_()
            last_b.zero_()
            if copy.linear:
                copy.mlp.ordered_parameters()[-1].zero_()  # L (parameters_list ends with the physics' theta)
        return copy

    def without_envelope(self) -> HybridField:
        """A copy without the trust envelope: the same weights, scales and input map, the residual
        unfaded everywhere (``w = 1``), as the field was before training recorded its envelope;
        for scoring what the envelope changes. A field without an envelope is copied as it is."""
        copy = deepcopy(self)
        for key in ("low", "high", "margin"):
            copy._buffers.pop(f"envelope_{key}", None)
        return copy

    # ----- trust envelope -------------------------------------------------------------------------
    @property
    def envelope(self) -> tuple[Tensor, Tensor, Tensor] | None:
        """``(low, high, margin)`` of the trust envelope in ``z`` (each (width,)), or None."""
        return self._envelope

    @property
    def _envelope(self) -> tuple[Tensor, Tensor, Tensor] | None:
        """The envelope's buffers, looked up by name (``.to()`` replaces buffer tensors)."""
        buffers = self._buffers
        if "envelope_low" not in buffers:
            return None
        return buffers["envelope_low"], buffers["envelope_high"], buffers["envelope_margin"]

    def set_envelope(self, low: Tensor, high: Tensor, margin: Tensor) -> None:
        """Fade the residual outside the box ``[low, high]`` of the network's inputs (module doc,
        `torch_ude.envelope`); the three travel in the state dict and the exported files.

        Args:
            low, high: the box in ``z``, (width,) each, finite, ``low <= high``.
            margin: the fade band per column, (width,), positive.

        Raises:
            ValueError: for a wrong shape, non-finite values, ``low > high`` or a margin <= 0.
        """
        width = self.input_map.width
        named = {"low": low, "high": high, "margin": margin}
        values = {}
        for name, t in named.items():
            t = torch.as_tensor(t, dtype=self.dtype)
            if t.shape != (width,) or not bool(torch.isfinite(t).all()):
                raise ValueError(f"the envelope's {name} must be {width} finite numbers (one per network input "
                                 f"column); got {t.tolist()}.")
            values[name] = t
        if bool((values["low"] > values["high"]).any()) or bool((values["margin"] <= 0).any()):
            raise ValueError(f"the envelope needs low <= high and a positive margin per column; got low "
                             f"{values['low'].tolist()}, high {values['high'].tolist()}, margin "
                             f"{values['margin'].tolist()}.")
        for name, t in values.items():
            self.register_buffer(f"envelope_{name}", t.clone())

    def fade(self, z: Tensor) -> tuple[Tensor, Tensor]:
        """The envelope's fade ``w(z)`` (B, 1) and its gradient (B, width) (`torch_ude.envelope.fade`);
        ``w = 1`` without an envelope."""
        if self._envelope is None:
            return torch.ones_like(z[:, :1]), torch.zeros_like(z)
        return fade(z, *self._envelope)

    def outside(self, x: Tensor, u: Tensor | None = None) -> Tensor:
        """Which states (N, n) [with inputs (N, n_u)] lie outside the envelope, (N,) bool; all
        False without an envelope."""
        if self._envelope is None:
            return torch.zeros(x.shape[0], dtype=torch.bool)
        low, high, _ = self._envelope
        return outside(self.net_input(x, u), low, high)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs) -> None:
        """Load a state dict; one that holds an envelope gives this field one (`set_envelope`)."""
        names = [f"{prefix}envelope_{k}" for k in ("low", "high", "margin")]
        if self._envelope is None and all(k in state_dict for k in names):
            self.set_envelope(*(state_dict[k] for k in names))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def physical_vjp(self, x: Tensor, u: Tensor | None, ubar: Tensor, v: Tensor | None = None,
                     udot: Tensor | None = None, wbar: Tensor | None = None) -> Tensor:
        """Gradient in the known model's ``theta`` of ``sum(ubar * f) + sum(wbar * (J_x f v + J_u f udot))``
        with ``v`` and ``udot`` held fixed (the physical part of Eq. 16; ``J_x f`` alone without inputs).

        Args:
            x: states (B, n); u: inputs (B, n_u) or None without inputs.
            ubar: cotangent of ``f(x, u)``, (B, n).
            v, udot: the tangent ``v`` (B, n) and input rates (B, n_u) of the Lie derivative,
                needed with ``wbar``.
            wbar: cotangent of the tangent term, (B, n), or None.

        Returns:
            (P,), summed over the batch.
        """
        known = self.known
        jac = known.parameter_jacobian(x) if u is None else known.parameter_jacobian(x, u)
        grad = torch.einsum("bi,bip->p", ubar, jac)
        if wbar is not None:
            lie = known.parameter_lie_jacobian(x, v) if u is None else known.parameter_lie_jacobian(x, u, v, udot)
            grad = grad + torch.einsum("bi,bip->p", wbar, lie)
        return grad

    def write_grad(self, grads: Sequence[Tensor]) -> None:
        """Store hand-written gradients in ``.grad`` so any ``torch.optim`` optimizer can step."""
        params = self.parameters_list()
        if len(grads) != len(params):
            raise ValueError(f"expected {len(params)} gradient tensors; got {len(grads)}.")
        if all(p.grad is not None for p in params):
            torch._foreach_copy_([p.grad for p in params], list(grads))  # one operation for all (per-update path)
            return
        for p, g in zip(params, grads):
            if p.grad is None:
                p.grad = g.detach().clone()
            else:
                p.grad.copy_(g)

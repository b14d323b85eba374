"""The hybrid field ``F = f_known + N_theta`` and its hand-written jets (Eq. 2, 11).

``N_theta(x) = s_out * MLP(x / s_in)``: inputs scaled by the calibrated state RMS
``x_rms`` and outputs by the calibrated first-derivative RMS ``s1``. Everything on
the training path (F, the JVP ``J_F v``, the VJP ``J_F^T u``, the Lie derivative
``G = J_F F`` and parameter gradients) is explicit tensor algebra; no autograd.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .mlp import Activations, Tangents, TanhMLP
from .systems.base import VectorField, check_states

__all__ = ["HybridField", "FieldJet"]


@dataclass
class FieldJet:
    """The field and its Lie derivative at a batch of states, with what the reverse sweeps need.

    Attributes:
        x: states, shape (B, n).
        value: ``F(x)``, shape (B, n).
        lie: ``G(x) = J_F(x) F(x)`` (Eq. 11), shape (B, n), or None if not computed.
        known_jacobian: ``J_fknown(x)``, shape (B, n, n), or None without ``lie``.
        acts: MLP activations at ``x / s_in``.
        tangents: MLP tangents along ``F / s_in``, or None.
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
        known: the known physics ``f_known`` (an analytic `VectorField`).
        hidden: hidden widths of the tanh MLP, default ``(16, 16)``.
        dtype: parameter dtype.
        generator: random generator for reproducible initial weights.
        last_layer_gain: initial scale of the MLP's output layer.
    """

    def __init__(self, known: VectorField, hidden: Sequence[int] = (16, 16),
                 dtype: torch.dtype = torch.float64, generator: torch.Generator | None = None,
                 last_layer_gain: float = 0.1) -> None:
        super().__init__()
        n = int(known.n_states)
        self.known = known
        self.n_states = n
        self.mlp = TanhMLP((n, *hidden, n), dtype=dtype, generator=generator, last_layer_gain=last_layer_gain)
        self.register_buffer("in_scale", torch.ones(n, dtype=dtype))
        self.register_buffer("out_scale", torch.ones(n, dtype=dtype))

    @classmethod
    def from_seed(cls, known: VectorField, seed: int, hidden: Sequence[int] = (16, 16),
                  dtype: torch.dtype = torch.float64, last_layer_gain: float = 0.1) -> HybridField:
        """A field whose initial weights depend only on ``seed``.

        Every trainer of the project builds its field this way, so jet matching and the
        solver baselines start from identical weights for the same seed.
        """
        gen = torch.Generator().manual_seed(int(seed))
        return cls(known, hidden=hidden, dtype=dtype, generator=gen, last_layer_gain=last_layer_gain)

    def set_scales(self, in_scale: Tensor, out_scale: Tensor) -> None:
        """Set the calibration scales.

        Args:
            in_scale: state RMS ``x_rms`` per channel, shape (n,), > 0.
            out_scale: first-derivative RMS ``s1`` per channel, shape (n,), > 0.

        Raises:
            ValueError: for a wrong shape or a non-positive or non-finite scale.
        """
        for name, s in (("in_scale", in_scale), ("out_scale", out_scale)):
            s = torch.as_tensor(s)
            if s.shape != (self.n_states,) or not bool(torch.isfinite(s).all()) or bool((s <= 0).any()):
                raise ValueError(f"{name} must be {self.n_states} positive finite numbers; got {s.tolist()}.")
            getattr(self, name).copy_(s)

    def parameters_list(self) -> list[Tensor]:
        """The trainable parameters in the order of the hand-written gradients."""
        return self.mlp.ordered_parameters()

    def num_parameters(self) -> int:
        """Number of trainable scalars (354 for 2-16-16-2, 420 for 4-16-16-4)."""
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

    def forward(self, x: Tensor) -> Tensor:
        """``F(x)``, validated: (N, n) states -> (N, n) time derivatives, in `dtype`.

        Raises:
            TypeError, ValueError: see `check_input`.
        """
        self.check_input(x)
        return self.evaluate_unchecked(x)

    def evaluate(self, x: Tensor) -> Tensor:
        """``F(x)``, validated; the same as calling the field (`forward`)."""
        return self.forward(x)

    def evaluate_unchecked(self, x: Tensor) -> Tensor:
        """``F(x)`` without input validation, (N, n) -> (N, n), for the library's hot loops.

        The caller guarantees a finite (N, n) tensor in `dtype` (or complex128 for
        complex-step checks); anything else gives wrong values or a low-level error.
        """
        return self.known(x) + self.out_scale * self.mlp(x / self.in_scale)

    def residual(self, x: Tensor) -> Tensor:
        """The neural residual ``N_theta(x)``, (N, n) -> (N, n), validated (see `check_input`)."""
        self.check_input(x)
        return self.out_scale * self.mlp(x / self.in_scale)

    def jet(self, x: Tensor, lie: bool = True) -> FieldJet:
        """``F`` and (optionally) ``G = J_F F`` at ``x`` (B, n), keeping the caches.

        ``G`` uses the known field's Jacobian and the MLP's forward-mode tangent
        along ``v = F(x)``.
        """
        acts = self.mlp.activations(x / self.in_scale)
        value = self.known(x) + self.out_scale * acts.output
        tangents, g, jk = None, None, None
        if lie:
            jk = self.known.jacobian(x)
            tangents = self.mlp.jvp(acts, value / self.in_scale)
            g = torch.einsum("bij,bj->bi", jk, value) + self.out_scale * tangents.output
        return FieldJet(x=x, value=value, lie=g, known_jacobian=jk, acts=acts, tangents=tangents)

    # ----- state derivatives ------------------------------------------------------------------
    def jvp(self, x: Tensor, v: Tensor) -> Tensor:
        """``J_F(x) v`` for (B, n) states and tangents -> (B, n)."""
        acts = self.mlp.activations(x / self.in_scale)
        return self.known.jvp(x, v) + self.out_scale * self.mlp.jvp(acts, v / self.in_scale).output

    def vjp(self, x: Tensor, u: Tensor) -> Tensor:
        """``J_F(x)^T u`` for (B, n) states and cotangents -> (B, n)."""
        acts = self.mlp.activations(x / self.in_scale)
        return self.known.vjp(x, u) + self.vjp_residual(acts, u)

    def vjp_residual(self, acts: Activations, u: Tensor) -> Tensor:
        """``J_N^T u`` at the point of ``acts``, (B, n) -> (B, n)."""
        return self.mlp.vjp_input(acts, self.out_scale * u) / self.in_scale

    def jacobian(self, x: Tensor) -> Tensor:
        """The state Jacobian ``J_F(x)``, (B, n) -> (B, n, n), from n JVPs."""
        acts = self.mlp.activations(x / self.in_scale)
        cols = []
        eye = torch.eye(self.n_states, dtype=x.dtype)
        for j in range(self.n_states):
            e = eye[j].expand_as(x)
            cols.append(self.out_scale * self.mlp.jvp(acts, e / self.in_scale).output)
        return self.known.jacobian(x) + torch.stack(cols, dim=2)

    def lie_derivative(self, x: Tensor) -> Tensor:
        """``G(x) = J_F(x) F(x)`` (Eq. 11), (B, n) -> (B, n)."""
        return self.jet(x).lie

    # ----- parameter derivatives ----------------------------------------------------------------
    def parameter_vjp(self, acts: Activations, ubar: Tensor, tangents: Tangents | None = None,
                      wbar: Tensor | None = None) -> list[Tensor]:
        """Gradient in theta of ``sum(ubar * N) + sum(wbar * J_N v)`` (Eq. 16).

        Args:
            acts: MLP activations at the states.
            ubar: cotangent of ``N_theta(x)``, shape (B, n).
            tangents: MLP tangents along ``v / s_in`` (from `jet`), needed with ``wbar``.
            wbar: cotangent of ``J_N(x) v`` with ``v`` held fixed, shape (B, n), or None.

        Returns:
            Gradients matching `parameters_list`, summed over the batch.
        """
        tbar = None if wbar is None else self.out_scale * wbar
        return self.mlp.backward(acts, self.out_scale * ubar, tangents, tbar)

    def write_grad(self, grads: Sequence[Tensor]) -> None:
        """Store hand-written gradients in ``.grad`` so any ``torch.optim`` optimizer can step."""
        params = self.parameters_list()
        if len(grads) != len(params):
            raise ValueError(f"expected {len(params)} gradient tensors; got {len(grads)}.")
        for p, g in zip(params, grads):
            if p.grad is None:
                p.grad = g.detach().clone()
            else:
                p.grad.copy_(g)

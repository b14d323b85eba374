"""Exact discrete adjoint of the taped RK4 forward pass, derived by hand.

Reverse-mode differentiation of the discretized solver (not the continuous adjoint
ODE), Section 4.1 of the jet-matching paper. With ``a`` the cotangent of
``x_{k+1}`` (the loss's direct term plus what flows back from later steps), the
transposed RK4 step is::

    kbar4 = h/6 a                        g4 = J_F(z4)^T kbar4
    kbar3 = h/3 a + h   g4               g3 = J_F(z3)^T kbar3
    kbar2 = h/3 a + h/2 g3               g2 = J_F(z2)^T kbar2
    kbar1 = h/6 a + h/2 g2               g1 = J_F(z1)^T kbar1
    xbar_k = a + g1 + g2 + g3 + g4

and the parameter gradient gains ``sum_i (dN/dtheta(z_i))^T kbar_i``. The products
``J_F^T u`` use the field's hand-written VJPs at the taped stage states and
activations (and, for a field with recorded inputs, the taped stage inputs: the state
Jacobian ``J_x F`` there; the inputs are data); no autograd graph is built.
"""
from __future__ import annotations

import torch
from torch import Tensor

from torch_ude.field import HybridField

from .rk4 import RK4Tape

__all__ = ["rk4_adjoint"]


@torch.no_grad()
def rk4_adjoint(field: HybridField, tape: RK4Tape, h: float, state_bar: Tensor) -> tuple[list[Tensor], Tensor]:
    """Reverse sweep through the RK4 stages of ``tape``.

    Args:
        field: the field `baselines.rk4.rk4_forward` integrated.
        tape: the tape that forward pass recorded.
        h: the step it used, in s.
        state_bar: direct cotangents ``dL/dx_k`` of the step states ``x_1 .. x_K``,
            shape (K, B, n).

    Returns:
        ``(grads, x0_bar)``: the gradient in theta, ordered like
        ``field.parameters_list()`` and summed over the windows, and the cotangent of
        the initial states, shape (B, n).

    Raises:
        ValueError: if ``state_bar`` does not match the tape's states.
    """
    if state_bar.shape != tape.states.shape:
        raise ValueError(
            f"state_bar must have the shape of the taped states {tuple(tape.states.shape)}; "
            f"got {tuple(state_bar.shape)}."
        )
    weights = (h / 6.0, h / 3.0, h / 3.0, h / 6.0)
    feed = (0.5 * h, 0.5 * h, h)  # dz_{i+1} / dk_i for i = 1, 2, 3
    grads = [torch.zeros_like(p) for p in field.parameters_list()]
    kbar = torch.empty_like(tape.stages[0])  # (4, B, n)
    a = torch.zeros_like(state_bar[0])
    for k in range(tape.steps - 1, -1, -1):
        a = a + state_bar[k]
        xbar = a.clone()
        pulled = None  # J_F(z_{i+1})^T kbar_{i+1}
        for i in range(3, -1, -1):
            kb = kbar[i]
            torch.mul(a, weights[i], out=kb)
            if pulled is not None:
                kb.add_(pulled, alpha=feed[i])
            z = tape.stages[k, i]
            acts = tape.activations(field, k, i)
            if tape.inputs is None:
                pulled = field.known.vjp(z, kb) + field.vjp_residual(acts, kb)
            else:
                pulled = field.known.vjp(z, tape.inputs[k, i], kb) + field.vjp_residual(acts, kb)
            xbar.add_(pulled)
        flat_bar = kbar.reshape(-1, field.n_states)
        step_grads = field.parameter_vjp(tape.activations(field, k, slice(None)), flat_bar)
        if field.physical:  # the known model's trained parameters (torch_ude.systems.parameters)
            u = None if tape.inputs is None else tape.inputs[k].reshape(-1, tape.inputs.shape[-1])
            stages = tape.stages[k].reshape(-1, field.n_states)
            step_grads = list(step_grads) + [field.physical_vjp(stages, u, flat_bar)]
        for g, s in zip(grads, step_grads):
            g.add_(s)
        a = xbar
    return grads, a

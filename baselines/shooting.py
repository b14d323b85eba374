"""The multiple-shooting objective: RK4 rollouts of the hybrid field scored against observations.

For ``B`` windows of ``K`` steps (Section 4.1 of the jet-matching paper) the loss is
the mean squared state error over all ``K + 1`` observations of each window,

    L(theta, s) = 1 / ((K + 1) B n) * sum_{k=0..K} sum_b sum_j w_j (x_{b,k,j}(theta, s_b) - y_{b,k,j})^2,

with ``x_{b,0} = s_b`` and ``x_{b,k}`` the RK4 rollout of ``F = f_known + N_theta``
from the window's shooting state ``s_b``, and channel weights ``w_j = 1 / scale_j^2``
(all ones for the plain mean squared error). The shooting states start at the noisy
observations ``y_{b,0}``; a trainer may keep them there (the ``k = 0`` term is then
zero) or estimate them along with theta (the shooting-node variables of Bock and
Plitt's multiple shooting), in which case the ``k = 0`` term ties each state to its
observation: without it a window of ``K = 1`` step could absorb its one observation
into its free state and tell theta nothing. Both gradients come from the
hand-derived discrete adjoint (`baselines.adjoint`).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from torch_ude.field import HybridField

from .adjoint import rk4_adjoint
from .rk4 import RK4Tape, rk4_forward
from .windows import ShootingWindows

__all__ = ["ShootingObjective", "ShootingGradient"]


@dataclass
class ShootingGradient:
    """One evaluation of the objective and its gradient.

    Attributes:
        loss: ``L`` (a 0-d tensor in the field's dtype).
        grads: ``dL/dtheta``, ordered like ``field.parameters_list()``, or None when the
            rollout (or the gradient) was not finite.
        state_grad: ``dL/ds``, shape (B, n), or None likewise.
        finite: whether every rollout state and gradient entry is finite.
    """

    loss: Tensor
    grads: list[Tensor] | None
    state_grad: Tensor | None
    finite: bool


class ShootingObjective:
    """The loss above on fixed windows, with the tape allocated once for them.

    Args:
        field: the hybrid field; the tape and the windows take its dtype.
        windows: from `baselines.windows.shooting_windows`.
        state_scale: per-channel scale of the state error, shape (n,) (e.g. the
            calibrated ``x_rms``), or None for the plain mean squared error.

    Attributes:
        shooting_states: ``s``, the windows' initial states, shape (B, n), a copy of
            ``windows.x0`` that a trainer may update in place.
        state_scale: ``state_scale`` as given.
    """

    def __init__(self, field: HybridField, windows: ShootingWindows, state_scale: Tensor | None = None) -> None:
        n = field.n_states
        if windows.x0.shape[1] != n:
            raise ValueError(
                f"the windows hold {windows.x0.shape[1]}-dimensional states but the field has "
                f"n = {n}; build them from the same plant's stream."
            )
        dtype = field.in_scale.dtype
        self.field, self.state_scale = field, state_scale
        self.windows = windows.to(dtype)
        self.shooting_states = self.windows.x0.clone()
        self.tape = RK4Tape.allocate(field, windows.steps, windows.batch)
        if state_scale is None:
            self.weight = torch.ones(n, dtype=dtype)
        else:
            scale = torch.as_tensor(state_scale, dtype=torch.float64)
            if scale.shape != (n,) or not bool(torch.isfinite(scale).all()) or bool((scale <= 0).any()):
                raise ValueError(f"state_scale must be {n} positive finite numbers or None; got {scale.tolist()}.")
            self.weight = (1.0 / scale**2).to(dtype)
        self.scale = 1.0 / ((windows.steps + 1) * windows.batch * n)

    def residual(self) -> Tensor:
        """States minus observations, ``x_{b,k} - y_{b,k}`` for k = 0..K, shape (K + 1, B, n).

        Row 0 is ``s - y_0``; rows 1..K come from one taped forward pass.
        """
        states = torch.cat([self.shooting_states[None],
                            rk4_forward(self.field, self.shooting_states, self.windows.h, self.tape,
                                        self.windows.inputs)])
        return states - self.windows.observations

    def loss(self) -> Tensor:
        """``L`` (also in complex128: ``r * r``, not ``|r|^2``, keeps it holomorphic for complex step)."""
        residual = self.residual()
        return self.scale * (self.weight * residual * residual).sum()

    def gradient(self) -> ShootingGradient:
        """``L`` and its exact gradients in theta and in the shooting states, by the discrete adjoint.

        A rollout that leaves the finite numbers (a diverging window) gives
        ``finite = False`` and no gradient, so a caller can skip the step.
        """
        residual = self.residual()
        loss = self.scale * (self.weight * residual * residual).sum()
        if not bool(torch.isfinite(loss)):
            return ShootingGradient(loss=loss, grads=None, state_grad=None, finite=False)
        cotangent = (2.0 * self.scale) * self.weight * residual
        grads, state_grad = rk4_adjoint(self.field, self.tape, self.windows.h, cotangent[1:])
        state_grad = state_grad + cotangent[0]
        finite = bool(torch.isfinite(state_grad).all()) and all(bool(torch.isfinite(g).all()) for g in grads)
        if not finite:
            return ShootingGradient(loss=loss, grads=None, state_grad=None, finite=False)
        return ShootingGradient(loss=loss, grads=grads, state_grad=state_grad, finite=True)

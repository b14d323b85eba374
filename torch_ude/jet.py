"""The Lie-Taylor jet matching loss and its exact, hand-written gradient (Eq. 10-16).

Per sample, ``r1 = (xdot_hat - F(x_hat)) / s1`` and ``r2 = (xddot_hat - G(x_hat)) / s2``
(element-wise per channel); the batch loss is the mean over samples of
``lambda1 ||r1||^2 + lambda2 ||r2||^2``.

With a recorded input (a field on a `torch_ude.systems.ControlledField`), every method
also takes the SG estimates ``u`` and ``udot`` of the input at the same window centres:
``r1`` compares with ``F(x, u)`` and ``r2`` with ``G = J_x F F + J_u F udot``
(`torch_ude.field`); the gradient formula is unchanged.

A known model with trained physical parameters (`torch_ude.systems.parameters`) adds their
gradient after the network's: ``ubar`` pulled back through ``df/dp`` plus ``lambda2 w``
through ``d/dp (J_x f v + J_u f udot)`` with ``v = F`` held fixed, as for the network.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.utils.flop_counter import FlopCounterMode

from .field import HybridField
from .systems.base import check_states

__all__ = ["JetLoss", "JetResult", "jet_update_macs"]


@dataclass
class JetResult:
    """Loss terms and gradient of one minibatch.

    Attributes:
        loss: total loss, 0-dim tensor.
        loss_r1: mean ``||r1||^2`` (unweighted), 0-dim tensor.
        loss_r2: mean ``||r2||^2`` (unweighted), 0-dim tensor.
        grads: gradients in the order of ``HybridField.parameters_list()``.
    """

    loss: Tensor
    loss_r1: Tensor
    loss_r2: Tensor
    grads: list[Tensor]


class JetLoss(nn.Module):
    """Jet matching loss with its analytic gradient; no autograd graph is built.

    Args:
        s1: first-derivative scale per channel, shape (n,) (calibration RMS of xdot).
        s2: second-derivative scale per channel, shape (n,) (calibration RMS of xddot).
        lambda1: weight of the first-order term (>= 0).
        lambda2: weight of the second-order term (>= 0); the SNR gate sets it to 0.
    """

    def __init__(self, s1: Tensor, s2: Tensor, lambda1: float = 1.0, lambda2: float = 0.1) -> None:
        super().__init__()
        s1, s2 = torch.as_tensor(s1), torch.as_tensor(s2)
        for name, s in (("s1", s1), ("s2", s2)):
            if s.ndim != 1 or not bool(torch.isfinite(s).all()) or bool((s <= 0).any()):
                raise ValueError(f"{name} must be a vector of positive finite scales; got {s.tolist()}.")
        if s1.shape != s2.shape:
            raise ValueError(f"s1 and s2 must have the same shape; got {tuple(s1.shape)} and {tuple(s2.shape)}.")
        self.register_buffer("s1", s1.clone())
        self.register_buffer("s2", s2.clone())
        self.lambda1 = float(lambda1)
        self.lambda2 = float(lambda2)
        if self.lambda1 < 0 or self.lambda2 < 0:
            raise ValueError(f"loss weights must be >= 0; got lambda1={lambda1}, lambda2={lambda2}.")

    def _check(self, field: HybridField, x: Tensor, xdot: Tensor, xddot: Tensor, u: Tensor | None = None,
               udot: Tensor | None = None) -> None:
        n = field.n_states
        if self.s1.shape != (n,):
            raise ValueError(f"the loss scales have {self.s1.shape[0]} channels but the field has {n}.")
        if self.s1.dtype != field.dtype:
            raise TypeError(f"the loss scales are {self.s1.dtype} but the field's parameters are {field.dtype}; "
                            f"convert the loss with loss.to({field.dtype}).")
        for name, t in (("x", x), ("xdot", xdot), ("xddot", xddot)):
            check_states(t, n, name, dtype=field.dtype)
        if not (x.shape == xdot.shape == xddot.shape):
            raise ValueError(
                f"x, xdot and xddot must have the same shape; got {tuple(x.shape)}, "
                f"{tuple(xdot.shape)}, {tuple(xddot.shape)}."
            )
        if x.shape[0] == 0:
            raise ValueError(
                "x, xdot and xddot hold no samples (batch size 0); the loss is a mean over the batch, "
                "so pass at least one sample."
            )
        field.check_inputs(x, u, "u")
        if u is not None:
            field.check_inputs(x, udot, "udot")
        elif udot is not None:
            raise ValueError("udot was given without u; pass both (the input and its rate) or neither.")

    def residuals(self, field: HybridField, x: Tensor, xdot: Tensor, xddot: Tensor, u: Tensor | None = None,
                  udot: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """The scaled residuals ``r1, r2`` (Eq. 10, 12), each (B, n); no validation.

        ``u``, ``udot``: the input and its rate, (B, n_u) each, for a field with inputs.
        """
        jet = field.jet(x) if u is None else field.jet(x, u=u, udot=udot)
        return (xdot - jet.value) / self.s1, (xddot - jet.lie) / self.s2

    def forward(self, field: HybridField, x: Tensor, xdot: Tensor, xddot: Tensor, u: Tensor | None = None,
                udot: Tensor | None = None) -> Tensor:
        """The loss value only (Eq. 13), 0-dim; analytic in the weights (``r*r``, not ``|r|^2``)."""
        r1, r2 = self.residuals(field, x, xdot, xddot, u, udot)
        return (self.lambda1 * (r1 * r1).sum() + self.lambda2 * (r2 * r2).sum()) / x.shape[0]

    def value_and_grad(self, field: HybridField, x: Tensor, xdot: Tensor, xddot: Tensor,
                       validate: bool = True, report_r2: bool = True, u: Tensor | None = None,
                       udot: Tensor | None = None, out: list[Tensor] | None = None) -> JetResult:
        """Loss and its exact gradient in theta by Eq. (14)-(16).

        ``ubar = -2 (lambda1 r1/s1 + lambda2 J_F^T r2/s2)`` is pulled back through the
        network (a VJP) and ``w = -2 r2/s2`` through the JVP along ``v = sg[F]``
        (reverse over JVP); the n x p Jacobian is never formed.

        Args:
            field: the hybrid field.
            x, xdot, xddot: SG estimates of state, first and second derivative, (B, n).
            validate: check shapes, dtypes, batch size and finiteness (the public boundary);
                the training loop passes False for samples it has already checked.
            report_r2: compute ``||r2||^2`` even when ``lambda2 = 0`` (it then needs a JVP
                that the gradient does not); if False, ``loss_r2`` is NaN in that case.
            u, udot: SG estimates of the recorded input and its rate at the same window
                centres, (B, n_u) each; required for a field with inputs, None without.
            out: tensors to write the gradients into, in the order of
                ``field.parameters_list()`` (the training loop passes the parameters' ``.grad``),
                or None for new tensors (`HybridField.parameter_vjp`).

        Returns:
            A `JetResult` with gradients in the order of ``field.parameters_list()`` (``out``
            when given).

        Raises:
            TypeError: if an input is not a tensor in the field's dtype (``field.dtype``).
            ValueError: for shapes other than (B, n) with B >= 1, unequal shapes, or NaN/Inf.
        """
        if validate:
            self._check(field, x, xdot, xddot, u, udot)
        with torch.no_grad():
            b = x.shape[0]
            second = self.lambda2 > 0.0
            s1 = self.s1
            if u is None:
                jet = field.jet(x, lie=second or report_r2)
            else:
                jet = field.jet(x, lie=second or report_r2, u=u, udot=udot)
            r1 = (xdot - jet.value) / s1
            sq1 = (r1 * r1).sum() / b
            if jet.lie is None:
                r2, sq2 = None, torch.full_like(sq1, float("nan"))
            else:
                r2 = (xddot - jet.lie) / self.s2
                sq2 = (r2 * r2).sum() / b
            ubar = (-2.0 * self.lambda1 / b) * (r1 / s1)
            physical = field.physical
            net_out = out[:-1] if physical and out is not None else out
            if second:
                w = (-2.0 / b) * (r2 / self.s2)
                jtw = torch.einsum("bij,bi->bj", jet.known_jacobian, w) + field.vjp_residual(jet.acts, w)
                ubar = ubar + self.lambda2 * jtw
                grads = field.parameter_vjp(jet.acts, ubar, jet.tangents, self.lambda2 * w, out=net_out)
                loss = self.lambda1 * sq1 + self.lambda2 * sq2
            else:
                grads = field.parameter_vjp(jet.acts, ubar, out=net_out)
                loss = sq1 if self.lambda1 == 1.0 else self.lambda1 * sq1  # 1 * sq1 is sq1, bit for bit
            if physical:
                wbar = self.lambda2 * w if second else None
                phys = field.physical_vjp(x, u, ubar, jet.value, udot, wbar)
                grads = list(grads) + [out[-1].copy_(phys) if out is not None else phys]
        return JetResult(loss=loss, loss_r1=sq1, loss_r2=sq2, grads=grads)


def jet_update_macs(field: HybridField, lambda2: float, batch: int = 64) -> dict:
    """Multiply-accumulates of the matrix products of one jet-matching gradient (`JetLoss.value_and_grad`,
    Eq. (14)-(16)) on a minibatch: the compute count of an update (the paper's Table 3), from torch's
    ``FlopCounterMode`` (matrix-product FLOPs / 2; elementwise work is not counted).

    The count depends on the shapes alone: it is taken on random jets (and inputs, for a field with
    inputs), unit scales and ``lambda1 = 1``.

    Args:
        field: the hybrid field.
        lambda2: the second-order weight; 0 leaves out the Lie-derivative term (the SNR gate's "off").
        batch: the minibatch size B.

    Returns:
        ``{"matmul_macs": total, "by_op": {torch op name: MACs}}``, integers.
    """
    n, dtype = field.n_states, field.dtype
    x, xdot, xddot = (torch.randn(batch, n, dtype=dtype) for _ in range(3))
    inputs = {}
    if field.n_inputs:
        inputs = {k: torch.randn(batch, field.n_inputs, dtype=dtype) for k in ("u", "udot")}
    ones = torch.ones(n, dtype=dtype)
    with FlopCounterMode(display=False) as counter:
        JetLoss(ones, ones, 1.0, lambda2).value_and_grad(field, x, xdot, xddot, report_r2=False, **inputs)
    return {"matmul_macs": counter.get_total_flops() // 2,
            "by_op": {str(k): v // 2 for k, v in counter.get_flop_counts()["Global"].items()}}

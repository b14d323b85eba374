"""What a run reports of its trained physical parameters: values, bounds and standard errors.

The standard errors come from the Gauss–Newton approximation of the jet loss at the end of
training: with ``r = (sqrt(lambda1) r1, sqrt(lambda2) r2)`` the scaled residuals of Eq. (10)
and (12) over the jets of the sample buffer and ``J = dr/dp`` their Jacobian in the physical
parameters (hand-written: ``dr1/dp = -(df/dp) / s1`` and ``dr2/dp = -(d/dp (J_x f v + J_u f
udot) + J_F df/dp) / s2`` with ``v = F``), the covariance is ``s^2 (J^T J)^-1`` with
``s^2 = |r|^2 / (N - P)``. Two caveats, said in every report: the errors are conditional on
the network (held at its trained weights; a residual that can imitate a physical term makes
the parameter less certain than this), and neighbouring jets share samples, so the residuals
are not independent and the errors are too small by a factor of about the square root of the
samples two jets share. Float64.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from .field import HybridField
from .jet import JetLoss

__all__ = ["physical_report", "STANDARD_ERROR_NOTE"]

#: How to read the standard errors (module doc), recorded beside them.
STANDARD_ERROR_NOTE = ("Gauss-Newton standard errors of the jet loss at the end of training, conditional on the "
                       "network; neighbouring jets share samples, so they understate the uncertainty.")


@torch.no_grad()
def physical_report(field: HybridField, loss: JetLoss, x: Tensor, xdot: Tensor, xddot: Tensor,
                    u: Tensor | None = None, udot: Tensor | None = None) -> dict | None:
    """The trained physical parameters of ``field``'s known model on the jets ``(x, xdot, xddot)``.

    Args:
        field: a field whose known model trains physical parameters (`torch_ude.systems.parameters`).
        loss: the jet loss with the run's scales and weights.
        x, xdot, xddot: SG jets, (B, n) each; u, udot: the inputs' jets (B, n_u), with inputs.

    Returns:
        ``{name: {"value", "initial", "low", "high", "standard_error"}}`` plus ``"note"``
        (`STANDARD_ERROR_NOTE`), or None when the known model trains nothing. A standard error
        is NaN when the jets do not determine the parameter (a singular ``J^T J``).
    """
    if not field.physical:
        return None
    known = field.known
    dtype = field.dtype
    x, xdot, xddot = (t.to(dtype) for t in (x, xdot, xddot))
    u, udot = (None, None) if u is None else (u.to(dtype), udot.to(dtype))
    jet = field.jet(x, u=u, udot=udot)
    jac = known.parameter_jacobian(x) if u is None else known.parameter_jacobian(x, u)
    lie = known.parameter_lie_jacobian(x, jet.value) if u is None else \
        known.parameter_lie_jacobian(x, u, jet.value, udot)
    lie = lie + torch.einsum("bij,bjp->bip", field.jacobian(x, u), jac)
    s1, s2 = loss.s1.to(dtype), loss.s2.to(dtype)
    rows = [math.sqrt(loss.lambda1) * (-jac / s1[:, None]).reshape(-1, jac.shape[2])]
    res = [math.sqrt(loss.lambda1) * ((xdot - jet.value) / s1).reshape(-1)]
    if loss.lambda2 > 0:
        rows.append(math.sqrt(loss.lambda2) * (-lie / s2[:, None]).reshape(-1, lie.shape[2]))
        res.append(math.sqrt(loss.lambda2) * ((xddot - jet.lie) / s2).reshape(-1))
    j, r = torch.cat(rows).to(torch.float64), torch.cat(res).to(torch.float64)
    p = j.shape[1]
    dof = max(r.numel() - p, 1)
    try:
        cov_theta = torch.linalg.inv(j.T @ j) * float(r @ r) / dof
        se_theta = torch.sqrt(torch.clamp(torch.diagonal(cov_theta), min=0.0))
    except RuntimeError:  # singular: the jets do not determine the parameters
        se_theta = torch.full((p,), math.nan, dtype=torch.float64)
    spans = known.spans().to(torch.float64)
    values = known.values()
    out = {name: {"value": values[name], "initial": float(known.p0[i]), "low": float(known.p_low[i]),
                  "high": float(known.p_high[i]), "standard_error": float(spans[i] * se_theta[i])}
           for i, name in enumerate(known.trainable_names)}
    out["note"] = STANDARD_ERROR_NOTE
    return out

"""What a run reports of its trained physical parameters (values, bounds and standard errors), and
the refit of a physics-alone field's parameters by bounded least squares on the jets.

The standard errors come from the Gauss–Newton approximation of the jet loss at the end of
training: with ``r = (sqrt(lambda1) r1, sqrt(lambda2) r2)`` the scaled residuals of Eq. (10)
and (12) over the jets of the sample buffer and ``J = dr/dp`` their Jacobian in the physical
parameters (hand-written: ``dr1/dp = -(df/dp) / s1`` and ``dr2/dp = -(d/dp (J_x f v + J_u f
udot) + J_F df/dp) / s2`` with ``v = F``), the covariance is ``s^2 (J^T J)^-1`` with
``s^2 = |r|^2 / (N - P)``. Two caveats, said in every report: the errors are conditional on
the network (held at its trained weights; a residual that can imitate a physical term makes
the parameter less certain than this), and neighbouring jets share samples, so the residuals
are not independent and the errors are too small by a factor of about the square root of the
samples two jets share.

The same residuals and Jacobian drive `refit_physical_parameters`: where a run exports its physics
alone (the physical parameters trained alone, or a residual the check rejected), the parameters
are refitted to the exact minimum of the jet loss on the sample buffer, within their bounds
(scipy's trust-region reflective least squares), instead of the stochastic minibatch optimum the
run ended at or, after a rejected residual, values fitted beside a residual that took a share of
the physics. Float64.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.optimize
import torch
from torch import Tensor

from .field import HybridField
from .jet import JetLoss

__all__ = ["physical_report", "refit_physical_parameters", "STANDARD_ERROR_NOTE"]

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
    j, r = _scaled_residuals(field, loss, x, xdot, xddot, u, udot)
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


def _scaled_residuals(field: HybridField, loss: JetLoss, x: Tensor, xdot: Tensor, xddot: Tensor,
                      u: Tensor | None, udot: Tensor | None) -> tuple[Tensor, Tensor]:
    """The scaled jet residuals ``r`` (R,) of ``field`` (module doc) and their Jacobian ``dr/dtheta``
    (R, P) in the known model's ``theta``, float64; ``R = B n`` (first order) plus ``B n`` with
    the second-order term (``loss.lambda2 > 0``)."""
    known, dtype = field.known, field.dtype
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
    return torch.cat(rows).to(torch.float64), torch.cat(res).to(torch.float64)


@torch.no_grad()
def refit_physical_parameters(field: HybridField, loss: JetLoss, x: Tensor, xdot: Tensor, xddot: Tensor,
                              u: Tensor | None = None, udot: Tensor | None = None, max_evaluations: int = 50) -> dict:
    """Refit, in place, the physical parameters of a physics-alone field to the minimum of the jet
    loss on the jets ``(x, xdot, xddot)``, within their bounds.

    Bounded trust-region reflective least squares (``scipy.optimize.least_squares``, method
    ``"trf"``) on the scaled residuals of the module doc with their hand-written Jacobian, started
    at the field's current ``theta``. The jets are the ones training saw (the sample buffer), so
    this changes the optimiser, not the data or the objective: the result is the exact optimum
    of the run's own loss rather than the end of its stochastic minibatch descent.

    Args:
        field: a field whose known model trains physical parameters and whose residual is zero
            (`HybridField.without_residual`, or a run with ``physics_first`` 1); its
            ``known.theta`` is overwritten with the refit.
        loss: the jet loss with the run's scales and weights.
        x, xdot, xddot: SG jets, (B, n) each; u, udot: the inputs' jets (B, n_u), with inputs.
        max_evaluations: the most residual evaluations (each one pass over the B jets).

    Returns:
        ``{"loss_before", "loss_after"}`` (the scaled sum of squares ``|r|^2`` per jet, before and
        after), ``"evaluations"``, ``"converged"`` (scipy's status > 0) and ``"values_before"``
        (the parameters it started from, by name).

    Raises:
        ValueError: for a field that trains no physical parameters.
    """
    if not field.physical:
        raise ValueError("refit_physical_parameters needs a known model that trains physical parameters "
                         "(torch_ude.systems.parameters); this one trains none.")
    known = field.known
    theta = known.theta
    spans = known.spans().to(torch.float64)
    low = ((known.p_low - known.p0).to(torch.float64) / spans).numpy()
    high = ((known.p_high - known.p0).to(torch.float64) / spans).numpy()
    start = np.clip(theta.detach().to(torch.float64).numpy(), low, high)
    values_before = known.values()
    cache: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}

    def evaluate(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        key = t.tobytes()
        if key not in cache:
            cache.clear()
            theta.copy_(torch.as_tensor(t, dtype=theta.dtype))
            j, r = _scaled_residuals(field, loss, x, xdot, xddot, u, udot)
            cache[key] = (r.numpy(), j.numpy())
        return cache[key]

    n_jets = x.shape[0]
    loss_before = float(np.sum(evaluate(start)[0] ** 2)) / n_jets
    sol = scipy.optimize.least_squares(lambda t: evaluate(t)[0], start, jac=lambda t: evaluate(t)[1],
                                       bounds=(low, high), method="trf", x_scale="jac", max_nfev=max_evaluations)
    theta.copy_(torch.as_tensor(sol.x, dtype=theta.dtype))
    return {"loss_before": loss_before, "loss_after": 2.0 * float(sol.cost) / n_jets, "evaluations": int(sol.nfev),
            "converged": bool(sol.status > 0), "values_before": values_before}

"""Reference gradients of the shooting objective, for checking the discrete adjoint (Section 4.1).

Complex-step differentiation recovers ``dL/dp = Im L(p + i h) / h`` to machine precision
(no cancellation, so ``h = 1e-30``), one coordinate at a time, on a complex128 copy of the
field; ``torch.autograd`` through the core's unrolled RK4 (`torch_ude.rk4.rk4_rollout`) is the
second reference. `adjoint_errors` compares `baselines.ShootingObjective.gradient` with both; the
adjoint tests (``tests/baselines/test_adjoint.py``) and ``python -m benchmarks.baseline.gradcheck``
call it.
"""
from __future__ import annotations

import copy
import warnings
from collections.abc import Sequence

import torch
from torch import Tensor

from torch_ude import HybridField
from torch_ude.rk4 import rk4_rollout

from .shooting import ShootingObjective

__all__ = ["GRADIENT_REFERENCES", "complex_copy", "complex_step_gradient", "autograd_gradient", "relative_error",
           "adjoint_errors"]

#: The references `adjoint_errors` compares the discrete adjoint with.
GRADIENT_REFERENCES = ("complex_step", "autograd")


def complex_copy(field: HybridField) -> HybridField:
    """The field in complex128 (for complex-step differentiation)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch flags complex modules as experimental
        return copy.deepcopy(field).to(torch.complex128)


def complex_step_gradient(objective: ShootingObjective, step: float = 1e-30) -> tuple[Tensor, Tensor]:
    """``dL/dtheta`` (flattened) and ``dL/ds`` (B, n) of a complex128 objective, one entry at a time.

    Args:
        objective: a shooting objective built on a `complex_copy` of the field.
        step: the imaginary step ``h``.

    Returns:
        The gradient in the field's parameters (``parameters_list`` order, flattened) and in
        the shooting states, float64.
    """
    def derivative(tensor: Tensor) -> Tensor:
        flat = tensor.view(-1)
        out = torch.empty(flat.numel(), dtype=torch.float64)
        for j in range(flat.numel()):
            flat[j] += step * 1j
            out[j] = objective.loss().imag / step
            flat[j] -= step * 1j
        return out
    with torch.no_grad():
        theta = torch.cat([derivative(p) for p in objective.field.parameters_list()])
        states = derivative(objective.shooting_states).reshape(objective.shooting_states.shape)
    return theta, states


def autograd_gradient(objective: ShootingObjective) -> tuple[Tensor, Tensor]:
    """``dL/dtheta`` (flattened) and ``dL/ds`` (B, n) by ``torch.autograd`` through the unrolled RK4.

    The loss is written out again, ``scale * sum(w * r * r)`` with ``r`` the rollout of
    `torch_ude.rk4.rk4_rollout` from the shooting states minus the observations, so that
    nothing of the adjoint's code is shared.

    Args:
        objective: a shooting objective on windows without recorded inputs.

    Returns:
        The gradient in the field's parameters (``parameters_list`` order, flattened) and in
        the shooting states, in the field's dtype.

    Raises:
        ValueError: for windows with recorded inputs (the unrolled reference has none).
    """
    windows = objective.windows
    if windows.inputs is not None:
        raise ValueError("autograd_gradient unrolls RK4 without inputs, but the windows hold recorded inputs; "
                         "check such a field against complex_step_gradient alone.")
    params = objective.field.parameters_list()
    x0 = objective.shooting_states.clone().requires_grad_(True)
    r = rk4_rollout(objective.field.evaluate, x0, windows.h, windows.steps) - windows.observations
    loss = objective.scale * (objective.weight * r * r).sum()
    *grads, states = torch.autograd.grad(loss, [*params, x0])
    return torch.cat([g.reshape(-1) for g in grads]), states


def relative_error(a: Tensor, b: Tensor) -> float:
    """``||a - b|| / ||b||`` (2-norms over all entries) of a value ``a`` against a reference ``b``."""
    return float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b))


def adjoint_errors(objective: ShootingObjective, references: Sequence[str] = GRADIENT_REFERENCES,
                   step: float = 1e-30) -> dict[str, float]:
    """The relative errors of the discrete adjoint's gradients against the references.

    Args:
        objective: a real (float64) shooting objective; its shooting states are used as they are
            (move them off the observations, so that the state gradient is not special).
        references: among `GRADIENT_REFERENCES`: `complex_step_gradient` on a `complex_copy` of the field,
            `autograd_gradient`.
        step: the imaginary step ``h`` of complex step.

    Returns:
        Per reference ``theta_vs_<reference>`` and ``states_vs_<reference>``: `relative_error` of the
        gradient in the field's parameters and in the shooting states.

    Raises:
        ValueError: for an unknown reference, or a rollout whose gradient is not finite.
    """
    unknown = [r for r in references if r not in GRADIENT_REFERENCES]
    if unknown:
        raise ValueError(f"references must be among {list(GRADIENT_REFERENCES)}; got {unknown}.")
    result = objective.gradient()
    if not result.finite:
        raise ValueError("the objective's rollout or gradient is not finite; check a field whose windows stay "
                         "finite (shorter K, smaller weights).")
    theta = torch.cat([g.reshape(-1) for g in result.grads])
    out = {}
    for reference in references:
        if reference == "complex_step":
            complex_objective = ShootingObjective(complex_copy(objective.field), objective.windows,
                                                  objective.state_scale)
            complex_objective.shooting_states.copy_(objective.shooting_states)
            theta_ref, states_ref = complex_step_gradient(complex_objective, step)
        else:
            theta_ref, states_ref = autograd_gradient(objective)
        out[f"theta_vs_{reference}"] = relative_error(theta, theta_ref)
        out[f"states_vs_{reference}"] = relative_error(result.state_grad, states_ref)
    return out

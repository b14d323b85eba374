"""Complex-step reference gradients of the shooting objective, for checking the discrete adjoint.

Complex-step differentiation recovers ``dL/dp = Im L(p + i h) / h`` to machine precision
(no cancellation, so ``h = 1e-30``), one coordinate at a time, on a complex128 copy of the
field. The adjoint tests (``tests/baselines/test_adjoint.py``) and
``python -m benchmarks.baseline.gradcheck`` compare `baselines.ShootingObjective.gradient`
with it.
"""
from __future__ import annotations

import copy
import warnings

import torch
from torch import Tensor

from torch_ude import HybridField

from .shooting import ShootingObjective

__all__ = ["complex_copy", "complex_step_gradient"]


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

"""Smooth stand-ins for kinks, written once for torch and CasADi (through an ``ops`` namespace).

An MHE window is a smooth NLP: its KKT system (Eq. 7) and the hypergradient (Prop. 1) need
twice differentiable dynamics and outputs (Assumption 1). A physics written with a kink (a
tank's ``sqrt(max(h, 0))``, an overflow at the rim, a sensor that clips) has a Hessian that
jumps or is undefined there; these functions replace each kink by a curve of a chosen width
``w`` (in the units of the argument) and are exact to within ``w log 2`` at the kink and
``w exp(-d / w)`` at a distance ``d`` from it:

* `softplus` ``log(1 + e^z)``, evaluated without overflow;
* `positive_part` ``w softplus(z / w)``, a smooth ``max(z, 0)`` (always positive, so
  ``ops.sqrt(positive_part(h, w, ops))`` is a smooth Torricelli outflow);
* `saturate` a smooth clip of ``z`` to ``[lo, hi]`` (either side may be open).

``ops`` is `mhe.models.ops.TORCH_OPS` or `mhe.models.casadi_model.CASADI_OPS`, as in a
`mhe.models.model.PhysicsField`'s ``vector_field``.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

__all__ = ["positive_part", "saturate"]


def positive_part(z: Any, width: float, ops: SimpleNamespace) -> Any:
    """``width softplus(z / width)``: a smooth ``max(z, 0)``, above it by at most ``width log 2`` (at ``z = 0``).

    Args:
        z: a tensor or CasADi expression.
        width: the width of the rounded corner, > 0, in the units of ``z``.
        ops: `mhe.models.ops.TORCH_OPS` or `mhe.models.casadi_model.CASADI_OPS`.
    """
    return width * ops.softplus(z / width)


def saturate(z: Any, lower: float | None, upper: float | None, width: float, ops: SimpleNamespace) -> Any:
    """A smooth clip of ``z`` to ``[lower, upper]``: ``lower + pos(z - lower) - pos(z - upper)``, ``pos`` the
    `positive_part` of ``width``; an open side (None) drops its term.

    Args:
        z: a tensor or CasADi expression.
        lower: the lower limit, or None.
        upper: the upper limit, or None (``lower < upper`` when both are given).
        width: the width of the rounded corners, > 0, in the units of ``z``.
        ops: `mhe.models.ops.TORCH_OPS` or `mhe.models.casadi_model.CASADI_OPS`.
    """
    out = z
    if lower is not None:
        out = lower + positive_part(z - lower, width, ops)
    if upper is not None:
        out = out - positive_part(z - upper, width, ops)
    return out

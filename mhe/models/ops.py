"""The math functions a `mhe.models.model.PhysicsField` (or a `mhe.models.output.OutputMap`) may use, for torch.

Physics is written once on an ``ops`` namespace: torch runs it with `TORCH_OPS`, and
`mhe.models.casadi_model` runs the same code on CasADi symbols with its ``CASADI_OPS``.
"""
from __future__ import annotations

from types import SimpleNamespace

import torch
from torch import Tensor

__all__ = ["TORCH_OPS"]


def _softplus(z: Tensor) -> Tensor:
    """``log(1 + e^z)`` without overflow, the same formula as CasADi's (`mhe.models.casadi_model.CASADI_OPS`)."""
    return torch.clamp(z, min=0.0) + torch.log1p(torch.exp(-torch.abs(z)))


TORCH_OPS = SimpleNamespace(sin=torch.sin, cos=torch.cos, tan=torch.tan, atan=torch.atan, atan2=torch.atan2,
                            tanh=torch.tanh, exp=torch.exp, log=torch.log, sqrt=torch.sqrt, fabs=torch.abs,
                            softplus=_softplus)
"""The math functions a `PhysicsField` (or a `mhe.models.output.OutputMap`) may use, for torch tensors; `mhe.models.smooth`
builds smooth positive parts and clips from ``softplus``."""

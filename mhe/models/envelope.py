"""The trust envelope of mhe's neural residual: recorded from the estimated states, faded in CasADi too.

One concept with `torch_ude.envelope` (issue 33, item 5): an axis-aligned box ``[low, high]`` per
column of the residual's network input, widened by a fade band ``margin`` on each side, and the
fade ``w(z)`` (the product over the columns of ``1 - smootherstep(t_j)``, ``t_j`` the distance past
the box over the margin, clipped to [0, 1]) that multiplies the residual:
``N(x, u) = w(z) s_out MLP(z)``. The residual then fades to zero, and the model to its physics,
outside the inputs it was trained on. For `mhe.models.model.NeuralResidual` the network input is
``z = [x, u] / in_scale``, the plain columns of `torch_ude.input_map.InputMap` (no periodic or
invariant states), so the box comes from `torch_ude.envelope.envelope_from_span` and the torch fade
is `torch_ude.envelope.fade`; this module adds what the PEM-MHE side needs:

* `residual_span`: the raw range of the residual's inputs over the training windows: the states
  the MHE estimated there (the hidden ones included; no other record of them exists) and the
  inputs the windows hold (both ends of a paired hold's step input, between which the input runs);
* `record_envelope` / `mhe.pem.envelope_of_windows`: the box of a span, installed on the residual, and
  the span of the windows' MHE solutions at the current parameters (how a run records it at its
  end, `mhe.pem.finish`);
* `casadi_fade`: the same fade on CasADi symbols, written out with ``fmax`` / ``fmin`` so that
  CasADi differentiates it exactly to any order (inside the band; on its edges the fade is
  twice continuously differentiable, its first two derivatives zero on both sides), for the MHE's
  NLP (`mhe.models.casadi_model`) and a trained field's CasADi function (`mhe.models.trained_field`).

The fade does not depend on the network's weights, so the PEM hypergradient takes it as a
weighting of the residual; with it the KKT system and both hypergradients stay exact (checked
in float64 against ``torch.func`` and central differences of re-solved MHEs).
"""
from __future__ import annotations

import casadi as cs
import numpy as np
import torch
from torch import Tensor

from torch_ude.envelope import DEFAULT_MARGIN, envelope_from_span
from torch_ude.input_map import InputMap

from .model import NeuralResidual

__all__ = ["DEFAULT_MARGIN", "residual_span", "record_envelope", "casadi_fade"]


def residual_span(states: Tensor, inputs: Tensor, n_u: int) -> tuple[Tensor, Tensor]:
    """The smallest and largest value of each residual input ``[x, u]`` over the given rows.

    Args:
        states: estimated states, (..., n_x), in state units.
        inputs: step inputs, (..., n_u) or, for a paired hold, (..., 2 n_u) (``[u_k, u_{k+1}]``).
        n_u: inputs of the residual (0: none).

    Returns:
        ``(low, high)``, (n_x + n_u,) each, float64.

    Raises:
        ValueError: without any state row (an envelope from no data), for non-finite values, or for
            input rows whose width is neither ``n_u`` nor ``2 n_u``.
    """
    x = torch.as_tensor(states, dtype=torch.float64)
    x = x.reshape(-1, x.shape[-1])
    if x.shape[0] == 0:
        raise ValueError("the residual's trust envelope needs the states of at least one solved training window; "
                         "got none (no window solved, or no data): fix the solves, or set residual.envelope: false.")
    u = torch.as_tensor(inputs, dtype=torch.float64)
    u = u.reshape(-1, u.shape[-1]) if u.numel() else u.new_zeros(x.shape[0], 0)
    if n_u and u.shape[-1] not in (n_u, 2 * n_u):
        raise ValueError(f"the envelope's inputs must have {n_u} columns (or {2 * n_u} for a paired hold); got "
                         f"{u.shape[-1]}.")
    u = torch.cat(u.split(n_u, dim=-1), dim=0) if n_u else u[:, :0]
    if not (bool(torch.isfinite(x).all()) and bool(torch.isfinite(u).all())):
        raise ValueError("the residual's trust envelope got non-finite states or inputs; record it from solved "
                         "windows only.")
    low = torch.cat([x.min(0).values, u.min(0).values if n_u else x.new_zeros(0)])
    high = torch.cat([x.max(0).values, u.max(0).values if n_u else x.new_zeros(0)])
    return low, high


def record_envelope(residual: NeuralResidual, states: Tensor, inputs: Tensor, margin: float = DEFAULT_MARGIN,
                    names: tuple[list[str], list[str]] | None = None) -> dict:
    """Record the envelope of the given residual inputs and install it on ``residual``.

    Args:
        residual: the network (its ``in_scale`` gives the columns' units).
        states: estimated states, (..., n_x).
        inputs: step inputs, (..., n_u) or (..., 2 n_u) for a paired hold.
        margin: the fade band as a fraction of the box's width per column (> 0; never narrower than
            `torch_ude.envelope.MIN_MARGIN` in ``z`` units).
        names: the state and input names for the record (None: ``x0..``, ``u0..``).

    Returns:
        The record: ``{"columns", "low", "high", "margin"}`` in ``z = [x, u] / in_scale``,
        ``"in_scale"`` and ``"input_scale"`` (the state and input parts of ``in_scale``) and
        ``"span": {"channels", "low", "high"}`` in the plant's units.

    Raises:
        ValueError: for no data (`residual_span`) or a margin that is not a positive number.
    """
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not np.isfinite(margin) or margin <= 0:
        raise ValueError(f"the envelope's margin must be a positive fraction of the box's width; got {margin!r}.")
    n_x, n_u = residual.n_x, residual.n_u
    low, high = residual_span(states, inputs, n_u)
    scale = residual.in_scale
    box = envelope_from_span(low, high, InputMap(n_x, n_u), scale[:n_x], scale[n_x:] if n_u else None, float(margin))
    residual.set_envelope(*box)
    states_n, inputs_n = names or ([f"x{i}" for i in range(n_x)], [f"u{j}" for j in range(n_u)])
    return {"columns": InputMap(n_x, n_u).columns(states_n, inputs_n), "low": box[0].tolist(),
            "high": box[1].tolist(), "margin": box[2].tolist(), "in_scale": scale[:n_x].tolist(),
            "input_scale": scale[n_x:].tolist(),
            "span": {"channels": list(states_n) + list(inputs_n), "low": low.tolist(), "high": high.tolist()}}


def casadi_fade(z, low, high, margin):
    """The fade ``w(z)`` of `torch_ude.envelope.fade` on a CasADi column ``z`` (d, 1) (SX or MX).

    Args:
        z: the network input, (d, 1).
        low, high, margin: the box and its fade band, d numbers each.

    Returns:
        ``w``, a (1, 1) expression in [0, 1].
    """
    w = 1
    for j in range(z.shape[0]):
        past = cs.fmax(cs.fmax(z[j] - float(high[j]), float(low[j]) - z[j]), 0) / float(margin[j])
        t = cs.fmin(past, 1)
        w = w * (1 - t * t * t * (10 - 15 * t + 6 * t * t))
    return w

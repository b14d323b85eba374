"""How the input behaves between two samples: the input hold of ``f_d`` (zero-order, first-order, midpoint).

A recording holds the input at the sample instants, ``u_k`` at ``t_k``; the discretization
(`mhe.models.discretization`) reads it at each Runge-Kutta stage, at ``t_k + c_j h``. Three holds:

* ``"zoh"`` (zero-order, the default): ``u(t_k + c h) = u_k``, what a digital controller's
  output stage does, and what every earlier config assumed;
* ``"foh"`` (first-order): ``u(t_k + c h) = u_k + c (u_{k+1} - u_k)``, linear between the
  samples, as the recorded-log side of ``torch_ude`` reads a logged input (`torch_ude.recorded`
  resamples it linearly; `torch_ude.prediction.rk4_input_rollout` and `baselines.rk4` give RK4's
  stages ``u_k``, the mean, ``u_{k+1}``: the same map, `tests/mhe/models/test_hold.py`): a smooth input
  sampled from an analogue signal (a signal generator, a measured force);
* ``"midpoint"``: ``u(t_k + c h) = (u_k + u_{k+1}) / 2`` over the whole step, the average of the
  linear input, held: one input per step like a zero-order hold, centred on the interval.

A zero-order hold's step reads ``u_k`` alone (``n_u`` columns); the two others read the pair
``[u_k, u_{k+1}]`` (``2 n_u`` columns, `InputHold.columns`). `held_inputs` turns a recording's
inputs into these step inputs, so the MHE windows, the NLPs, the hypergradients and the
simulators read one row per step whatever the hold, as they do for an input history
(`mhe.data.input_history`). A window of ``N`` steps thus carries ``u_{k+N}`` in its last row, as data
(the NLP's parameters), with no new decision variable. The last row of each contiguous stretch (the
recording's end and the row before each break) has no next input in its stretch; it repeats its
own, and no step reads it (a stretch of ``T`` samples has ``T - 1`` steps; an output map reads a
row's first ``n_u`` columns, ``u_k`` itself). So every step of every hold reads recorded samples,
and no hold falls back to another at an edge.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

__all__ = ["InputHold", "ZOH", "FOH", "MIDPOINT", "HOLDS", "input_hold", "step_inputs"]


@dataclass(frozen=True)
class InputHold:
    """One way of reading the input between two samples.

    Attributes:
        name: the name in `HOLDS` (the ``hold`` setting of a model and of a problem).
        paired: whether a step reads ``[u_k, u_{k+1}]`` (else ``u_k`` alone).
    """

    name: str
    paired: bool

    def columns(self, n_u: int) -> int:
        """Columns of one step's input row for ``n_u`` inputs: ``n_u``, or ``2 n_u`` for a paired hold."""
        return 2 * n_u if self.paired else n_u

    def at(self, now: Any, nxt: Any, c: float) -> Any:
        """The input at ``t_k + c h`` from ``u_k`` (``now``) and ``u_{k+1}`` (``nxt``, ignored by a zero-order hold).

        Plain arithmetic, so the same code runs on torch tensors and CasADi symbols.
        """
        if self.name == "foh":
            return now if c == 0.0 else now + c * (nxt - now)
        if self.name == "midpoint":
            return 0.5 * (now + nxt)
        return now


ZOH = InputHold("zoh", False)
"""Zero-order hold: ``u_k`` over the whole step."""

FOH = InputHold("foh", True)
"""First-order hold: linear from ``u_k`` to ``u_{k+1}``."""

MIDPOINT = InputHold("midpoint", True)
"""The mean ``(u_k + u_{k+1}) / 2`` over the whole step."""

HOLDS: dict[str, InputHold] = {h.name: h for h in (ZOH, FOH, MIDPOINT)}
"""The input holds by name."""


def input_hold(name: str) -> InputHold:
    """The `InputHold` called ``name``.

    Raises:
        ValueError: for a name that is not in `HOLDS`.
    """
    if name not in HOLDS:
        raise ValueError(f"hold must be one of {sorted(HOLDS)} (zero-order, first-order or midpoint input between "
                         f"samples); got {name!r}.")
    return HOLDS[name]


def step_inputs(inputs: Tensor, hold: InputHold, breaks: Sequence[int] = ()) -> Tensor:
    """The step inputs of ``hold``: ``inputs`` for a zero-order hold, else the rows ``[u_k, u_{k+1}]``.

    Args:
        inputs: the inputs at the sample instants, shape (T, n_u), any float dtype (kept).
        hold: the input hold.
        breaks: rows ``t`` that do not follow row ``t - 1`` (`mhe.data.recording.Recording.breaks`); the row
            before a break, and the last row, repeat their own input as ``u_{k+1}``.

    Returns:
        Shape (T, n_u), or (T, 2 n_u) for a paired hold.
    """
    if not hold.paired:
        return inputs
    t = inputs.shape[0]
    nxt = torch.arange(1, t + 1)
    ends = [t, *(int(b) for b in breaks)]
    nxt[torch.tensor([e - 1 for e in ends if 0 < e <= t], dtype=torch.long)] -= 1  # no next input in the stretch
    return torch.cat([inputs, inputs[nxt]], dim=1)

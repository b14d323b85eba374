"""Input history: the inputs of the previous samples as extra input columns of a recording.

A gray-box residual ``N(x_k, u_k)`` sees only the current input. Where the plant answers its
inputs with a delay (a drivetrain's torque after a pedal change), the residual may also read
the inputs of the last ``lags`` samples: the recording's inputs become the rows
``[u_k, u_{k-1}, ..., u_{k-lags}]`` (``n_u (1 + lags)`` columns, the current input first), and
a model's physics keeps reading the first ``n_u`` columns (`mhe.models.model.StateSpaceModel`). The
MHE, its windows, rollouts and the hypergradients then need nothing new: the extra columns are
known inputs like the others.

Before the first sample of each contiguous stretch (a recording's start and each of its
``breaks``) there is no earlier input; those rows repeat the stretch's first input.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import torch

from .recording import Recording

__all__ = ["with_input_history", "history_names"]


def with_input_history(recording: Recording, lags: int) -> Recording:
    """``recording`` with its inputs extended by the inputs of the ``lags`` previous samples.

    Args:
        recording: the recording; inputs (T, n_u), any float dtype (kept).
        lags: number of previous samples, >= 0 (0 returns ``recording`` itself).

    Returns:
        The same recording with inputs (T, n_u (1 + lags)): columns ``j n_u .. (j + 1) n_u - 1``
        hold ``u_{k-j}``; rows whose ``k - j`` lies before their stretch's first sample hold
        that first sample's input instead.

    Raises:
        ValueError: for ``lags`` that is not a non-negative integer, or a recording without inputs.
    """
    if isinstance(lags, bool) or not isinstance(lags, int) or lags < 0:
        raise ValueError(f"lags (previous samples of input history) must be an integer >= 0; got {lags!r}.")
    if lags == 0:
        return recording
    u = recording.inputs
    if u.ndim != 2 or u.shape[1] == 0:
        raise ValueError(f"An input history needs a recording with inputs (T, n_u >= 1); got inputs of shape "
                         f"{tuple(u.shape)}.")
    t = torch.arange(u.shape[0])
    first = torch.zeros_like(t)  # the first row of each row's stretch
    for b in sorted(int(b) for b in recording.breaks):
        first[b:] = b
    rows = [u[torch.maximum(t - j, first)] for j in range(lags + 1)]
    return replace(recording, inputs=torch.cat(rows, dim=1))


def history_names(names: Sequence[str], lags: int) -> list[str]:
    """The column names of `with_input_history`: ``names``, then ``"name[k-1]"``, ... ``"name[k-lags]"``.

    Args:
        names: the names of the n_u inputs.
        lags: number of previous samples, >= 0.
    """
    return list(names) + [f"{n}[k-{j}]" for j in range(1, lags + 1) for n in names]

"""A physical box for the arrival-cost parameters ``s_bar`` and ``sigma`` (Eq. 4a, part of ``alpha`` in Eq. 5).

``s_bar`` and ``Sigma = diag(sigma^2)`` are one prior on ``x^_0`` shared by every window,
and the windows start anywhere in the recording, so physically ``s_bar`` lies within the
range the states take and ``sigma`` is of the order of that range. Left free, the outer
loop can move them far outside it once the physics has converged: ``J`` hardly depends on
``s_bar`` when ``sigma`` is wide, and on the racing benchmark (seed 0, Gauss-Newton, 80
iterations) the identity-damped step then walked ``s_bar_vy`` to -14 m/s and shrank
``sigma_vy`` to 0.03 m/s for a 1.7 % lower ``J``. With such a prior the window problems
change character: cold starts (``x^`` initialized at ``s_bar``) then reach other local
minima, with ``J`` = 21-46 instead of 9.8e-4.

`arrival_bounds` returns the `mhe.models.bounds.Bound` of every component:

* ``s_bar_j`` in ``[lo_j - margin (hi_j - lo_j), hi_j + margin (hi_j - lo_j)]``, where
  ``[lo_j, hi_j]`` is the range of the measured output of state ``j`` over all windows (through
  the output map's `mhe.models.output.OutputMap.state_guess` where the model has one), or the box given
  for a state that is not measured (the data cannot tell its range);
* ``sigma_j`` in ``[std_range[0] W_j, std_range[1] W_j]`` with ``W_j`` the width of that
  ``s_bar`` box, log-sigmoid (a step in the unconstrained coordinate is a relative change).
  A prior narrower than a few % of the range would pin ``x^_0`` of every window to one value;
  one much wider than the range carries no information.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..models.bounds import Bound
from ..models.checks import require
from ..models.model import StateSpaceModel
from ..data.windows import Windows

__all__ = ["arrival_bounds"]


def arrival_bounds(windows: Windows, model: StateSpaceModel, hidden: Mapping[int, Sequence[float]],
                   margin: float = 0.1, std_range: Sequence[float] = (0.05, 10.0)) -> tuple[tuple[Bound, ...],
                                                                                          tuple[Bound, ...]]:
    """Bounds of ``s_bar`` and ``sigma`` from the measured outputs and a box for the hidden states.

    Args:
        windows: the data set (its outputs ``y = C x + F eta`` give the measured states' range).
        model: the model (``model.measured`` names the state of each output).
        hidden: ``{state index: (lo, hi)}`` for every state that is not measured, in the
            state's units (e.g. ``{1: (-1.0, 1.0)}`` for a lateral velocity in m/s); a
            measured state given here uses this box instead of the data's range.
        margin: widening of each box on both sides, as a fraction of its width.
        std_range: ``sigma_j`` lies in ``(std_range[0] W_j, std_range[1] W_j)``.

    Returns:
        Per state the `Bound` of ``s_bar`` and the `Bound` of ``sigma`` (n_x each).

    Raises:
        ValueError: if a hidden state has no box, a box is empty or names an unknown
            state, ``margin < 0``, or ``std_range`` is not ``0 < a < b``.
    """
    n_x, measured = model.n_x, tuple(model.measured)
    boxes = {int(j): tuple(float(v) for v in box) for j, box in hidden.items()}
    unknown = [j for j in boxes if not 0 <= j < n_x]
    missing = [j for j in range(n_x) if j not in measured and j not in boxes]
    if unknown or missing:
        raise ValueError(f"hidden must give a box (lo, hi) for every state that is not measured; states {missing} "
                         f"have none and {unknown} are not states of a model with n_x={n_x}.")
    bad = {j: b for j, b in boxes.items() if len(b) != 2 or not b[0] < b[1]}
    if bad:
        raise ValueError(f"Each hidden box needs two numbers lo < hi; got {bad}.")
    require([(margin >= 0, f"The arrival cost's margin must be >= 0; got {margin}."),
             (len(std_range) == 2 and 0 < std_range[0] < std_range[1],
              f"The arrival cost's std_range must be (a, b) with 0 < a < b; got {tuple(std_range)}.")])
    y = model.state_guess(windows.y.reshape(-1, windows.y.shape[-1])).detach()
    for row, j in enumerate(measured):
        if j not in boxes:
            boxes[j] = (float(y[:, row].min()), float(y[:, row].max()))
    means, stds = [], []
    for j in range(n_x):
        lo, hi = boxes[j]
        width = max(hi - lo, 1e-12 * max(abs(lo), abs(hi), 1.0))
        lo, hi = lo - margin * width, hi + margin * width
        means.append(Bound(lo, hi))
        stds.append(Bound(std_range[0] * (hi - lo), std_range[1] * (hi - lo), log=True))
    return tuple(means), tuple(stds)

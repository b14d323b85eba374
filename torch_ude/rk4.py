"""Classical fixed-step fourth-order Runge-Kutta integration of a batched field."""
from __future__ import annotations

from collections.abc import Callable

from torch import Tensor

__all__ = ["rk4_step", "rk4_rollout"]

Field = Callable[[Tensor], Tensor]


def rk4_step(field: Field, x: Tensor, h: float) -> Tensor:
    """One RK4 step of ``x' = field(x)``.

    Args:
        field: maps states (N, n) to derivatives (N, n).
        x: states, shape (N, n).
        h: step in seconds.

    Returns:
        The states after one step, shape (N, n).
    """
    k1 = field(x)
    k2 = field(x + (0.5 * h) * k1)
    k3 = field(x + (0.5 * h) * k2)
    k4 = field(x + h * k3)
    return x + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)


def rk4_rollout(field: Field, x0: Tensor, h: float, steps: int, substeps: int = 1) -> Tensor:
    """Integrate ``steps`` output steps of size ``h`` with ``substeps`` RK4 steps each.

    Args:
        field: maps states (N, n) to derivatives (N, n).
        x0: initial states, shape (N, n).
        h: output step in seconds.
        steps: number of output steps (>= 0).
        substeps: RK4 steps per output step (>= 1).

    Returns:
        Trajectories including ``x0``, shape (steps + 1, N, n).
    """
    if steps < 0 or substeps < 1:
        raise ValueError(f"steps must be >= 0 and substeps >= 1; got steps={steps}, substeps={substeps}.")
    out = x0.new_empty((steps + 1, *x0.shape))
    out[0] = x0
    x, dt = x0, h / substeps
    for k in range(steps):
        for _ in range(substeps):
            x = rk4_step(field, x, dt)
        out[k + 1] = x
    return out

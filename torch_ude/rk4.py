"""Classical fixed-step fourth-order Runge-Kutta integration of a batched field."""
from __future__ import annotations

from collections.abc import Callable

from torch import Tensor, nn

__all__ = ["RK4Step", "rk4_step", "rk4_rollout"]

Field = Callable[[Tensor], Tensor]


class RK4Step(nn.Module):
    """One classical RK4 step of ``x' = field(x)`` with a fixed step, as a module.

    With a torch module as the field it can be compiled by ``torch.jit.script`` (the
    simulated plant does this: the compiled step runs the same ATen kernels in the same
    order, so its numbers are bit-identical to eager mode, without Python's per-operation
    overhead). In eager mode ``field`` may be any callable, also one of CasADi symbols.

    Args:
        field: maps states (N, n) to derivatives (N, n).
        h: step in seconds.
    """

    def __init__(self, field: Field, h: float) -> None:
        super().__init__()
        self.field, self.h = field, float(h)

    def forward(self, x: Tensor) -> Tensor:
        """States (N, n) -> the states one step of ``h`` seconds later, (N, n)."""
        h = self.h
        k1 = self.field(x)
        k2 = self.field(x + (0.5 * h) * k1)
        k3 = self.field(x + (0.5 * h) * k2)
        k4 = self.field(x + h * k3)
        return x + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)


def rk4_step(field: Field, x: Tensor, h: float) -> Tensor:
    """One RK4 step of ``x' = field(x)`` (`RK4Step` for a single call).

    Args:
        field: maps states (N, n) to derivatives (N, n).
        x: states, shape (N, n).
        h: step in seconds.

    Returns:
        The states after one step, shape (N, n).
    """
    return RK4Step(field, h)(x)


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
    x, step = x0, RK4Step(field, h / substeps)
    for k in range(steps):
        for _ in range(substeps):
            x = step(x)
        out[k + 1] = x
    return out

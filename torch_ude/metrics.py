"""Evaluation shared by every trainer: field error (Eq. 9), recovered damping, rollouts."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

from .rk4 import rk4_rollout
from .systems.base import System, VectorField, check_states
from .systems.simulate import simulate

__all__ = [
    "field_error", "damping_estimate", "rollout_error", "evaluation_states", "evaluate_field",
]

Field = Callable[[Tensor], Tensor]


def field_error(field: Field, true_field: VectorField, x: Tensor) -> float:
    """Relative field error ``||F - f*||_L2(X) / ||f*||_L2(X)`` over the states ``x`` (Eq. 9).

    Args:
        field: learned field, (N, n) -> (N, n).
        true_field: true field ``f*``, (N, n) -> (N, n).
        x: evaluation states, shape (N, n).

    Returns:
        The dimensionless relative error.
    """
    check_states(x, true_field.n_states)
    with torch.no_grad():
        f_true = true_field(x)
        diff = field(x) - f_true
        return float(torch.linalg.vector_norm(diff) / torch.linalg.vector_norm(f_true))


def damping_estimate(field: Field, known: VectorField, x: Tensor,
                     terms: tuple[tuple[int, int, float], ...]) -> list[float]:
    """Recovered damping: least-squares slope of the learned residual on the velocities.

    The residual is ``F(x) - f_known(x)``; for each ``(i, j, _)`` in ``terms``,
    ``c_hat = -<res_i, x_j> / <x_j, x_j>`` over the states ``x``.

    Args:
        field: learned field, (N, n) -> (N, n).
        known: the known model the field was trained with.
        x: evaluation states, shape (N, n).
        terms: from ``System.damping_terms(case)``.

    Returns:
        One ``c_hat`` per term, in 1/s.
    """
    check_states(x, known.n_states)
    with torch.no_grad():
        res = field(x) - known(x)
        out = []
        for i, j, _ in terms:
            v = x[:, j]
            out.append(float(-(res[:, i] * v).sum() / (v * v).sum()))
    return out


def rollout_error(field: Field, true_field: VectorField, x0: Tensor, horizon: float = 8.0, dt: float = 0.01,
                  substeps: int = 10) -> float:
    """Relative autonomous-rollout error of a learned field against the true plant.

    Both fields are integrated by RK4 from ``x0`` over ``horizon`` seconds; the error is
    ``||X - X*|| / ||X*||`` over all output times and channels.

    Args:
        field: learned (or known-only) field, (N, n) -> (N, n).
        true_field: the true plant's field.
        x0: initial states, shape (N, n).
        horizon: seconds (> 0).
        dt: output step in s.
        substeps: RK4 steps per output step.

    Returns:
        The dimensionless relative trajectory error.
    """
    check_states(x0, true_field.n_states, "x0")
    if not horizon > 0 or not dt > 0:
        raise ValueError(f"horizon and dt must be positive; got {horizon!r} and {dt!r}.")
    steps = round(horizon / dt)
    with torch.no_grad():
        ref = rk4_rollout(true_field, x0, dt, steps, substeps)
        out = rk4_rollout(field, x0, dt, steps, substeps)
        return float(torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref))


def evaluation_states(system: System, duration: float = 60.0, seed: int = 0, fs: float = 1000.0,
                      every: int = 10) -> dict[str, Tensor]:
    """The state sets the field error is reported on.

    A plant with an evaluation grid (the single pendulum's 41 x 41 grid) gives
    ``"grid"`` (the whole grid) and ``"visited"`` (its points inside the visited
    region). Otherwise both are the clean states of the plant's own trajectory from
    ``x0`` for ``duration`` s under ``seed``'s excitation, taken every ``every`` samples.

    Returns:
        ``{"grid": (G, n), "visited": (V, n)}`` float64 tensors.
    """
    grid = system.evaluation_grid()
    if grid is not None:
        return {"grid": grid, "visited": grid[system.visited_region(grid)]}
    rec = simulate(system, duration, fs=fs, noise=0.0, seed=seed)
    visited = torch.as_tensor(np.ascontiguousarray(rec.x[::every]))
    return {"grid": visited, "visited": visited}


def evaluate_field(field: Field, system: System, case: str, states: dict[str, Tensor]) -> dict[str, float | list]:
    """The metrics every trainer reports for a learned field.

    Args:
        field: the learned field, (N, n) -> (N, n).
        system: the plant.
        case: the case the field was trained on (its known model).
        states: from `evaluation_states`.

    Returns:
        ``e_field`` (on ``states["grid"]``), ``e_field_visited``, ``c_hat`` (first damping
        term) and ``c_hat_channels`` (all terms), all computed on the visited states
        for the damping.
    """
    true = system.true_field()
    known = system.known_field(case)
    c_hat = damping_estimate(field, known, states["visited"], system.damping_terms(case))
    return {
        "e_field": field_error(field, true, states["grid"]),
        "e_field_visited": field_error(field, true, states["visited"]),
        "c_hat": c_hat[0],
        "c_hat_channels": c_hat,
    }

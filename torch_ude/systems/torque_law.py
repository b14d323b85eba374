"""A controlled plant under a torque law: RK4 of ``x' = f(x, u)`` with ``u = torque(t, x)``.

A `torch_ude.systems.controlled.ControlledField` (the DFKI pendulums' lab models) is a known
model with an input; run with a torque law, the lab's most exact model becomes a simulated
rig whose logs a less exact model is trained on (``benchmarks.jet.extrapolation``, the
``simulated`` split). The law may feed back the state (a swing-up controller) or replay a
recorded torque in time; it is held over each step (zero-order hold, as a motor driver
holds its command).

`swing_up_torques` is such a law for a double pendulum: a speed-limited energy pump that
drives each joint through full rotations, far beyond the torques and speeds of a gentle
training log.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from .controlled import ControlledField

__all__ = ["TorqueLaw", "simulate_torque_law", "swing_up_torques"]

#: ``torque(t, x) -> u``: the input (n_u,) at time ``t`` in s and state ``x`` (n,), both NumPy float64.
TorqueLaw = Callable[[float, np.ndarray], np.ndarray]


def simulate_torque_law(model: ControlledField, x0: np.ndarray, torque: TorqueLaw, duration: float,
                        h: float) -> tuple[np.ndarray, np.ndarray]:
    """Classical RK4 of ``model`` from ``x0`` under ``torque``, held over each step.

    Args:
        model: the plant, float64 (its current parameter values).
        x0: the state at ``t = 0``, (n,) in the model's units.
        torque: ``torque(k h, x_k)``, the input over step ``k``, (n_u,).
        duration: seconds simulated; ``round(duration / h)`` steps.
        h: the step in s.

    Returns:
        The state at the start of every step and the torque held over it, (T, n) and
        (T, n_u) float64, ``T = round(duration / h)`` (the final state is not returned).
    """
    x = torch.as_tensor(x0, dtype=torch.float64).reshape(1, -1)
    states, torques = [], []
    for k in range(int(round(duration / h))):
        u = torch.as_tensor(torque(k * h, x[0].numpy()), dtype=torch.float64).reshape(1, -1)
        states.append(x[0].numpy().copy())
        torques.append(u[0].numpy().copy())
        k1 = model(x, u)
        k2 = model(x + 0.5 * h * k1, u)
        k3 = model(x + 0.5 * h * k2, u)
        k4 = model(x + h * k3, u)
        x = x + h / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
    return np.array(states), np.array(torques)


def swing_up_torques(gains: tuple[float, float], speeds: tuple[float, float], limit: float = 5.0) -> TorqueLaw:
    """A speed-limited energy pump for a double pendulum (states ``q1, q2, q1', q2'``).

    ``tau_i = clip(g_i q'_i (1 - (q'_i / v_i)^2) + 0.5 sin(w_i t), +-limit)`` with ``w_i = 3 + 2 i``
    rad/s, ramped in linearly over the first 2 s: it pumps energy into joint ``i`` while
    ``|q'_i| < v_i`` and brakes above, so each joint settles to full rotations at about ``v_i``.

    Args:
        gains: ``g_i`` in N m s / rad per joint.
        speeds: ``v_i`` in rad/s per joint.
        limit: the torque bound in N m.

    Returns:
        The `TorqueLaw`, (2,) torques in N m.
    """
    def torque(t: float, x: np.ndarray) -> np.ndarray:
        ramp = min(t / 2.0, 1.0)
        raw = [gains[i] * x[2 + i] * (1.0 - (x[2 + i] / speeds[i]) ** 2) + 0.5 * math.sin((3.0 + 2 * i) * t)
               for i in range(2)]
        return ramp * np.clip(raw, -limit, limit)
    return torque

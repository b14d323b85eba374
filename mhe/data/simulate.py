"""Our own data generator: a `StateSpaceModel` driven by a policy, with process and measurement noise.

``x_{t+1} = f_d(x_t, u_t, w_t)`` with ``w_t ~ N(0, diag(q^2))`` (held over the sample, in
the units of ``dx/dt``) and ``y_t = C x_t + eta_t`` with ``eta_t ~ N(0, diag(r^2))``.
`vehicle_policy` excites the racing model of `mhe.models.vehicle`: smooth random steering and
a throttle that tracks a smooth random speed reference.

`simulate_plant` is the reference for plants whose input is a function of continuous time (an
analogue signal, not a sampled one): the physics integrated with RK4 on ``substeps`` steps per
sample, the input read at every stage's time, the state recorded at the samples. It tells how
much a model's input hold (`mhe.models.hold`) costs.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from ..models.checks import require
from ..models.model import PhysicsField, StateSpaceModel
from .recording import Recording

__all__ = ["simulate_closed_loop", "simulate_plant", "smooth_signal", "vehicle_policy"]

Policy = Callable[[int, Tensor], Tensor]


def simulate_closed_loop(model: StateSpaceModel, x0: Sequence[float], policy: Policy, steps: int,
             process_std: Sequence[float], measurement_std: Sequence[float], seed: int = 0) -> Recording:
    """Simulate ``steps`` samples of ``model`` in closed loop with ``policy``.

    Args:
        model: the data-generating model (float64).
        x0: initial state, n_x numbers.
        policy: ``u_t = policy(t, x_t)``, returns shape (n_u,).
        steps: number of samples T >= 2.
        process_std: standard deviations q of ``w``, n_w numbers (units of dx/dt).
        measurement_std: standard deviations r of ``eta``, n_y numbers (output units).
        seed: seed of the noise.

    Returns:
        The `Recording`.

    Raises:
        ValueError: for wrong sizes, a model whose hold reads the next input (a closed loop does not
            know it yet), or if the state becomes non-finite.
    """
    if model.hold.paired:
        raise ValueError(f"simulate_closed_loop drives the model in closed loop, where u_(k+1) is not known at step k; "
                         f"give the data-generating model hold='zoh' (got {model.hold.name!r}), or use simulate_plant.")
    q = torch.as_tensor(process_std, dtype=torch.float64)
    r = torch.as_tensor(measurement_std, dtype=torch.float64)
    x = torch.as_tensor(x0, dtype=torch.float64).reshape(1, -1)
    require([(x.shape[1] == model.n_x, f"x0 must hold {model.n_x} numbers; got {x.shape[1]}."),
             (q.shape == (model.n_w,), f"process_std must hold {model.n_w} numbers; got shape {tuple(q.shape)}."),
             (r.shape == (model.n_y,), f"measurement_std must hold {model.n_y} numbers; got shape {tuple(r.shape)}."),
             (steps >= 2, f"steps must be >= 2; got {steps}.")])
    gen = torch.Generator().manual_seed(seed)
    states, inputs = [], []
    with torch.no_grad():
        for t in range(steps):
            u = policy(t, x[0]).reshape(1, -1)
            states.append(x[0])
            inputs.append(u[0])
            w = q * torch.randn(1, model.n_w, generator=gen, dtype=torch.float64)
            x = model.step(x, u, w)
            if not bool(torch.isfinite(x).all()):
                raise ValueError(f"The simulated state became non-finite at sample {t + 1}; soften the "
                                 "excitation or lower the noise.")
        xs = torch.stack(states)
        ys = model.output(xs) + r * torch.randn(steps, model.n_y, generator=gen, dtype=torch.float64)
    return Recording(xs, torch.stack(inputs), ys, model.dt)


def simulate_plant(physics: PhysicsField, x0: Sequence[float], signal: Callable[[Tensor], Tensor], dt: float,
                   steps: int, substeps: int = 20) -> tuple[Tensor, Tensor]:
    """The noise-free plant ``x' = h(x, u(t))`` at the samples, its input a function of continuous time.

    Args:
        physics: the true physics (its current parameter values), float64.
        x0: the state at ``t = 0``, n_x numbers.
        signal: ``u(t)`` for times of shape (K,) in seconds -> inputs (K, n_u).
        dt: sample time in seconds.
        steps: samples T >= 2.
        substeps: classical RK4 steps per sample, >= 1 (the input read at each stage's time).

    Returns:
        States ``x(k dt)`` (T, n_x) and inputs ``u(k dt)`` (T, n_u).

    Raises:
        ValueError: for a bad ``x0``, ``steps`` or ``substeps``, or a state that becomes non-finite.
    """
    x = torch.as_tensor(x0, dtype=torch.float64).reshape(1, -1)
    require([(x.shape[1] == physics.n_x, f"x0 must hold {physics.n_x} numbers; got {x.shape[1]}."),
             (steps >= 2, f"steps must be >= 2; got {steps}."),
             (substeps >= 1, f"substeps must be >= 1; got {substeps}.")])
    h = dt / substeps
    states = [x[0]]
    with torch.no_grad():
        for k in range(steps - 1):
            for j in range(substeps):
                t0 = k * dt + j * h
                u = signal(torch.tensor([t0, t0 + 0.5 * h, t0 + h], dtype=torch.float64))
                k1 = physics(x, u[:1])
                k2 = physics(x + 0.5 * h * k1, u[1:2])
                k3 = physics(x + 0.5 * h * k2, u[1:2])
                k4 = physics(x + h * k3, u[2:3])
                x = x + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
            if not bool(torch.isfinite(x).all()):
                raise ValueError(f"The simulated plant became non-finite at sample {k + 1}; soften the input.")
            states.append(x[0])
        inputs = signal(torch.arange(steps, dtype=torch.float64) * dt)
    return torch.stack(states), inputs


def smooth_signal(steps: int, dt: float, amplitude: float, max_hz: float, seed: int, n_tones: int = 8) -> Tensor:
    """A smooth random signal: a sum of ``n_tones`` sinusoids below ``max_hz``, peak ``<= amplitude``.

    Returns:
        Shape (steps,), float64.
    """
    gen = torch.Generator().manual_seed(seed)
    t = torch.arange(steps, dtype=torch.float64) * dt
    freq = max_hz * (0.05 + 0.95 * torch.rand(n_tones, generator=gen, dtype=torch.float64))
    phase = 2 * math.pi * torch.rand(n_tones, generator=gen, dtype=torch.float64)
    s = torch.sin(2 * math.pi * freq[None, :] * t[:, None] + phase[None, :]).sum(dim=1)
    return amplitude * s / s.abs().max()


def vehicle_policy(steps: int, dt: float, seed: int, steer_amplitude: float = 0.35, steer_hz: float = 1.5,
                   speed_range: tuple[float, float] = (1.0, 2.5), speed_gain: float = 1.5) -> Policy:
    """Excitation of the racing model: ``u = (delta, gamma)``.

    Steering is a smooth random signal of peak ``steer_amplitude`` (rad); the throttle
    tracks a smooth random speed reference in ``speed_range`` (m/s) with a proportional
    gain plus a smooth dither, clipped to [-1, 1].

    Returns:
        ``policy(t, x) -> u`` of shape (2,).
    """
    steer = smooth_signal(steps, dt, steer_amplitude, steer_hz, seed)
    lo, hi = speed_range
    vref = 0.5 * (lo + hi) + 0.5 * (hi - lo) * smooth_signal(steps, dt, 1.0, 0.3, seed + 1)
    dither = smooth_signal(steps, dt, 0.3, 2.0, seed + 2)

    def policy(t: int, x: Tensor) -> Tensor:
        gamma = (0.25 + speed_gain * (vref[t] - x[0]) + dither[t]).clamp(-1.0, 1.0)
        return torch.stack([steer[t], gamma])

    return policy

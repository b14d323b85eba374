"""The torchdiffeq peer: the solver baseline's UDE and objective, differentiated by torchdiffeq.

What a torchdiffeq user would write for the same problem: the hybrid field of
`torch_ude.HybridField.from_seed` (the same seeded 2-16-16-2 network and calibrated
scales every trainer starts from, `baselines.initial_field`), integrated by
``torchdiffeq.odeint`` (fixed-step ``"rk4"``, which in torchdiffeq is Kutta's 3/8 rule,
step = the observation interval) over the same multiple-shooting windows as
`baselines` (K = 40 steps at 50 Hz, 128 windows, `baselines.shooting_windows`), the
same loss (squared error per channel over x_rms^2, estimated shooting states with the
k = 0 term, `baselines.ShootingObjective`) and the same optimizer (full-batch Adam,
lr 4e-2 cosine to 1e-3, betas (0.9, 0.99), step rejection, `baselines.ShootingAdam`).
Only the gradient differs: autograd through torchdiffeq's solver (``"backprop"``) or
its continuous adjoint (``odeint_adjoint``, ``"adjoint"``) instead of the hand-derived
discrete adjoint.
"""
from __future__ import annotations

import time

import torch
from torch import Tensor, nn
from torchdiffeq import odeint, odeint_adjoint

from baselines.initialization import initial_field, stream_calibration
from baselines.optimize import ShootingAdam
from baselines.shooting import ShootingGradient
from baselines.windows import ShootingWindows, observe, shooting_windows
from torch_ude.field import HybridField
from torch_ude.systems.base import System
from torch_ude.systems.simulate import SimulatedStream

__all__ = ["GRADIENT_MODES", "TorchdiffeqObjective", "torchdiffeq_fit"]

#: Gradient modes: autograd through the solver, or torchdiffeq's continuous adjoint.
GRADIENT_MODES = ("backprop", "adjoint")


def _check_mode(mode: str) -> None:
    if mode not in GRADIENT_MODES:
        raise ValueError(f"mode must be one of {list(GRADIENT_MODES)} (autograd through the solver, or torchdiffeq's "
                         f"continuous adjoint); got {mode!r}.")


class _Rhs(nn.Module):
    """``f(t, x) = F(x)``, the signature torchdiffeq integrates; its parameters are the field's."""

    def __init__(self, field: HybridField) -> None:
        super().__init__()
        self.field = field

    def forward(self, t: Tensor, x: Tensor) -> Tensor:
        return self.field.evaluate_unchecked(x)


class TorchdiffeqObjective:
    """`baselines.ShootingObjective`'s loss with its gradient from torchdiffeq.

    It offers what `baselines.ShootingAdam` uses (``field``, ``shooting_states``,
    `gradient`), so the optimizer, schedule and step rejection are the baseline's.

    Args:
        field: the hybrid field (float64).
        windows: from `baselines.shooting_windows`.
        state_scale: per-channel scale of the state error, shape (n,) (the calibrated x_rms).
        mode: ``"backprop"`` or ``"adjoint"`` (see `GRADIENT_MODES`).

    Raises:
        ValueError: for an unknown mode, or windows of another state dimension.
    """

    def __init__(self, field: HybridField, windows: ShootingWindows, state_scale: Tensor, mode: str) -> None:
        _check_mode(mode)
        if windows.x0.shape[1] != field.n_states:
            raise ValueError(f"the windows hold {windows.x0.shape[1]}-dimensional states but the field has "
                             f"n = {field.n_states}; build them from the same plant's stream.")
        self.field, self.mode = field, mode
        self.windows = windows.to(field.dtype)
        self.shooting_states = self.windows.x0.clone()
        self.weight = 1.0 / torch.as_tensor(state_scale, dtype=field.dtype) ** 2
        self.scale = 1.0 / ((windows.steps + 1) * windows.batch * field.n_states)
        self.times = torch.arange(windows.steps + 1, dtype=field.dtype) * windows.h
        self.rhs = _Rhs(field)

    def loss_at(self, states: Tensor) -> Tensor:
        """The loss with the shooting states ``states`` (B, n), differentiable by autograd."""
        options = {"method": "rk4", "options": {"step_size": self.windows.h}}
        if self.mode == "adjoint":
            traj = odeint_adjoint(self.rhs, states, self.times, adjoint_params=tuple(self.field.parameters_list()),
                                  **options)
        else:
            traj = odeint(self.rhs, states, self.times, **options)
        residual = traj - self.windows.observations  # (K + 1, B, n); traj[0] is the shooting state
        return self.scale * (self.weight * residual * residual).sum()

    def gradient(self) -> ShootingGradient:
        """The loss and its gradients in the weights and the shooting states (autograd)."""
        params = self.field.parameters_list()
        states = self.shooting_states.detach().requires_grad_(True)
        with torch.enable_grad():
            loss = self.loss_at(states)
            if not bool(torch.isfinite(loss)):
                return ShootingGradient(loss=loss.detach(), grads=None, state_grad=None, finite=False)
            *grads, state_grad = torch.autograd.grad(loss, [*params, states])
        finite = all(bool(torch.isfinite(g).all()) for g in (*grads, state_grad))
        return ShootingGradient(loss=loss.detach(), grads=list(grads) if finite else None,
                                state_grad=state_grad if finite else None, finite=finite)


def torchdiffeq_fit(system: System, case: str, rec: SimulatedStream, seed: int, mode: str, iterations: int = 1200,
                    steps: int = 40, n_windows: int = 128, rate: float = 50.0) -> tuple[HybridField, dict]:
    """Train the UDE on a stream with torchdiffeq.

    Args:
        system: the plant the stream comes from.
        case: the case of the known model.
        rec: the 1 kHz stream (the jet-matching run's stream for this plant, noise and seed).
        seed: the run seed (initial weights).
        mode: ``"backprop"`` or ``"adjoint"``.
        iterations: full-batch Adam iterations (the baseline's 1200).
        steps: K, solver steps per window.
        n_windows: B.
        rate: observation rate in Hz.

    Returns:
        The trained field and ``{"wall_s", "iterations", "skipped_steps", "final_loss"}``
        (wall time of the optimization alone).

    Raises:
        ValueError: for an unknown mode (before any work), or windows the stream cannot hold.
    """
    _check_mode(mode)
    cal = stream_calibration(rec)
    field = initial_field(system, case, rec, seed, cal=cal)
    windows = shooting_windows(observe(rec, rate), steps, n_windows)
    objective = TorchdiffeqObjective(field, windows, cal.x_rms, mode)
    adam = ShootingAdam(objective, iterations=iterations)
    start = time.perf_counter()
    history = adam.run()
    wall = time.perf_counter() - start
    return field, {"wall_s": wall, "iterations": history.iterations, "skipped_steps": history.skipped,
                   "final_loss": history.loss[-1]}

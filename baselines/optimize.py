"""Full-batch Adam on the multiple-shooting objective, with step rejection on divergence.

Every iteration evaluates the objective on all windows, writes the adjoint gradient
into ``.grad`` and steps `torch.optim.Adam` (Section 4.1 of the jet-matching paper).
With ``fit_states`` the windows' shooting states are a second parameter group:
estimated from their noisy starting observations instead of held at them.
The learning rate follows a `torch.optim.lr_scheduler.LambdaLR` factor: constant, or
a cosine decay to ``lr_final``.

A rollout that leaves the finite numbers is rejected: no gradient is written (so no
NaN reaches the weights), the weights (and shooting states) go back to the last
iterate whose rollouts were finite, the learning rate is multiplied by ``backoff``
for the rest of the run, and the rejection is counted; the schedule advances with
accepted steps only. Without the restore and back-off a full-batch run would
evaluate the same diverging weights forever.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field as dataclass_field

import torch

from .shooting import ShootingObjective

__all__ = ["ShootingAdam", "StepResult", "FitHistory"]


@dataclass
class StepResult:
    """The outcome of one iteration.

    Attributes:
        loss: the objective at the weights before the step (may be inf/NaN when rejected).
        accepted: False when the rollout diverged and the step was skipped.
        lr: the learning rate the step used (or would have used).
    """

    loss: float
    accepted: bool
    lr: float


@dataclass
class FitHistory:
    """What a run did.

    Attributes:
        loss: objective per iteration, accepted or not.
        skipped: iterations rejected for a non-finite rollout or gradient.
        wall_s: seconds spent in `ShootingAdam.run`.
    """

    loss: list[float] = dataclass_field(default_factory=list)
    skipped: int = 0
    wall_s: float = 0.0

    @property
    def iterations(self) -> int:
        """Iterations run, accepted or not."""
        return len(self.loss)


class ShootingAdam:
    """Full-batch Adam with the hand-written discrete-adjoint gradient.

    The defaults are the settings tuned for the single pendulum (RESULTS.md, "Solver
    baseline").

    Args:
        objective: the multiple-shooting objective (its field's parameters are trained).
        lr: initial learning rate (> 0).
        iterations: planned iterations, the horizon of the cosine decay (>= 1).
        lr_final: learning rate reached at ``iterations`` by a cosine decay, or None
            for a constant rate.
        fit_states: also estimate the shooting states (else they stay at the noisy
            observations that start the windows).
        states_lr: initial learning rate of the shooting states (same schedule), or
            None for ``lr``.
        backoff: learning-rate factor after a rejected step, in (0, 1].
        betas: Adam's moment decay rates.
        weight_decay: decoupled weight decay of the network weights per unit learning
            rate (``torch.optim.AdamW``; never applied to the shooting states); 0 is
            plain Adam.

    Raises:
        ValueError: for settings outside the ranges above.

    Attributes:
        last_finite: copies of the trained tensors at the last iterate whose rollouts were
            finite (where a rejected step returns to).
    """

    def __init__(self, objective: ShootingObjective, lr: float = 4e-2, iterations: int = 1200,
                 lr_final: float | None = 1e-3, fit_states: bool = True, states_lr: float | None = None,
                 backoff: float = 0.5, betas: tuple[float, float] = (0.9, 0.99), weight_decay: float = 0.0) -> None:
        if not lr > 0:
            raise ValueError(f"lr must be positive; got {lr!r}.")
        if isinstance(iterations, bool) or int(iterations) != iterations or iterations < 1:
            raise ValueError(f"iterations must be a positive integer; got {iterations!r}.")
        if lr_final is not None and not 0 < lr_final <= lr:
            raise ValueError(f"lr_final must lie in (0, lr = {lr}] or be None for a constant rate; got {lr_final!r}.")
        if states_lr is not None and not states_lr > 0:
            raise ValueError(f"states_lr must be positive or None (same as lr); got {states_lr!r}.")
        if not 0 < backoff <= 1:
            raise ValueError(f"backoff must lie in (0, 1]; got {backoff!r}.")
        if not weight_decay >= 0:
            raise ValueError(f"weight_decay must be >= 0; got {weight_decay!r}.")
        self.objective = objective
        self.fit_states = bool(fit_states)
        field = objective.field
        weights = field.parameters_list()
        self.params = weights + ([objective.shooting_states] if self.fit_states else [])
        self.lr, self.iterations, self.lr_final, self.backoff = float(lr), int(iterations), lr_final, float(backoff)
        self.skipped = 0
        network = weights[:-1] if field.physical else weights
        groups = [{"params": network, "weight_decay": weight_decay}]
        if field.physical:  # trained physical parameters (torch_ude.systems.parameters): never decayed
            groups.append({"params": weights[-1:], "weight_decay": 0.0})
        if self.fit_states:
            groups.append({"params": [objective.shooting_states], "lr": self.lr if states_lr is None else states_lr,
                           "weight_decay": 0.0})
        adam = torch.optim.AdamW if weight_decay > 0 else torch.optim.Adam
        self.optimizer = adam(groups, lr=self.lr, betas=betas)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self.lr_factor)
        self.last_finite = [p.detach().clone() for p in self.params]

    def lr_factor(self, iteration: int) -> float:
        """Learning-rate multiplier at ``iteration``: the schedule times ``backoff ** skipped``."""
        factor = self.backoff ** self.skipped
        if self.lr_final is None:
            return factor
        progress = min(iteration, self.iterations) / self.iterations
        ratio = self.lr_final / self.lr
        return factor * (ratio + (1.0 - ratio) * 0.5 * (1.0 + math.cos(math.pi * progress)))

    def step(self, optimizer: torch.optim.Optimizer | None = None) -> StepResult:
        """One full-batch iteration.

        Args:
            optimizer: the object whose ``step()`` applies the update; by default
                `optimizer`. Lightning passes its wrapper of the same optimizer so that
                it counts the step.

        Returns:
            The `StepResult`.
        """
        lr = self.optimizer.param_groups[0]["lr"]
        result = self.objective.gradient()
        loss = float(result.loss.real)
        if not result.finite:
            self.skipped += 1
            with torch.no_grad():
                for p, good in zip(self.params, self.last_finite):
                    p.copy_(good)
            factor = self.lr_factor(self.scheduler.last_epoch)  # the schedule counts accepted steps
            for group, base in zip(self.optimizer.param_groups, self.scheduler.base_lrs):
                group["lr"] = base * factor
            return StepResult(loss=loss, accepted=False, lr=lr)
        with torch.no_grad():
            for p, good in zip(self.params, self.last_finite):
                good.copy_(p)
        self.objective.field.write_grad(result.grads)
        if self.fit_states:
            self.objective.shooting_states.grad = result.state_grad
        (optimizer or self.optimizer).step()
        if self.objective.field.physical:
            self.objective.field.known.project()
        self.scheduler.step()
        return StepResult(loss=loss, accepted=True, lr=lr)

    def run(self, callback: Callable[[int, StepResult], None] | None = None) -> FitHistory:
        """Run `iterations` steps.

        Args:
            callback: called as ``callback(iteration, result)`` after every step.

        Returns:
            The `FitHistory`.
        """
        history = FitHistory()
        start = time.perf_counter()
        for it in range(self.iterations):
            result = self.step()
            history.loss.append(result.loss)
            if callback is not None:
                callback(it, result)
        history.skipped = self.skipped
        history.wall_s = time.perf_counter() - start
        return history

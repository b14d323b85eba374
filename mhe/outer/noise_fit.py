"""A start for the neural residual: fit it to the process noise of the MHE's estimates (two-stage start).

The gray-box model starts at its physics (zero last layer, Section 4.2), so its first MHE solves
are those of the physics-only model, and the process noise ``w_k`` they estimate is what the
physics leaves unexplained along the estimated states. Since ``w`` enters additively in
continuous time (`mhe.models.model`), a residual ``N'`` that took over ``N(x_k, u_k) + w_k`` would leave
the MHE no process noise at those states. `fit_to_process_noise` fits the residual's weights
(the physics and the arrival cost stay) to that target with the MHE's own weighting, the
process-noise cost at fixed states::

    c(N') = sum over windows and stages k = 0..N-1 of ||w_k + N(x_k, u_k) - N'(x_k, u_k)||^2_{Q^-1}

which is the cost of the ``w'`` that keeps the estimated states feasible under ``N'`` exactly for
the Euler discretization and to first order in ``dt`` for the others. This is a regression on
``M N`` stage values of ``n_x`` channels, where the PEM loss (Eq. 5) has ``M n_y`` numbers (one
prediction per window), so it starts a large residual from what every stage of the estimates says
rather than from the end points alone. PEM (`mhe.outer.outer.PEMLoop`) then goes on from it.

The fit is full-batch AdamW with a cosine schedule over ``steps``; the chronologically last
``held_out`` fraction of the windows is held out, and the fit keeps the weights of its lowest
held-out cost (checked every ``check_every`` steps and at the end). Float64 throughout.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import torch
from torch import Tensor

from ..models.checks import require
from ..data.windows import Windows
from ..estimator.estimator import MovingHorizonEstimator

__all__ = ["NoiseFitSettings", "NoiseFitReport", "fit_to_process_noise"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NoiseFitSettings:
    """Settings of the two-stage start, validated once.

    Attributes:
        steps: AdamW steps of the fit (0: no fit, the default).
        lr: AdamW's learning rate (cosine schedule to ``lr_min`` over ``steps``).
        lr_min: the final learning rate.
        weight_decay: AdamW's decoupled weight decay on the residual's weights.
        held_out: the chronologically last fraction of the windows held out to choose the
            weights, in [0, 1) (0: keep the last step's weights).
        check_every: steps between the held-out checks (>= 1).
    """

    steps: int = 0
    lr: float = 3e-3
    lr_min: float = 0.0
    weight_decay: float = 0.0
    held_out: float = 0.2
    check_every: int = 50

    def __post_init__(self) -> None:
        require([(self.steps >= 0, f"outer.noise_fit.steps must be >= 0; got {self.steps}."),
                 (self.check_every >= 1, f"outer.noise_fit.check_every must be >= 1; got {self.check_every}."),
                 (self.lr > 0, f"outer.noise_fit.lr must be > 0; got {self.lr}."),
                 (0 <= self.lr_min <= self.lr, f"outer.noise_fit.lr_min must lie in [0, lr = {self.lr}]; got {self.lr_min}."),
                 (self.weight_decay >= 0, f"outer.noise_fit.weight_decay must be >= 0; got {self.weight_decay}.")])
        if not 0 <= self.held_out < 1:
            raise ValueError(f"outer.noise_fit.held_out must lie in [0, 1); got {self.held_out}.")


@dataclass(frozen=True)
class NoiseFitReport:
    """What one fit did.

    Attributes:
        windows: windows fitted to (solved ones), and held out among them.
        held_out: held-out windows (the chronologically last ones).
        fit_before, fit_after: mean process-noise cost per window of the fitted windows, before
            the fit and with the kept weights.
        held_out_before, held_out_after: the same on the held-out windows (nan without them).
        best_step: the step whose weights were kept (0: the start's).
        wall_s: wall time of the fit in seconds.
    """

    windows: int
    held_out: int
    fit_before: float
    fit_after: float
    held_out_before: float
    held_out_after: float
    best_step: int
    wall_s: float


def fit_to_process_noise(estimator: MovingHorizonEstimator, x: Tensor, w: Tensor, windows: Windows,
                         settings: NoiseFitSettings) -> NoiseFitReport:
    """Fit the estimator's residual to the process noise of MHE solutions; the physics stays fixed.

    Args:
        estimator: the MHE (float64) of a model with a neural residual; its residual's
            weights are changed in place (to those of the lowest held-out cost).
        x: the MHE's estimated states of the M windows, (M, N + 1, n_x) (`mhe.estimator.point.KKTPoint.x`).
        w: their estimated process noise, (M, N, n_w) (units of dx/dt).
        windows: the M windows (their inputs (M, N, n_u) and starts order them in time).
        settings: steps, learning rate, weight decay, held-out fraction.

    Returns:
        The `NoiseFitReport`.

    Raises:
        ValueError: without a residual, without windows, or for shapes that do not match them.
    """
    residual = estimator.model.residual
    if residual is None:
        raise ValueError("The two-stage start fits the neural residual, and this model has none "
                         "(set noise_fit.steps: 0 for a physics-only model).")
    m, n, n_x = len(windows), windows.horizon, estimator.model.n_x
    require([(m > 0, "The two-stage start needs at least one window; got none."),
             (x.shape == (m, n + 1, n_x), f"The two-stage start needs states of shape (M, N + 1, n_x) = "
                                          f"{(m, n + 1, n_x)}; got {tuple(x.shape)}."),
             (w.shape == (m, n, n_x), f"The two-stage start needs noise of shape (M, N, n_w) = {(m, n, n_x)}; got "
                                      f"{tuple(w.shape)}.")])
    t0 = time.perf_counter()
    n_held = int(settings.held_out * m)  # < m since held_out < 1
    order = torch.argsort(windows.start, stable=True)
    fit_rows, held_rows = order[: m - n_held], order[m - n_held:]
    x, u = x[:, :n].detach(), windows.u

    def field(rows: Tensor) -> Tensor:
        """The residual at the stages of the windows ``rows``, (len(rows), N, n_x)."""
        k = len(rows)
        return residual(x[rows].reshape(k * n, -1), u[rows].reshape(k * n, -1)).reshape(k, n, -1)

    with torch.no_grad():
        target = w.detach() + field(torch.arange(m))

    def cost(rows: Tensor) -> Tensor:
        if len(rows) == 0:
            return torch.tensor(float("nan"), dtype=torch.float64)
        return ((target[rows] - field(rows)) ** 2 * estimator.q_inv).sum() / len(rows)

    params = list(residual.parameters())
    with torch.no_grad():
        fit_before, held_before = float(cost(fit_rows)), float(cost(held_rows))
    best = (held_before if n_held else fit_before, 0, [p.detach().clone() for p in params])
    opt = torch.optim.AdamW(params, lr=settings.lr, weight_decay=settings.weight_decay)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(settings.steps, 1), eta_min=settings.lr_min)
    for step in range(1, settings.steps + 1):
        opt.zero_grad(set_to_none=True)
        cost(fit_rows).backward()
        opt.step()
        schedule.step()
        if n_held and (step % settings.check_every == 0 or step == settings.steps):
            with torch.no_grad():
                value = float(cost(held_rows))
            if value < best[0]:
                best = (value, step, [p.detach().clone() for p in params])
    opt.zero_grad(set_to_none=True)
    if n_held:
        with torch.no_grad():
            for p, v in zip(params, best[2]):
                p.copy_(v)
    with torch.no_grad():
        fit_after, held_after = float(cost(fit_rows)), float(cost(held_rows))
    report = NoiseFitReport(m, n_held, fit_before, fit_after, held_before, held_after,
                            best[1] if n_held else settings.steps, time.perf_counter() - t0)
    log.info("Two-stage start: process-noise cost per window %.4g -> %.4g (fitted %d windows), held out %.4g -> %.4g "
             "(%d windows), kept step %d of %d.", fit_before, fit_after, m - n_held, held_before, held_after, n_held,
             report.best_step, settings.steps)
    return report

"""Gauss-Newton outer step for the PEM least-squares problem (Eq. 5, 9): Levenberg-Marquardt.

``J(alpha) = 1/2 sum_i ||r_i(alpha)||^2`` with ``r_i = C x^_N^(i) - y~_N^(i)`` is a nonlinear
least-squares problem, so its Jacobian ``dr_i/dalpha`` (n_y rows per window) gives a
curvature model that a first-order method lacks. The rows come from the adjoint
machinery of Prop. 1 with ``n_y`` right-hand sides per window: one block-tridiagonal
factorization (Prop. 2) solves ``K_i lambda_ij = (d(C x^_N)/dz)^T e_j`` for all outputs
``j``, and ``dr_ij/dalpha = -grad_alpha (F_i^T lambda_ij)`` is one VJP per window and
output, vectorized with ``torch.func.vmap`` (per-sample gradients); ``A`` is never formed.
``sum_j r_ij dr_ij/dalpha`` is the hypergradient of Eq. (12).

`LevenbergMarquardt` holds the damping of the step
``delta = -(J^T J + mu I)^{-1} J^T r`` on the unconstrained ``alpha``; ``mu`` starts at
``tau max(diag(J^T J))`` and follows Nielsen's rule from the ratio of the actual to the
predicted decrease of ``J`` (Madsen, Nielsen & Tingleff 2004, Alg. 3.16).

* The damping is the identity, not Marquardt's ``diag(J^T J)``: the unconstrained
  coordinates are already O(1) per unit of relative change (sigmoid / log-sigmoid
  bounds), while ``J`` hardly depends on the arrival-cost parameters, and with
  ``diag(J^T J)`` scaling those nearly flat directions took unbounded steps (on the racing
  benchmark the first accepted step moved ``s_bar`` to 491 m/s).
* The step is the least-squares solution of ``[J; sqrt(mu) I] delta = [-r; 0]`` by
  Householder QR (LAPACK ``gels``): the conditioning of ``J`` rather than of ``J^T J``,
  and bitwise reproducible, unlike torch's default ``gelsy``, whose last bits changed
  between processes, which was enough to change the path of the outer iterations from
  a far start.
* ``mu`` never falls below machine epsilon times ``max(diag(J^T J))``: the stacked
  matrix stays numerically full rank and Nielsen's multiplicative update cannot
  underflow to a ``mu = 0`` it could never leave.

The outer loop (`mhe.outer.outer.PEMLoop`) accepts a step only if ``J`` re-solved
at the trial ``alpha`` decreases (`levenberg_marquardt_step`). The trial solves are
warm-started, and warm starts follow the local minimum of each (nonconvex) window problem
they came from, so a decrease measured on them may belong to a branch that is not the
MHE's ``argmin``. With a ``check`` the step function re-solves a trial that passed from cold
starts, keeps per window the solution of lower MHE cost (`mhe.estimator.solver.lower_cost`) and
accepts the step only if ``J`` of those solutions decreases as well.

`GaussNewtonStopping` holds the stopping tests (relative decrease of ``J`` over a few
accepted steps, step length, damping); `GaussNewtonStopping.reason` says which one fired.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.func import vjp, vmap

from ..models.checks import require
from ..data.windows import Windows
from ..estimator.blocktri import block_tridiagonal_solve
from ..estimator.estimator import MovingHorizonEstimator
from ..estimator.kkt import kkt_blocks, kkt_residual, outer_parameters, output_parameter_jacobian, prediction_rhs

__all__ = ["ResidualJacobian", "residual_jacobian", "LevenbergMarquardt", "LMStep", "levenberg_marquardt_step",
           "GaussNewtonStopping"]


@dataclass(frozen=True)
class ResidualJacobian:
    """Prediction residuals of the windows and their Jacobian with respect to ``alpha``.

    Attributes:
        residual: ``r_i = C x^_N^(i) - y~_N^(i)``, shape (M, n_y).
        jacobian: ``dr_i/dalpha``, shape (M, n_y, n_alpha); the columns follow
            ``estimator.parameters()``, each parameter flattened
            (``torch.nn.utils.parameters_to_vector`` order).
    """

    residual: Tensor
    jacobian: Tensor

    @property
    def loss(self) -> Tensor:
        """``J^(i) = 1/2 ||r_i||^2``, shape (M,)."""
        return 0.5 * (self.residual * self.residual).sum(-1)

    @property
    def gradient(self) -> Tensor:
        """``dJ/dalpha = sum_i (dr_i/dalpha)^T r_i`` (Eq. 12), shape (n_alpha,)."""
        return torch.einsum("myp,my->p", self.jacobian, self.residual)

    def is_finite(self) -> bool:
        """Whether every residual and Jacobian entry is finite."""
        return bool(torch.isfinite(self.residual).all() and torch.isfinite(self.jacobian).all())


def residual_jacobian(estimator: MovingHorizonEstimator, z: Tensor, windows: Windows) -> ResidualJacobian:
    """The residuals and their Jacobian ``dr_i/dalpha`` at the KKT points ``z`` (Prop. 1 with n_y adjoints).

    ``K_i lambda_ij = (d(C x^_N)/dz)^T e_j`` (Eq. 13 with ``b`` replaced by each output
    direction) shares one block-tridiagonal factorization per window, and row ``j`` of
    window ``i`` is ``-grad_alpha (F_i^T lambda_ij)`` (Eq. 12 for one window and output):
    M n_y VJPs, vectorized; the result holds M n_y n_alpha numbers. With an output map the
    columns of its parameters also get ``dh/dp_y`` at fixed ``z`` (`mhe.estimator.kkt.output_parameter_jacobian`).

    Args:
        estimator: the MHE (its parameters are ``alpha``).
        z: padded KKT points of the M windows, shape (M, N + 1, s).
        windows: the M windows.

    Returns:
        The `ResidualJacobian`.
    """
    m, n_y = len(windows), estimator.model.n_y
    d, e = kkt_blocks(estimator, z, windows)
    eye = torch.eye(n_y, dtype=z.dtype).expand(m, n_y, n_y)
    lam = block_tridiagonal_solve(d, e, prediction_rhs(estimator, z, eye, windows))
    params = outer_parameters(estimator)

    def rows(zi: Tensor, ui: Tensor, yi: Tensor, si: Tensor, li: Tensor) -> Tensor:
        window = Windows(ui[None], yi[None], si[None])
        _, pull = vjp(lambda p: kkt_residual(estimator, zi[None], window, p)[0], params)
        return vmap(lambda c: torch.cat([g.reshape(-1) for g in pull(c)[0].values()]))(li.movedim(-1, 0))

    with torch.no_grad():
        jac = -vmap(rows)(z, windows.u, windows.y, windows.start, lam)
        direct = output_parameter_jacobian(estimator, z, windows)
        if direct:  # the output map's parameters also move r directly (mhe.estimator.kkt)
            jac = jac + torch.cat([direct[n].reshape(m, n_y, -1) if n in direct else
                                   jac.new_zeros(m, n_y, p.numel()) for n, p in params.items()], dim=-1)
        return ResidualJacobian(estimator.prediction_error(z, windows), jac)


@dataclass
class LevenbergMarquardt:
    """Damping state of the Levenberg-Marquardt step (Nielsen's update).

    Attributes:
        tau: the first ``mu`` is ``tau * max(diag(J^T J))``.
        mu: the damping ``mu`` (None until the first step sets it from ``tau``); at least
            machine epsilon times ``max(diag(J^T J))``.
        nu: Nielsen's growth factor of ``mu`` after a rejected step.
        scale: ``max(diag(J^T J))`` of the last proposal (None before the first); ``mu /
            scale`` is the damping relative to the curvature.
    """

    tau: float = 1e-3
    mu: float | None = None
    nu: float = 2.0
    scale: float | None = None

    def __post_init__(self) -> None:
        if not self.tau > 0:
            raise ValueError(f"tau must be positive; got {self.tau}.")

    def propose(self, rj: ResidualJacobian) -> tuple[Tensor, Tensor]:
        """The step ``delta`` and the decrease of ``J`` per window that the linear model predicts.

        Args:
            rj: residuals and Jacobian at the current ``alpha`` (finite).

        Returns:
            ``delta`` of shape (n_alpha,) and ``1/2 (||r_i||^2 - ||r_i + J_i delta||^2)``,
            shape (M,).
        """
        jac = rj.jacobian.reshape(-1, rj.jacobian.shape[-1])
        scale, info = float((jac * jac).sum(0).max()), torch.finfo(jac.dtype)
        self.scale = scale
        self.mu = max(self.tau * scale if self.mu is None else self.mu, info.eps * scale, info.tiny)
        eye = torch.eye(jac.shape[1], dtype=jac.dtype)
        lhs = torch.cat([jac, math.sqrt(self.mu) * eye])
        rhs = torch.cat([-rj.residual.reshape(-1), jac.new_zeros(jac.shape[1])])
        delta = torch.linalg.lstsq(lhs, rhs[:, None], driver="gels").solution[:, 0]
        after = rj.residual + rj.jacobian @ delta
        return delta, 0.5 * ((rj.residual ** 2).sum(-1) - (after ** 2).sum(-1))

    def update(self, actual: float, predicted: float) -> bool:
        """Adapt ``mu`` to the gain ratio ``actual / predicted`` (Nielsen 1999).

        Args:
            actual: decrease of ``J`` at the re-solved trial ``alpha``.
            predicted: decrease predicted by the linear model on the same windows.

        Returns:
            Whether the step is accepted (``J`` decreased).
        """
        assert self.mu is not None, "propose sets mu before the first update"
        if actual > 0 and predicted > 0:
            rho = actual / predicted
            self.mu *= max(1.0 / 3.0, 1.0 - (2.0 * rho - 1.0) ** 3)
            self.nu = 2.0
            return True
        self.mu *= self.nu
        self.nu *= 2.0
        return False


@dataclass(frozen=True)
class LMStep:
    """Outcome of one Levenberg-Marquardt iteration.

    Attributes:
        delta: the accepted step (None when every trial was rejected).
        trials: trial steps evaluated (non-finite ones included).
        checked: trials re-solved from cold starts by ``check``.
        check_rejected: trials that lowered ``J`` on the warm-started solutions but not on
            the checked ones (a decrease that belonged to another branch).
    """

    delta: Tensor | None
    trials: int
    checked: int = 0
    check_rejected: int = 0


def levenberg_marquardt_step(lm: LevenbergMarquardt, rj: ResidualJacobian, ok: Tensor,
                             evaluate: Callable[[Tensor], Tensor], max_trials: int,
                             check: Callable[[], Tensor] | None = None) -> LMStep:
    """One outer iteration: trial steps until ``J`` re-solved at ``alpha + delta`` decreases.

    A trial is compared with the current ``J`` on the windows whose MHE succeeded both now
    (``ok``) and at the trial; a trial at which none did, or a non-finite ``delta`` (never
    evaluated), counts as rejected and raises ``mu``. With ``check``, a trial that lowered
    ``J`` is re-evaluated by ``check()`` and accepted only if ``J`` is also lower there; the
    gain ratio that updates ``mu`` then uses the checked decrease.

    Args:
        lm: the damping state (updated in place).
        rj: residuals and Jacobian of M windows at the current ``alpha`` (finite); the rows
            of windows that are not ``ok`` must be zero.
        ok: windows whose MHE succeeded at the current ``alpha``, bool (M,).
        evaluate: sets ``alpha + delta`` (delta of shape (n_alpha,)), re-solves the windows
            and returns their ``J^(i)``, shape (M,), NaN where the MHE failed.
        max_trials: trials before giving up.
        check: re-solves the windows at the ``alpha`` of the last ``evaluate`` another way
            (cold starts, lower MHE cost kept) and returns their ``J^(i)`` like ``evaluate``.

    Returns:
        The `LMStep`; when its ``delta`` is None the caller restores ``alpha``.
    """
    checked = check_rejected = 0
    for trial in range(1, max_trials + 1):
        delta, predicted = lm.propose(rj)
        if not bool(torch.isfinite(delta).all()):
            lm.update(-math.inf, 0.0)
            continue
        actual, both = _decrease(rj, ok, evaluate(delta))
        if check is not None and actual > 0:
            checked += 1
            actual, both = _decrease(rj, ok, check())
            check_rejected += int(not actual > 0)
        if lm.update(actual, float(predicted[both].sum())):
            return LMStep(delta, trial, checked, check_rejected)
    return LMStep(None, max_trials, checked, check_rejected)


def _decrease(rj: ResidualJacobian, ok: Tensor, after: Tensor) -> tuple[float, Tensor]:
    """Decrease of ``J`` on the windows that succeeded before and after (-inf if none), and their mask."""
    both = ok & torch.isfinite(after)
    return (float((rj.loss[both] - after[both]).sum()) if bool(both.any()) else -math.inf), both


@dataclass(frozen=True)
class GaussNewtonStopping:
    """Stopping tests of the Levenberg-Marquardt outer loop; a test with tolerance 0 is off.

    ``J`` is a sum of ``M n_y`` squared residuals, so fitting one more parameter to noise
    lowers it by about ``1 / (M n_y)`` relative (2.5e-3 on the racing benchmark); decreases
    far below that are not worth further MHE solves.

    Attributes:
        ftol: stop when ``J`` fell by less than ``ftol * J`` over the last ``patience``
            accepted steps.
        patience: accepted steps that the ``ftol`` test looks back.
        xtol: stop when an accepted step's largest component (unconstrained coordinates,
            O(1) per unit of relative change with bounded parameters) is below ``xtol``.
        max_damping: stop when ``mu`` exceeds ``max_damping * max(diag(J^T J))``: the steps
            have shrunk to negligible gradient steps (also after an iteration that rejected
            all its trials, which multiplies ``mu`` by ``2^(max_trials (max_trials + 1) / 2)``).
    """

    ftol: float = 1e-4
    patience: int = 3
    xtol: float = 1e-6
    max_damping: float = 1e8

    def __post_init__(self) -> None:
        require([(self.ftol >= 0, f"outer.stopping.ftol must be >= 0; got {self.ftol}."),
                 (self.patience >= 1, f"outer.stopping.patience must be >= 1; got {self.patience}."),
                 (self.xtol >= 0, f"outer.stopping.xtol must be >= 0; got {self.xtol}."),
                 (self.max_damping >= 0, f"outer.stopping.max_damping must be >= 0; got {self.max_damping}.")])

    def reason(self, losses: Sequence[float], step: Tensor | None, lm: LevenbergMarquardt) -> str:
        """The name of the first test that fires, or ``""``.

        Args:
            losses: ``J`` at the start and after every accepted step so far (the last entry is
                the current ``J``).
            step: the step accepted in this iteration (None if none was).
            lm: the damping state after this iteration.

        Returns:
            ``"ftol"``, ``"xtol"``, ``"max_damping"`` or ``""``.
        """
        if self.ftol > 0 and len(losses) > self.patience:
            old, new = losses[-1 - self.patience], losses[-1]
            if old - new <= self.ftol * abs(new):
                return "ftol"
        if self.xtol > 0 and step is not None and float(step.abs().max()) < self.xtol:
            return "xtol"
        if self.max_damping > 0 and lm.mu is not None and lm.scale and lm.mu > self.max_damping * lm.scale:
            return "max_damping"
        return ""

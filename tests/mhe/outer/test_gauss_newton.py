"""Residual Jacobian (n_y adjoints per window) against the hypergradient and central differences; LM damping,
cold-start check and stopping tests."""
import pytest
import torch

from mhe import GaussNewtonStopping, WindowSolver, hypergradient_adjoint, residual_jacobian
from mhe.outer.gauss_newton import LevenbergMarquardt, ResidualJacobian, levenberg_marquardt_step
from tests.mhe.helpers import estimator, kkt_point, vehicle_windows


@pytest.mark.parametrize("kind", ["physics", "neural", "gray"])
def test_jacobian_transpose_residual_is_the_hypergradient(kind, tmp_path, gray_solver):
    est, windows, z = kkt_point(kind, tmp_path, gray_solver)
    rj, hg = residual_jacobian(est, z, windows), hypergradient_adjoint(est, z, windows)
    n_alpha = sum(p.numel() for p in est.parameters())
    assert rj.residual.shape == (3 if kind != "gray" else 2, 2) and rj.jacobian.shape == (*rj.residual.shape, n_alpha)
    assert torch.equal(rj.loss, hg.loss)
    g = torch.cat([v.reshape(-1) for v in hg.grads.values()])
    assert float((rj.gradient - g).norm() / g.norm()) <= 1e-10


def test_jacobian_rows_belong_to_their_window(tmp_path):
    est, windows, z = kkt_point("physics", tmp_path, None)
    full = residual_jacobian(est, z, windows).jacobian
    one = residual_jacobian(est, z[1:2], windows[1:2]).jacobian
    assert torch.allclose(one[0], full[1], rtol=1e-13, atol=1e-13 * float(full.abs().max()))


def test_physics_jacobian_matches_central_differences_of_the_residuals(tmp_path):
    est, windows = estimator("physics", 6, perturb=1.2), vehicle_windows(6, 3)
    solver = WindowSolver(est, tmp_path)
    jac = residual_jacobian(est, solver.solve(windows).point.stages(), windows).jacobian
    params, eps, columns = list(est.parameters()), 1e-5, []
    for p in params:
        for j in range(p.numel()):
            values = []
            for sign in (1.0, -1.0):
                with torch.no_grad():
                    p.view(-1)[j] += sign * eps
                sol = solver.solve(windows)
                assert bool(sol.ok.all())
                values.append(est.prediction_error(sol.point.stages(), windows))
                with torch.no_grad():
                    p.view(-1)[j] -= sign * eps
            columns.append((values[0] - values[1]) / (2 * eps))
    fd = torch.stack(columns, dim=-1)
    assert float((fd - jac).norm() / jac.norm()) <= 1e-5


def test_levenberg_marquardt_step_and_damping_update():
    gen = torch.Generator().manual_seed(0)
    jac, res = torch.randn(4, 2, 3, generator=gen), torch.randn(4, 2, generator=gen)
    lm = LevenbergMarquardt(tau=1e-3)
    delta, predicted = lm.propose(ResidualJacobian(res, jac))
    flat = jac.reshape(8, 3)
    mu = 1e-3 * float(flat.pow(2).sum(0).max())
    assert lm.mu == pytest.approx(mu, rel=1e-14)
    ref = -torch.linalg.solve(flat.T @ flat + mu * torch.eye(3), flat.T @ res.reshape(-1))
    assert torch.allclose(delta, ref, rtol=1e-10, atol=1e-12)
    assert torch.allclose(predicted, 0.5 * (res.pow(2).sum(-1) - (res + jac @ delta).pow(2).sum(-1)))
    assert float(predicted.sum()) > 0
    assert not lm.update(-1.0, 1.0) and lm.mu == pytest.approx(2 * mu) and lm.nu == 4.0
    assert not lm.update(float("-inf"), 1.0) and lm.mu == pytest.approx(8 * mu)
    assert lm.update(0.5, 1.0) and lm.mu == pytest.approx(8 * mu) and lm.nu == 2.0
    assert lm.update(1.0, 1.0) and lm.mu == pytest.approx(8 * mu / 3)
    with pytest.raises(ValueError, match="tau must be positive"):
        LevenbergMarquardt(tau=0.0)


def test_damping_keeps_a_rank_deficient_step_finite_after_mu_underflows():
    jac = torch.zeros(3, 2, 4, dtype=torch.float64)
    jac[..., 0] = torch.arange(6.0).reshape(3, 2)  # columns 1..3 carry no information
    lm = LevenbergMarquardt(tau=1e-3, mu=0.0)
    delta, _ = lm.propose(ResidualJacobian(torch.ones(3, 2, dtype=torch.float64), jac))
    assert lm.mu == torch.finfo(torch.float64).eps * 55.0
    assert bool(torch.isfinite(delta).all()) and torch.equal(delta[1:], torch.zeros(3, dtype=torch.float64))


def _scripted(evaluations, checks, max_trials=3):
    """One LM iteration on a random 4-window problem whose re-solved J^(i) are given per trial."""
    gen = torch.Generator().manual_seed(1)
    rj = ResidualJacobian(torch.randn(4, 2, generator=gen, dtype=torch.float64),
                          torch.randn(4, 2, 3, generator=gen, dtype=torch.float64))
    lm, evaluations, checks = LevenbergMarquardt(tau=1e-3), list(evaluations), list(checks)
    step = levenberg_marquardt_step(lm, rj, torch.ones(4, dtype=torch.bool), lambda d: rj.loss * evaluations.pop(0),
                                    max_trials, (lambda: rj.loss * checks.pop(0)) if checks else None)
    return step, lm


def test_check_rejects_a_decrease_that_only_the_warm_started_branch_shows():
    # trial 1: warm J halves, cold-checked J doubles (a branch jump) -> rejected, mu doubles;
    # trial 2: both lower -> accepted.
    step, lm = _scripted([0.5, 0.5], [2.0, 0.9])
    assert step.delta is not None and step.trials == 2 and step.checked == 2 and step.check_rejected == 1
    assert lm.nu == 2.0
    step, _ = _scripted([0.5, 0.5, 0.5], [2.0, 2.0, 2.0])
    assert step.delta is None and step.trials == 3 and step.check_rejected == 3
    step, _ = _scripted([1.5, 0.5], [0.9])  # a trial that fails warm is never checked
    assert step.delta is not None and step.trials == 2 and step.checked == 1 and step.check_rejected == 0
    step, _ = _scripted([0.5], [])  # without a check the warm decrease decides
    assert step.delta is not None and step.checked == 0


def test_stopping_tests_fire_on_a_plateau_a_short_step_and_exploding_damping():
    stop, lm = GaussNewtonStopping(ftol=1e-3, patience=2, xtol=1e-6, max_damping=1e6), LevenbergMarquardt()
    lm.mu, lm.scale = 1.0, 1.0
    big = torch.tensor([0.1, -0.2])
    assert stop.reason([10.0, 5.0], big, lm) == ""                       # fewer than patience steps
    assert stop.reason([10.0, 5.0, 4.0, 3.999], big, lm) == ""           # 25 % over the last 2
    assert stop.reason([10.0, 4.001, 4.0005, 4.0], big, lm) == "ftol"    # 2.5e-4 over the last 2
    assert stop.reason([10.0, 5.0, 4.0], torch.tensor([1e-7, 0.0]), lm) == "xtol"
    assert stop.reason([10.0, 5.0, 4.0], None, lm) == ""
    lm.mu = 2e6
    assert stop.reason([10.0, 5.0, 4.0], None, lm) == "max_damping"
    assert GaussNewtonStopping(0.0, 1, 0.0, 0.0).reason([1.0, 1.0], torch.zeros(2), lm) == ""
    with pytest.raises(ValueError, match="patience must be >= 1"):
        GaussNewtonStopping(patience=0)

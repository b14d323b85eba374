"""Fisher information of the one-step outputs and the Cramér–Rao bound (mhe.peers.cramer_rao)."""
import numpy as np
import pytest
import torch

from mhe import NeuralResidual, SingleTrackVehicle, StateSpaceModel
from mhe.data.recording import held_inputs
from mhe.models.hold import input_hold
from mhe.models.pendulum import PendulumPhysics
from mhe.outer.gauss_newton import ResidualJacobian, residual_jacobian
from mhe.peers.cramer_rao import cramer_rao_std, determined_parameters, mhe_cramer_rao_std, one_step_fisher
from mhe.problems.racing import MEASURED, RacingSimulation
from mhe.scoring import with_values
from tests.mhe.datasets import bayesrace_problem
from tests.mhe.helpers import estimator, torch_kkt_point, vehicle_windows

DT, C, R = 0.02, 0.4, (1e-3, 2e-3)


def pendulum(measured, discretization="euler"):
    return StateSpaceModel(PendulumPhysics(9.81, C, identify_damping=True), dt=DT, measured=measured,
                           discretization=discretization)


def test_euler_pendulum_matches_the_closed_form():
    states = torch.randn(50, 2)
    fisher = one_step_fisher(pendulum((0, 1)), states, torch.zeros(50, 0), R)
    # omega_{k+1} = omega + dt (-k sin theta - c omega): d/d(rel c) = -dt c omega, theta_{k+1} does not see c
    expected = ((DT * C * states[:-1, 1] / R[1]) ** 2).sum()
    assert fisher.shape == (1, 1) and float(fisher[0, 0]) == pytest.approx(float(expected), rel=1e-12)
    assert float(cramer_rao_std(fisher)[0]) == pytest.approx(float(expected) ** -0.5, rel=1e-12)


def test_theta_alone_sees_the_damping_with_rk4_only():
    states = torch.randn(50, 2)
    euler = one_step_fisher(pendulum((0,)), states, torch.zeros(50, 0), R[:1])
    assert float(euler.abs().max()) == 0.0 and torch.isinf(cramer_rao_std(euler)).all()
    rk4 = one_step_fisher(pendulum((0,), "rk4"), states, torch.zeros(50, 0), R[:1])
    assert torch.isfinite(cramer_rao_std(rk4)).all()


@pytest.mark.parametrize("hold", ["zoh", "foh"])
def test_vehicle_fisher_is_the_finite_difference_one(hold):
    rec = held_inputs(RacingSimulation(steps=60, seed=2).record(), input_hold(hold))  # foh: rows [u_k, u_{k+1}]
    model = StateSpaceModel(SingleTrackVehicle(), dt=0.02, measured=MEASURED, hold=hold)
    r = (1e-3, 1e-2)
    fisher = one_step_fisher(model, rec.states, rec.inputs, r)
    params = model.physics.params
    truth = {n: float(v.detach()) for n, v in params().items()}
    cols = []
    for n in params.free_names:
        ys = []
        for sign in (1.0, -1.0):
            params.assign({n: truth[n] * (1.0 + sign * 1e-6)})
            ys.append(model.output(model.step(rec.states[:-1], rec.inputs[:-1], torch.zeros_like(rec.states[:-1]))))
        params.assign({n: truth[n]})
        cols.append(((ys[0] - ys[1]) / 2e-6 / torch.tensor(r)).detach().reshape(-1))
    jac = torch.stack(cols, dim=1)
    np.testing.assert_allclose(fisher.numpy(), (jac.T @ jac).numpy(), rtol=1e-5, atol=1e-6 * float(fisher.abs().max()))


def test_transitions_into_a_break_are_left_out():
    model, states = pendulum((0, 1)), torch.randn(20, 2)
    whole = one_step_fisher(model, states, torch.zeros(20, 0), R)
    jump = one_step_fisher(model, states[7:9], torch.zeros(2, 0), R)  # the transition 7 -> 8
    cut = one_step_fisher(model, states, torch.zeros(20, 0), R, breaks=(8,))
    assert float(cut[0, 0]) == pytest.approx(float(whole[0, 0] - jump[0, 0]), rel=1e-12)


def test_bad_input_is_a_clear_error():
    states = torch.randn(10, 2)
    with pytest.raises(ValueError, match="physics-only model with identified parameters"):
        one_step_fisher(StateSpaceModel(PendulumPhysics(9.81, C), dt=DT, measured=(0,)), states,
                        torch.zeros(10, 0), R[:1])
    with pytest.raises(ValueError, match="physics-only"):
        one_step_fisher(StateSpaceModel(PendulumPhysics(9.81, C, True), NeuralResidual(2, 0, 4), dt=DT,
                                        measured=(0,)), states, torch.zeros(10, 0), R[:1])
    with pytest.raises(ValueError, match="measurement_std must be 2 positive numbers"):
        one_step_fisher(pendulum((0, 1)), states, torch.zeros(10, 0), (1e-3, 0.0))
    with pytest.raises(ValueError, match=r"states must have shape \(T, 2\)"):
        one_step_fisher(pendulum((0, 1)), states[:, :1], torch.zeros(10, 0), R)


def test_the_mhe_bound_scales_with_the_residuals_and_names_the_identified_parameters():
    est, windows = estimator("physics", 6), vehicle_windows(6, 8)
    rj = residual_jacobian(est, torch_kkt_point(est, windows), windows)
    std = mhe_cramer_rao_std(est, rj)
    assert list(std) == list(est.model.physics.params.free_names)
    assert all(0.0 < s < float("inf") for s in std.values())
    # F ~ 1 / var(r): noise twice as large, bounds twice as wide
    doubled = mhe_cramer_rao_std(est, ResidualJacobian(2.0 * rj.residual, rj.jacobian))
    assert [doubled[n] for n in std] == pytest.approx([2.0 * s for s in std.values()], rel=1e-10)


def test_the_determined_subset_of_bayesrace_shrinks_as_the_noise_grows():
    problem = bayesrace_problem()
    truth = {**problem.start_values(), **{n: problem.truth[n] for n in problem.physics.params.free_names}}
    model = with_values(problem, problem.source, truth, None).model()
    out = determined_parameters(model, problem.recording, problem.mhe.measurement_std, [1.0, 100.0], 0.1)
    small, large = out["scales"]["1"], out["scales"]["100"]
    assert len(small["determined"]) == 16 and set(large["determined"]) < set(small["determined"])
    assert "Er" not in large["determined"] and large["rel_std"]["Er"] == pytest.approx(100 * small["rel_std"]["Er"])
    assert min(out["fisher_eigenvalues"]) > 0  # noise-free data: every direction is seen
    assert out["measurement_std"] == list(problem.mhe.measurement_std) and out["threshold"] == 0.1

"""Input holds: step inputs of a recording, each hold against the closed-form linear system for every tableau, torch vs
CasADi, and an MHE on first-order-hold windows (IPOPT, KKT residual, both hypergradients)."""
import numpy as np
import pytest
import scipy.linalg
import torch

from mhe import (ArrivalCost, IdentificationProblem, MHESettings, Recording, StateSpaceModel, WindowSolver,
                 hypergradient_adjoint, hypergradient_explicit)
from mhe.data.recording import held_inputs
from mhe.models.casadi_model import CasadiDynamics
from mhe.models.discretization import TABLEAUS
from mhe.models.hold import HOLDS, input_hold, step_inputs
from mhe.problems.oscillator import LinearOscillator, OscillatorSimulation

OMEGA, ZETA, GAIN = 2.0, 0.1, 1.5
A = np.array([[0.0, 1.0], [-OMEGA ** 2, -2 * ZETA * OMEGA]])
B = np.array([[0.0], [GAIN]])
ORDER = {"euler": 1, "rk4": 4, "rkf45": 5}


def _exact(x0, u0, slope, h):
    """x(h) of x' = A x + B (u0 + slope t) from x0, by the matrix exponential of the system with its input's states."""
    m = np.zeros((4, 4))
    m[:2, :2], m[:2, 2:3], m[2, 3] = A, B, 1.0
    return (scipy.linalg.expm(m * h) @ np.array([*x0, u0, slope]))[:2]


def _step(hold, name, h, x0, u0, u1):
    model = StateSpaceModel(LinearOscillator(OMEGA, ZETA, GAIN), dt=h, discretization=name, hold=hold)
    u = torch.tensor([[u0, u1]] if HOLDS[hold].paired else [[u0]], dtype=torch.float64)
    with torch.no_grad():
        return model.step(torch.tensor([x0], dtype=torch.float64), u, torch.zeros(1, 2, dtype=torch.float64))[0].numpy()


def test_step_inputs_pair_each_row_with_the_next_within_its_stretch():
    u = torch.arange(6, dtype=torch.float64)[:, None]
    assert step_inputs(u, input_hold("zoh")) is u
    pairs = step_inputs(u, input_hold("foh"), breaks=(3,))
    assert pairs[:, 1].tolist() == [1, 2, 2, 4, 5, 5]  # rows 2 and 5 end a stretch: no next input in it
    rec = Recording(torch.zeros(6, 2), u, torch.zeros(6, 1), 0.1, (3,))
    assert torch.equal(held_inputs(rec, input_hold("midpoint")).inputs, pairs)
    assert held_inputs(rec, input_hold("zoh")) is rec


@pytest.mark.parametrize("name", sorted(TABLEAUS))
@pytest.mark.parametrize("hold", sorted(HOLDS))
def test_each_hold_solves_the_closed_form_system_of_its_own_input_with_the_tableaus_order(name, hold):
    # zoh: u_k held; foh: u_k + (u_{k+1} - u_k) t / h; midpoint: (u_k + u_{k+1}) / 2 held. The input follows
    # u(t) = u0 + s t, so u_{k+1} = u0 + s h, and the one-step error falls as h^(order + 1)
    x0, u0, s = (0.3, -0.2), 0.5, -3.0
    errors = []
    for h in (0.04, 0.02):
        u1 = u0 + s * h
        held = {"zoh": (u0, 0.0), "foh": (u0, s), "midpoint": (0.5 * (u0 + u1), 0.0)}[hold]
        errors.append(np.abs(_step(hold, name, h, x0, u0, u1) - _exact(x0, *held, h)).max())
    assert np.log2(errors[0] / errors[1]) == pytest.approx(ORDER[name] + 1, abs=0.25)


@pytest.mark.parametrize("name", ["rk4", "rkf45"])
def test_the_first_order_hold_removes_the_zero_order_holds_error_on_a_linear_input(name):
    # the input is linear in time: foh is exact up to the tableau's error, zoh and midpoint are not
    x0, u0, s, h = (0.3, -0.2), 0.5, -3.0, 0.05
    truth = _exact(x0, u0, s, h)
    err = {hold: np.abs(_step(hold, name, h, x0, u0, u0 + s * h) - truth).max() for hold in HOLDS}
    assert err["foh"] < 1e-3 * err["zoh"] and err["foh"] < 0.05 * err["midpoint"]
    assert err["zoh"] == pytest.approx(GAIN * abs(s) * h ** 2 / 2, rel=0.05)  # the velocity misses int_0^h g s t dt


@pytest.mark.parametrize("hold", sorted(HOLDS))
def test_eulers_leading_error_is_that_of_the_input_its_hold_reads(hold):
    # Euler's error is O(h^2) whatever input it reads, so the order alone cannot tell the holds apart; its leading
    # term can. Against the closed form of the hold's own input, x(h) = x0 + h f(x0, u(0)) + h^2/2 (A f + B u'(0)):
    # zoh and midpoint hold a constant u (u' = 0), foh reads u(0) = u0 and has u' = s; reading another input
    # shifts the step by h B (u_read - u(0)), i.e. by h^2 B s / 2 for midpoint and foh swapped
    x0, u0, s = np.array([0.3, -0.2]), 0.5, -3.0
    for h in (0.01, 0.005):
        u1 = u0 + s * h
        held, slope = {"zoh": (u0, 0.0), "foh": (u0, s), "midpoint": (0.5 * (u0 + u1), 0.0)}[hold]
        f = A @ x0 + B[:, 0] * held
        leading = -0.5 * (A @ f + B[:, 0] * slope)
        err = (_step(hold, "euler", h, x0, u0, u1) - _exact(x0, held, slope, h)) / h ** 2
        np.testing.assert_allclose(err, leading, rtol=0.0, atol=0.05 * np.abs(leading).max())


@pytest.mark.parametrize("hold", ["foh", "zoh"])
def test_a_first_order_hold_rk4_free_run_is_torch_udes_recorded_input_rollout(hold):
    # torch_ude.prediction.rk4_input_rollout (and baselines.rk4) interpolate a recorded input linearly over each
    # step: mhe's foh is the same map, to rounding (u_k + (u_{k+1} - u_k) / 2 against (u_k + u_{k+1}) / 2);
    # zoh is another one
    from mhe import simulate_free_run
    from mhe.problems.torque_pendulum import TorquePendulumPhysics
    from torch_ude.prediction import rk4_input_rollout

    physics = TorquePendulumPhysics()
    u = 0.3 * torch.sin(torch.arange(200, dtype=torch.float64) * 0.37)[:, None]
    x0 = torch.tensor([[0.4, -0.3]], dtype=torch.float64)
    want = rk4_input_rollout(physics.torch_model(), x0, u[:, None], 0.02)[:, 0]
    with torch.no_grad():
        got = simulate_free_run(StateSpaceModel(physics, dt=0.02, hold=hold), x0[0], u).states
    err = float((got - want).abs().max())
    assert err <= 1e-12 if hold == "foh" else err > 1e-3


def test_euler_reads_the_input_at_the_steps_start_only_so_its_first_order_hold_is_the_zero_order_hold():
    x0, u0, u1 = (0.3, -0.2), 0.5, -0.7
    assert np.array_equal(_step("foh", "euler", 0.05, x0, u0, u1), _step("zoh", "euler", 0.05, x0, u0, u1))
    assert not np.array_equal(_step("midpoint", "euler", 0.05, x0, u0, u1), _step("zoh", "euler", 0.05, x0, u0, u1))


@pytest.mark.parametrize("name", sorted(TABLEAUS))
@pytest.mark.parametrize("hold", sorted(HOLDS))
def test_casadi_step_and_stages_match_torch_for_every_hold(name, hold, tmp_path):
    model = StateSpaceModel(LinearOscillator(OMEGA, ZETA, GAIN), dt=0.05, discretization=name, hold=hold)
    dyn = CasadiDynamics(model, tmp_path)
    x, w = np.array([0.3, -0.2]), np.array([0.01, -0.03])
    u = np.array([0.5, -0.7])[:model.n_u_step]
    p = CasadiDynamics.parameter_values(model)
    with torch.no_grad():
        want = model.step(torch.tensor(x)[None], torch.tensor(u)[None], torch.tensor(w)[None])[0].numpy()
    np.testing.assert_allclose(np.asarray(dyn.step(x, u, w, p)).ravel(), want, rtol=1e-14, atol=1e-15)
    ks = np.asarray(dyn.stages(x, u, w, p))
    np.testing.assert_allclose(TABLEAUS[name].combine(x, list(ks.T), 0.05), want, rtol=1e-14, atol=1e-15)


def test_unknown_holds_are_one_line_errors_naming_the_setting():
    with pytest.raises(ValueError, match=r"hold must be one of \['foh', 'midpoint', 'zoh'\].*got 'linear'"):
        StateSpaceModel(LinearOscillator(), hold="linear")
    with pytest.raises(ValueError, match="hold must be one of"):
        IdentificationProblem(OscillatorSimulation(steps=50), MHESettings(5, (0.1, 0.1), (0.01,)),
                              ArrivalCost((0.0, 0.0), (1.0, 1.0)), (0,), LinearOscillator(), hold="FOH")


@pytest.fixture(scope="module")
def foh_problem():
    source = OscillatorSimulation(steps=80, noise=0.01, seed=2)
    physics = LinearOscillator(1.1 * source.omega, 0.08, 0.9 * source.gain, identify=("omega", "zeta", "gain"))
    return IdentificationProblem(source, MHESettings(8, (0.5, 5.0), (0.01,)), ArrivalCost((0.0, 0.0), (1.0, 50.0)),
                                 (0,), physics, stride=12, hold="foh")


def test_a_first_order_hold_problem_reads_input_pairs_and_its_mhe_solves_to_a_kkt_point(foh_problem, tmp_path):
    windows = foh_problem.windows
    logged = foh_problem.logged.inputs
    assert windows.u.shape[-1] == 2 and torch.equal(windows.u[0, :, 1], logged[1:9, 0])
    est = foh_problem.estimator()
    assert est.model.hold.name == "foh" and foh_problem.describe()["hold"] == "foh"
    sol = WindowSolver(est, tmp_path).solve(windows)
    assert bool(sol.ok.all()) and float(sol.kkt_residual.max()) < 1e-9
    adj = hypergradient_adjoint(est, sol.point.stages(), windows)
    exp = hypergradient_explicit(est, sol.point.stages(), windows, chunk_size=16)
    ga = torch.cat([g.reshape(-1) for g in adj.grads.values()])
    ge = torch.cat([g.reshape(-1) for g in exp.grads.values()])
    assert float(ga.norm()) > 0 and float((ga - ge).norm() / ge.norm()) <= 1e-8


def test_the_hold_is_a_setting_of_the_config():
    from mhe.training import load_experiment

    config = "configs/mhe_two_tank_gn.yaml"
    exp = load_experiment(config, ["--trainer.logger", "false"])
    assert exp.problem.estimator().model.hold.name == "zoh" and exp.problem.windows.u.shape[-1] == 1
    exp = load_experiment(config, ["--trainer.logger", "false", "--data.problem.hold", "foh"])
    assert exp.problem.estimator().model.hold.name == "foh" and exp.problem.windows.u.shape[-1] == 2
    with pytest.raises(ValueError, match=r"hold must be one of \['foh', 'midpoint', 'zoh'\].*got 'linear'"):
        load_experiment(config, ["--trainer.logger", "false", "--data.problem.hold", "linear"])

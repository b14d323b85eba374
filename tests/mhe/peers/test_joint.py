"""Joint-MHE (mhe.peers.joint): the bounded map on both backends, the augmented model, the damping of a pendulum."""
import dataclasses

import casadi as cs
import numpy as np
import pytest
import torch

from mhe import ResidualSettings, StateSpaceModel
from mhe.models.bounds import Bound
from mhe.models.casadi_model import CASADI_OPS, CasadiDynamics
from mhe.models.ops import TORCH_OPS
from mhe.models.pendulum import PendulumPhysics
from mhe.peers.joint import AugmentedPhysics, JointMHE, JointSettings, bounded_value
from mhe.problems.pendulum import pendulum_problem
from torch_ude.systems import SinglePendulum

BOUNDS = [Bound(0.5, 2.0), Bound(5.0, 30.0, log=True), Bound(lower=0.1), Bound(upper=-0.2), Bound()]
RAW = torch.linspace(-8.0, 8.0, 33, dtype=torch.float64)


@pytest.mark.parametrize("bound", BOUNDS, ids=["two-sided", "log", "lower", "upper", "open"])
def test_bounded_value_is_from_raw_on_torch_and_casadi(bound):
    expected = bound.from_raw(RAW).numpy()
    np.testing.assert_allclose(bounded_value(bound, RAW, TORCH_OPS).numpy(), expected, rtol=1e-14, atol=1e-15)
    r = cs.SX.sym("r")
    f = cs.Function("f", [r], [bounded_value(bound, r, CASADI_OPS)])
    got = np.array([float(f(v)) for v in RAW.tolist()])
    np.testing.assert_allclose(got, expected, rtol=1e-14, atol=1e-15)


def test_augmented_field_is_the_physics_at_the_state_parameters_and_holds_them():
    base = PendulumPhysics(9.81, 0.3, identify_damping=True)
    aug = AugmentedPhysics(base)
    assert aug.state_names == ("theta", "omega", "rho_c") and aug.params.free_names == ()
    rho = torch.tensor([-1.0, 0.2, 1.5])
    x = torch.stack([torch.tensor([0.3, -1.1, 2.0]), torch.tensor([1.2, 0.4, -0.7]), rho], dim=-1)
    c = aug.values(rho.tolist())["c"]
    assert c == pytest.approx(float(base.params.bounds["c"].from_raw(torch.tensor(-1.0))))
    out = aug(x, x.new_zeros(3, 0))
    for i in range(3):
        at = PendulumPhysics(9.81, aug.values([float(rho[i])])["c"])
        np.testing.assert_allclose(out[i, :2].numpy(), at(x[i:i + 1, :2], x.new_zeros(1, 0))[0].detach().numpy(),
                                   rtol=1e-14, atol=1e-14)
    assert torch.equal(out[:, 2], torch.zeros(3))
    assert aug.raw_start() == [base.params.bounds["c"].to_raw(0.3)]


def test_augmented_casadi_step_is_the_torch_step(tmp_path):
    model = StateSpaceModel(AugmentedPhysics(PendulumPhysics(9.81, 0.3, identify_damping=True)), dt=0.02,
                            measured=(0,))
    x, w = torch.tensor([[0.7, -1.3, -0.4]]), torch.tensor([[0.01, -0.02, 0.003]])
    expected = model.step(x, x.new_zeros(1, 0), w).detach().numpy()
    got = CasadiDynamics(model, tmp_path).step(x.numpy().T, np.zeros((0, 1)), w.numpy().T,
                                               CasadiDynamics.parameter_values(model))
    np.testing.assert_allclose(np.asarray(got).T, expected, rtol=1e-14, atol=1e-15)


@pytest.fixture(scope="module")
def pendulum():
    """Case A's pendulum (true damping 0.4 1/s) at 1 % noise for 10 s, theta measured, damping started at 0.1."""
    return pendulum_problem(SinglePendulum(), "A", noise=0.01, seed=0, duration=10.0)


def test_moves_the_damping_from_the_start_to_the_truth(pendulum, tmp_path):
    assert pendulum.truth == {"c": 0.4} and float(pendulum.physics.params()["c"].detach()) == pytest.approx(0.1)
    res = JointMHE(pendulum, JointSettings(parameter_std=0.1, stride=25), tmp_path).run()
    assert res.failed == 0 and len(res.history) == res.windows > 10
    assert abs(res.values["c"] - 0.4) < 0.03  # from 0.3 off
    assert [h["start"] for h in res.history] == sorted(h["start"] for h in res.history)
    assert res.values["c"] == res.history[-1]["c"] and res.wall_s > 0


def test_passes_slide_again_from_the_last_estimate(pendulum, tmp_path):
    # a tight parameter prior: c climbs slowly from 0.1, and the second pass goes on from the first's end
    res = JointMHE(pendulum, JointSettings(parameter_std=0.01, stride=25, passes=2, windows=4), tmp_path).run()
    assert res.windows == 8 and [h["pass"] for h in res.history] == [0] * 4 + [1] * 4
    c = [h["c"] for h in res.history]
    assert c == sorted(c) and 0.1 < c[0] and c[-1] < 0.4


def test_failed_solves_are_counted_and_skipped(pendulum, tmp_path):
    stuck = pendulum.replace(mhe=dataclasses.replace(pendulum.mhe, max_iter=1))
    res = JointMHE(stuck, JointSettings(stride=25, windows=3), tmp_path).run()
    assert res.windows == 3 and res.failed == 3 and res.history == []
    assert res.values["c"] == pytest.approx(0.1)  # nothing solved: the start


def test_bad_input_is_a_clear_error(pendulum):
    with pytest.raises(ValueError, match="physics-only problem"):
        JointMHE(pendulum.replace(residual=ResidualSettings(4), physics=None, n_x=2))
    with pytest.raises(ValueError, match="stride must not exceed the horizon 50"):
        JointMHE(pendulum, JointSettings(stride=51))
    with pytest.raises(ValueError, match="identifies none"):
        JointMHE(pendulum.replace(physics=PendulumPhysics(9.81, 0.4)))
    with pytest.raises(ValueError, match="passes >= 1"):
        JointSettings(passes=0)
    with pytest.raises(ValueError, match="parameter_std > 0"):
        JointSettings(parameter_std=0.0)

"""Discretizations: Euler, RK4 and single-step RKF45 tableaus, torch vs CasADi, and the BayesRace files."""
import math

import numpy as np
import pytest
import torch

from mhe import SingleTrackVehicle, StateSpaceModel
from mhe.data.logs import BayesRaceRecording
from mhe.models.casadi_model import CasadiDynamics
from mhe.models.discretization import EULER, RK4, RKF45, TABLEAUS, ButcherTableau, tableau
from tests.mhe.datasets import bayesrace_file
from torch_ude.rk4 import rk4_step

STATES = torch.tensor([[1.5, 0.1, 0.8], [2.2, -0.2, -1.5], [0.9, 0.05, 3.0]], dtype=torch.float64)
INPUTS = torch.tensor([[0.2, 0.6], [-0.3, 0.9], [0.1, -0.4]], dtype=torch.float64)


@pytest.mark.parametrize("tab, order", [(EULER, 1), (RK4, 4), (RKF45, 5)])
def test_each_tableau_has_its_order(tab, order):
    # x' = x on [0, 1] in n steps: the global error falls as n^-order
    errors = []
    for n in (8, 16):
        x = torch.ones(1, 1, dtype=torch.float64)
        for _ in range(n):
            x = tab.step(lambda s: s, x, 1.0 / n)
        errors.append(abs(float(x) - math.e))
    assert math.log2(errors[0] / errors[1]) == pytest.approx(order, abs=0.15)
    assert sum(tab.b) / tab.scale == pytest.approx(1.0, abs=1e-15)


def test_rk4_is_bitwise_the_earlier_rk4_step():
    model = StateSpaceModel(SingleTrackVehicle(), measured=(0, 2))
    w = 0.01 * torch.ones_like(STATES)
    old = rk4_step(lambda s: model.field(s, INPUTS, w), STATES, model.dt)
    assert torch.equal(model.step(STATES, INPUTS, w), old)


@pytest.mark.parametrize("name", sorted(TABLEAUS))
def test_casadi_step_and_stages_match_torch(name, tmp_path):
    model = StateSpaceModel(SingleTrackVehicle(abs_vx=True), measured=(0, 2), discretization=name)
    dyn = CasadiDynamics(model, tmp_path)
    p = CasadiDynamics.parameter_values(model)
    w = torch.tensor([0.01, -0.02, 0.3], dtype=torch.float64)
    for x, u in zip(STATES, INPUTS):
        want = model.step(x[None], u[None], w[None])[0].detach().numpy()
        got = np.asarray(dyn.step(x.numpy(), u.numpy(), w.numpy(), p)).ravel()
        ks = np.asarray(dyn.stages(x.numpy(), u.numpy(), w.numpy(), p))
        assert ks.shape == (3, TABLEAUS[name].stages)
        lifted = TABLEAUS[name].combine(x.numpy(), list(ks.T), model.dt)
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-14)
        np.testing.assert_allclose(lifted, want, rtol=1e-14, atol=1e-14)


def test_abs_vx_mirrors_the_slip_angles_and_is_equal_for_forward_speed(tmp_path):
    smooth, bayes = SingleTrackVehicle(), SingleTrackVehicle(abs_vx=True)
    assert torch.equal(smooth(STATES, INPUTS), bayes(STATES, INPUTS))
    back = STATES * torch.tensor([-1.0, 1.0, 1.0], dtype=torch.float64)
    assert not torch.allclose(smooth(back, INPUTS), bayes(back, INPUTS))
    model = StateSpaceModel(bayes, measured=(0, 2), discretization="euler")
    dyn = CasadiDynamics(model, tmp_path)
    got = np.asarray(dyn.step(back[0].numpy(), INPUTS[0].numpy(), np.zeros(3),
                              CasadiDynamics.parameter_values(model))).ravel()
    with torch.no_grad():
        want = model.step(back[:1], INPUTS[:1], torch.zeros(1, 3, dtype=torch.float64))[0].numpy()
    np.testing.assert_allclose(got, want, rtol=1e-14)


def test_unknown_discretization_and_malformed_tableau_are_errors():
    with pytest.raises(ValueError, match=r"discretization must be one of \['euler', 'rk4', 'rkf45'\]; got 'rk5'"):
        tableau("rk5")
    with pytest.raises(ValueError, match="discretization must be one of"):
        StateSpaceModel(SingleTrackVehicle(), measured=(0, 2), discretization="midpoint")
    with pytest.raises(ValueError, match="row j with j entries"):
        ButcherTableau("bad", ((), ()), (0.5, 0.5))


@pytest.mark.parametrize("name", ["DYN-PP-ETHZ", "DYN-PP-ETHZMobil"])
@pytest.mark.parametrize("key, method", [("dstates", "euler"), ("states", "rkf45")])
def test_ground_truth_reproduces_the_bayesrace_transitions(name, key, method):
    # dstates[3:6] is an explicit-Euler trajectory and states[3:6] one RKF45 step per sample, both at
    # dt = 0.02 s with inputs[:, k] driving k -> k+1 and |vx| inside atan2 (BayesRace's model)
    rec = BayesRaceRecording(str(bayesrace_file(name)), key).record()
    x, u = rec.states, rec.inputs[:-1]
    model = StateSpaceModel(SingleTrackVehicle(abs_vx=True), dt=rec.dt, measured=(0, 2), discretization=method)
    with torch.no_grad():
        pred = model.step(x[:-1], u, torch.zeros_like(x[:-1]))
        worse = StateSpaceModel(model.physics, dt=rec.dt, measured=(0, 2), discretization="rk4").step(
            x[:-1], u, torch.zeros_like(x[:-1]))
    assert float((pred - x[1:]).abs().max()) <= 1e-12
    assert float((worse - x[1:]).abs().max()) > 1e-3  # the test can tell discretizations apart

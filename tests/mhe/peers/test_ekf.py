"""The extended Kalman filter: CasADi Jacobians against torch, and the hidden vy of a simulated car."""
from dataclasses import replace

import numpy as np
import pytest
import torch

from mhe import SingleTrackVehicle, StateSpaceModel
from mhe.data.recording import held_inputs
from mhe.models.hold import input_hold
from mhe.peers.ekf import EKFSettings, ExtendedKalmanFilter
from mhe.problems.racing import MEASURED, RacingSimulation, perturbed_values

Q, R = (0.005, 0.005, 0.1), (0.0005, 0.002)


def settings(q=Q, r=R):
    return EKFSettings(q, r, (1.5, 0.0, 0.0), (0.5, 0.3, 1.0))


@pytest.fixture(scope="module")
def recording():
    return RacingSimulation(steps=600, process_std=Q, measurement_std=R, seed=3).record()


@pytest.mark.parametrize("hold", ["zoh", "foh"])
def test_jacobians_are_torch_jacobians(hold, tmp_path):
    model = StateSpaceModel(SingleTrackVehicle(), measured=MEASURED, hold=hold)
    ekf = ExtendedKalmanFilter(model, settings(), tmp_path)
    x, u = torch.tensor([1.7, 0.08, 1.2]), torch.tensor([0.15, 0.4, 0.25, 0.1])[:model.n_u_step]
    nxt, a, g = (v.full() for v in ekf._predict(x.numpy(), u.numpy(), ekf.p))
    w = torch.zeros(3)
    step = lambda xx, ww: model.step(xx[None], u[None], ww[None])[0]  # noqa: E731
    jx, jw = torch.func.jacrev(step, argnums=(0, 1))(x, w)
    np.testing.assert_allclose(nxt[:, 0], step(x, w).detach().numpy(), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(a, jx.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(g, jw.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_tracks_the_hidden_lateral_velocity_with_the_true_model(recording, tmp_path):
    model = StateSpaceModel(SingleTrackVehicle(), measured=MEASURED)
    res = ExtendedKalmanFilter(model, settings(), tmp_path).run(recording)
    vy, est = recording.states[:, 1].numpy(), res.states[:, 1]
    rmse = np.sqrt(((est - vy)[50:] ** 2).mean())
    assert rmse < 0.01 * np.sqrt((vy[50:] ** 2).mean())
    # the filter's own 2-sigma band holds the truth most of the time
    inside = np.abs(est - vy)[50:] < 2 * np.sqrt(res.covariances[50:, 1, 1])
    assert inside.mean() > 0.85
    assert res.states.shape == (600, 3) and res.innovations.shape == (600, 2)


def test_a_wrong_model_tracks_vy_worse(recording, tmp_path):
    def rmse(values):
        model = StateSpaceModel(SingleTrackVehicle(values), measured=MEASURED)
        res = ExtendedKalmanFilter(model, settings(), tmp_path).run(recording)
        return np.sqrt(((res.states[50:, 1] - recording.states[50:, 1].numpy()) ** 2).mean())

    assert rmse(perturbed_values(0.5, seed=0)) > 10 * rmse(None)


def test_bad_settings_are_errors(tmp_path):
    model = StateSpaceModel(SingleTrackVehicle(), measured=MEASURED)
    with pytest.raises(ValueError, match="must be positive"):
        EKFSettings((0.1, 0.0, 0.1), R, (1.5, 0, 0), (1, 1, 1))
    with pytest.raises(ValueError, match="measurement_std needs 2 numbers"):
        ExtendedKalmanFilter(model, settings(r=(0.1,)), tmp_path)


def test_a_paired_hold_filters_its_step_inputs_and_refuses_plain_ones(recording, tmp_path):
    model = StateSpaceModel(SingleTrackVehicle(), measured=MEASURED, hold="foh")
    ekf = ExtendedKalmanFilter(model, settings(), tmp_path)
    with pytest.raises(ValueError, match=r"2 input columns; the model needs .* and 4 \(its foh hold's step inputs"):
        ekf.run(recording)
    # the simulated car holds its inputs: pairs [u_k, u_k] are the zero-order hold's filter, true pairs another one
    zoh = ExtendedKalmanFilter(StateSpaceModel(SingleTrackVehicle(), measured=MEASURED), settings(), tmp_path)
    want = zoh.run(recording).states
    held = ekf.run(replace(recording, inputs=recording.inputs.repeat(1, 2))).states
    np.testing.assert_allclose(held, want, rtol=0.0, atol=1e-12)
    assert np.abs(ekf.run(held_inputs(recording, input_hold("foh"))).states - want).max() > 1e-3

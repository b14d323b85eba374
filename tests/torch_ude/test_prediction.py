"""Prediction errors without ground truth: RK4 with interpolated inputs, one-step and open-loop scores."""
import numpy as np
import pytest
import torch

from torch_ude.field import HybridField
from torch_ude.prediction import full_simulation, prediction_and_simulation, prediction_errors, rk4_input_rollout
from torch_ude.recorded import RecordedLog
from torch_ude.systems.controlled import TorquePendulumModel
from torch_ude.systems.linear_axis import LinearAxisModel
from tests.torch_ude.helpers import forced_pendulum_log


def test_rk4_with_a_linear_input_is_exact_for_an_integrator():
    # x' = u with u linear in time over each step: RK4's stage inputs integrate it exactly
    u = torch.tensor([0.0, 1.0, 3.0, 2.0]).reshape(4, 1, 1)
    traj = rk4_input_rollout(lambda x, uu: uu, torch.zeros(1, 1), u, 0.1)
    assert torch.allclose(traj[:, 0, 0], torch.tensor([0.0, 0.05, 0.25, 0.5]), rtol=0, atol=1e-15)


def _log(damping):
    data = forced_pendulum_log(duration=6.0, fs=500.0, noise=0.0, jitter=0.0, damping=damping, seed=3)
    table = np.stack([data[c] for c in ("position", "velocity", "torque")], axis=1)
    return RecordedLog(fs=500.0, names=("position", "velocity", "torque"), n_states=2, segments=[table], starts=[0.0])


def _known_alone():
    field = HybridField(TorquePendulumModel())
    with torch.no_grad():
        for p in field.parameters_list():
            p.zero_()
    return field


def test_the_true_model_predicts_its_own_log_and_a_missing_friction_shows():
    exact = prediction_errors(_known_alone(), [_log(0.0)], (1.0, 5.0))
    assert exact["one_step_nrmse"] < 1e-6 and exact["open_loop_5s_nrmse"] < 1e-3
    assert exact["open_loop_windows_1s"] == 5 and exact["open_loop_windows_5s"] == 1
    missing = prediction_errors(_known_alone(), [_log(0.05)], (1.0, 5.0))
    assert missing["open_loop_1s_nrmse"] > 100 * exact["open_loop_1s_nrmse"]
    assert missing["open_loop_nrmse"] == missing["open_loop_5s_nrmse"] > missing["open_loop_1s_nrmse"]
    assert len(missing["open_loop_1s_rms"]) == 2


def test_a_horizon_longer_than_every_segment_is_skipped():
    out = prediction_errors(_known_alone(), [_log(0.0)], (10.0,))
    assert out["open_loop_10s_nrmse"] is None and out["open_loop_windows_10s"] == 0 and out["open_loop_nrmse"] is None


def test_the_full_simulation_of_the_model_that_made_a_record_is_exact_and_a_wrong_one_is_not():
    truth = LinearAxisModel(mass=2.0, gain=1.0, viscous=3.0, coulomb=0.5, coulomb_velocity=0.05, offset=0.1)
    fs, steps = 1000.0, 3000
    t = torch.arange(steps + 1, dtype=torch.float64) / fs
    u = (2.0 * torch.sin(3.0 * t) + 0.1).unsqueeze(1)
    x = rk4_input_rollout(truth, torch.tensor([[0.0, 0.0]]), u.unsqueeze(1), 1.0 / fs)[:, 0]
    log = RecordedLog(fs=fs, names=("q", "q_dot", "u"), n_states=2,
                      segments=[torch.cat((x, u), dim=1).numpy()], starts=[0.0])
    exact = full_simulation(HybridField.configured_physics(truth), log)
    assert exact["rms_q_m"] < 1e-12 and exact["r2_q"] == pytest.approx(1.0, abs=1e-12)
    wrong = full_simulation(HybridField.configured_physics(LinearAxisModel(mass=2.0, gain=1.0)), log)
    q = log.segments[0][:, 0]
    err = wrong["series"]["simulated"] - q
    assert wrong["rms_q_mm"] == pytest.approx(1e3 * np.sqrt(np.mean(err**2)))
    assert wrong["r2_q"] == pytest.approx(1 - np.sum(err**2) / np.sum((q - q.mean())**2)) and wrong["r2_q"] < 0.9


def test_prediction_and_simulation_joins_both_scores():
    truth = LinearAxisModel(mass=2.0, gain=1.0, viscous=3.0)
    t = torch.arange(2001, dtype=torch.float64) / 1000.0
    u = torch.sin(3.0 * t).unsqueeze(1)
    x = rk4_input_rollout(truth, torch.tensor([[0.0, 0.0]]), u.unsqueeze(1), 1e-3)[:, 0]
    log = RecordedLog(fs=1000.0, names=("q", "q_dot", "u"), n_states=2,
                      segments=[torch.cat((x, u), dim=1).numpy()], starts=[0.0])
    field = HybridField.configured_physics(LinearAxisModel(mass=2.0, gain=1.0))
    out = prediction_and_simulation(field, [log], (1.0,))
    sim = full_simulation(field, log)
    assert out["open_loop_1s_nrmse"] == prediction_errors(field, [log], (1.0,))["open_loop_1s_nrmse"]
    assert out["simulation_rms_q_mm"] == sim["rms_q_mm"] and out["simulation_r2_q"] == sim["r2_q"]
    assert (out["series"]["simulated"] == sim["series"]["simulated"]).all()

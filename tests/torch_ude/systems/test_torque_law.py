"""A controlled plant under a torque law: the RK4 simulation and the swing-up law."""
import math

import numpy as np
import torch

from torch_ude.prediction import rk4_input_rollout
from torch_ude.systems import TorqueDoublePendulumModel, simulate_torque_law, swing_up_torques


def test_a_constant_torque_is_the_rk4_rollout_with_that_input():
    model = TorqueDoublePendulumModel()
    x0 = np.array([0.3, -0.2, 0.5, 0.0])
    states, torques = simulate_torque_law(model, x0, lambda t, x: np.array([0.2, -0.1]), 0.5, 1e-3)
    assert states.shape == (500, 4) and torques.shape == (500, 2)
    assert np.array_equal(states[0], x0) and np.all(torques == [0.2, -0.1])
    inputs = torch.tensor([0.2, -0.1], dtype=torch.float64).expand(500, 1, 2)
    with torch.no_grad():
        ref = rk4_input_rollout(model, torch.as_tensor(x0).reshape(1, 4), inputs, 1e-3)[:, 0]
    assert np.allclose(states, ref.numpy(), atol=1e-13)


def test_the_law_reads_the_time_and_state_at_the_start_of_each_step_and_is_held():
    seen = []

    def law(t, x):
        seen.append((t, x.copy()))
        return np.array([math.sin(t), 0.0])
    states, torques = simulate_torque_law(TorqueDoublePendulumModel(), np.zeros(4), law, 0.01, 1e-3)
    assert [t for t, _ in seen] == [k * 1e-3 for k in range(10)]
    assert all(np.array_equal(x, s) for (_, x), s in zip(seen, states))
    assert np.allclose(torques[:, 0], np.sin(np.arange(10) * 1e-3), rtol=0, atol=0)


def test_swing_up_torques_ramp_in_pump_below_the_speed_brake_above_and_clip():
    law = swing_up_torques((1.0, 0.5), (12.0, 20.0), limit=5.0)
    assert np.array_equal(law(0.0, np.array([0.0, 0.0, 3.0, 3.0])), [0.0, 0.0])  # the ramp starts at zero
    t = 2.0 * math.pi  # past the ramp, sin(3 t) = sin(5 t) = 0 up to rounding
    pump, brake = law(t, np.array([0.0, 0.0, 6.0, 10.0])), law(t, np.array([0.0, 0.0, 13.0, 21.0]))
    assert np.allclose(pump, [6.0 * 0.75, 0.5 * 10.0 * 0.75], atol=1e-12) and np.all(brake < 0)
    assert np.array_equal(law(t, np.array([0.0, 0.0, 40.0, -60.0])), [-5.0, 5.0])

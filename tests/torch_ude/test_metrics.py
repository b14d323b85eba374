"""Metrics: field error, damping regression, rollouts, evaluation sets and the noise estimate's error."""
import pytest
import torch

from torch_ude import DoublePendulum, HybridField, SinglePendulum
from torch_ude.metrics import (damping_estimate, evaluate_field, evaluation_states, field_error,
                               noise_estimate_errors, residual_forces, residual_torques, rollout_error)
from torch_ude.recorded import RecordedLog
from torch_ude.systems.controlled import TorquePendulumModel
from torch_ude.systems.linear_axis import LinearAxisModel


def test_field_error_of_the_true_field_is_zero_and_scales_linearly():
    p = SinglePendulum()
    f = p.true_field()
    grid = p.evaluation_grid()
    assert field_error(f, f, grid) == 0.0
    assert field_error(lambda x: 1.01 * f(x), f, grid) == pytest.approx(0.01, rel=1e-12)


def test_damping_regression_recovers_a_linear_residual():
    p = SinglePendulum()
    known = p.known_field("C")  # g_model = 0.9 g, no damping
    x = evaluation_states(p)["visited"]
    # the true field minus the Case C model is 0.1 g sin(theta) - 0.4 omega: the sin term is
    # orthogonal to omega on the symmetric visited set, so the slope is exactly the damping
    assert damping_estimate(p.true_field(), known, x, p.damping_terms("C")) == [pytest.approx(0.4, abs=1e-12)]


def test_evaluate_field_of_an_untrained_case_b_model():
    p = SinglePendulum()
    field = HybridField(p.known_field("B"), last_layer_gain=0.0)  # N = 0: exactly f_known
    out = evaluate_field(field, p, "B", evaluation_states(p))
    assert out["c_hat"] == pytest.approx(0.0, abs=1e-12)
    # a 10 % gravity error in the omega channel only: about 9 % relative field error
    assert 0.05 < out["e_field"] < 0.1 and 0.05 < out["e_field_visited"] < 0.1
    assert out["e_field"] != out["e_field_visited"]
    assert set(out) == {"e_field", "e_field_visited", "c_hat", "c_hat_channels"}


def test_double_pendulum_is_evaluated_on_visited_states():
    p = DoublePendulum()
    states = evaluation_states(p, duration=2.0, seed=0)
    assert states["visited"].shape == (200, 4)
    c = damping_estimate(p.true_field(), p.known_field("A"), states["visited"], p.damping_terms("A"))
    assert c == [pytest.approx(0.15, abs=1e-12), pytest.approx(0.15, abs=1e-12)]


def test_rollout_error():
    p = SinglePendulum()
    x0 = torch.tensor([[1.2, 0.0], [0.5, 1.0]])
    assert rollout_error(p.true_field(), p.true_field(), x0, horizon=2.0) == 0.0
    assert rollout_error(p.known_field("A"), p.true_field(), x0, horizon=8.0) > 0.1
    with pytest.raises(ValueError, match="NaN or Inf"):
        rollout_error(p.true_field(), p.true_field(), torch.tensor([[float("nan"), 0.0]]))
    with pytest.raises(ValueError, match="shape"):
        field_error(p.true_field(), p.true_field(), torch.zeros(5, 3))


def test_residual_torques_of_a_field_that_is_the_reference_equal_the_references():
    known = TorquePendulumModel()
    reference = TorquePendulumModel(viscous=0.05, offset=0.02)
    field = HybridField.configured_physics(TorquePendulumModel(viscous=0.05, offset=0.02))  # learned = the reference
    gen = torch.Generator().manual_seed(1)
    segment = torch.randn(50, 3, generator=gen, dtype=torch.float64).numpy()  # q, qdot, tau
    log = RecordedLog(fs=100.0, names=("q", "q_dot", "tau"), n_states=2, segments=[segment], starts=[0.0])
    out = residual_torques(field, reference, known, [log])
    torque = -(0.05 * segment[:, 1] + 0.02)  # M (f_ref - f_known) = -(Fv q' + offset), N m
    assert out["rms_reference"] == pytest.approx([float((torque**2).mean() ** 0.5)], rel=1e-12)
    assert out["rms_residual"] == pytest.approx(out["rms_reference"], rel=1e-12) and out["rms_difference"][0] < 1e-12
    assert out["series"]["residual"].shape == (50, 1) and "rms_reference_friction" not in out


def test_residual_forces_are_the_residual_torques_times_the_gain_in_newton():
    known = LinearAxisModel(mass=2.0, gain=4.0)
    reference = LinearAxisModel(mass=2.0, gain=4.0, viscous=3.0, offset=0.5)
    field = HybridField.configured_physics(LinearAxisModel(mass=2.0, gain=4.0, viscous=1.0))
    gen = torch.Generator().manual_seed(2)
    segment = torch.randn(40, 3, generator=gen, dtype=torch.float64).numpy()  # q, q', vir
    log = RecordedLog(fs=1000.0, names=("q", "q_dot", "vir"), n_states=2, segments=[segment], starts=[0.0])
    out = residual_forces(field, reference, known, [log])
    force = -(3.0 * segment[:, 1] + 0.5)  # M (f_ref - f_known) = -(Fv q' + offset), N
    assert out["rms_reference"] == pytest.approx([float((force**2).mean() ** 0.5)], rel=1e-12)
    assert out["series"]["residual"][:, 0].numpy() == pytest.approx(-1.0 * segment[:, 1], rel=1e-12)
    torques = residual_torques(field, reference, known, [log])
    assert out["rms_difference"] == pytest.approx([4.0 * v for v in torques["rms_difference"]], rel=1e-12)


def test_noise_estimate_errors_are_small_per_channel_and_shrink_with_the_record():
    short = noise_estimate_errors(SinglePendulum(), 0.01, 0, 3.0, 20.0)
    long = noise_estimate_errors(SinglePendulum(), 0.01, 0, 20.0, 20.0)
    assert len(short) == len(long) == 2
    assert max(abs(e) for e in short) < 0.06 and max(abs(e) for e in long) < 0.02

"""Bounded arrival cost: the data-derived box, bounds respected for any raw value, chain rule, bad input."""
import pytest
import torch
import torch.nn.functional as tf

from mhe import Bound, MHESettings, MovingHorizonEstimator, residual_jacobian
from mhe.estimator.arrival import arrival_bounds
from tests.mhe.helpers import (ARRIVAL_MEAN, ARRIVAL_STD, MEASUREMENT_STD, PROCESS_STD, estimator, ipopt_kkt_point,
                               vehicle_windows)


def _bounded(est, windows, hidden=((1, (-1.0, 1.0)),), **options):
    mean_b, std_b = arrival_bounds(windows, est.model, dict(hidden), **options)
    return MovingHorizonEstimator(est.model, est.settings, ARRIVAL_MEAN, ARRIVAL_STD, mean_b, std_b), mean_b, std_b


def test_box_comes_from_the_measured_outputs_and_the_hidden_box():
    est, windows = estimator("physics", 6), vehicle_windows(6, 4)
    _, mean_b, std_b = _bounded(est, windows, margin=0.1, std_range=(0.05, 10.0))
    y = windows.y.reshape(-1, 2)
    for row, j in enumerate((0, 2)):
        lo, hi = float(y[:, row].min()), float(y[:, row].max())
        assert (mean_b[j].lower, mean_b[j].upper) == pytest.approx((lo - 0.1 * (hi - lo), hi + 0.1 * (hi - lo)))
    assert (mean_b[1].lower, mean_b[1].upper) == pytest.approx((-1.2, 1.2))
    for m, s in zip(mean_b, std_b):
        width = m.upper - m.lower
        assert s.log and (s.lower, s.upper) == pytest.approx((0.05 * width, 10.0 * width))


def test_arrival_cost_stays_inside_its_bounds_for_any_raw_value():
    est, windows = estimator("physics", 6), vehicle_windows(6, 4)
    bounded, mean_b, std_b = _bounded(est, windows)
    assert torch.allclose(bounded.arrival_mean, torch.tensor(ARRIVAL_MEAN, dtype=torch.float64), atol=1e-14)
    assert torch.allclose(bounded.arrival_std(), torch.tensor(ARRIVAL_STD, dtype=torch.float64), rtol=1e-13)
    for raw in (-1e4, -30.0, 30.0, 1e4):
        with torch.no_grad():
            bounded.arrival_mean_raw.fill_(raw)
            bounded.arrival_std_raw.fill_(raw)
        for value, bounds in ((bounded.arrival_mean.detach(), mean_b), (bounded.arrival_std().detach(), std_b)):
            slack = [1e-12 * max(abs(b.lower), abs(b.upper)) for b in bounds]  # rounding at saturation
            assert all(b.lower - e <= float(v) <= b.upper + e for v, b, e in zip(value, bounds, slack))
        assert bool(torch.isfinite(bounded.arrival_precision()).all())


def test_unbounded_default_keeps_the_plain_and_softplus_parameterization():
    est = estimator("physics", 6)
    assert torch.equal(est.arrival_mean, est.arrival_mean_raw.detach())
    assert torch.equal(est.arrival_std(), tf.softplus(est.arrival_std_raw.detach()))
    assert [n for n, _ in est.named_parameters()] == ["arrival_mean_raw", "arrival_std_raw", "model.physics.params.raw"]


def test_residual_jacobian_applies_the_chain_rule_of_the_bounds(tmp_path):
    """Same values, same KKT point: the bounded columns are the unbounded ones times d value / d raw."""
    est, windows = estimator("physics", 6), vehicle_windows(6, 3)
    bounded, mean_b, std_b = _bounded(est, windows)
    z = ipopt_kkt_point(est, windows, tmp_path)
    plain, scaled = residual_jacobian(est, z, windows).jacobian, residual_jacobian(bounded, z, windows).jacobian
    n = len(ARRIVAL_MEAN)
    slope = torch.func.jacfwd(lambda r: torch.stack([b.from_raw(v) for b, v in zip(mean_b + std_b, r.unbind(0))]))(
        torch.cat([bounded.arrival_mean_raw, bounded.arrival_std_raw]).detach()).diagonal()
    soft = torch.sigmoid(est.arrival_std_raw.detach())  # d softplus / d raw of the unbounded sigma
    expected = plain[..., :2 * n] / torch.cat([torch.ones(n, dtype=torch.float64), soft]) * slope  # alpha starts
    assert torch.allclose(scaled[..., 2 * n:], plain[..., 2 * n:], rtol=1e-12, atol=1e-14)     # with s_bar, sigma
    assert torch.allclose(scaled[..., :2 * n], expected, rtol=1e-9, atol=1e-12 * float(expected.abs().max()))


def test_bad_boxes_and_start_values_are_rejected():
    est, windows = estimator("physics", 6), vehicle_windows(6, 2)
    with pytest.raises(ValueError, match="states \\[1\\] have none"):
        arrival_bounds(windows, est.model, {})
    with pytest.raises(ValueError, match="lo < hi"):
        arrival_bounds(windows, est.model, {1: (1.0, -1.0)})
    with pytest.raises(ValueError, match="std_range"):
        arrival_bounds(windows, est.model, {1: (-1.0, 1.0)}, std_range=(1.0, 0.5))
    mean_b, std_b = arrival_bounds(windows, est.model, {0: (1.0, 2.0), 1: (-1.0, 1.0), 2: (-5.0, 5.0)})
    settings = MHESettings(6, PROCESS_STD, MEASUREMENT_STD)
    with pytest.raises(ValueError, match="arrival_mean start values \\[5.0\\]"):
        MovingHorizonEstimator(est.model, settings, (1.5, 5.0, 0.0), ARRIVAL_STD, mean_b, std_b)
    with pytest.raises(ValueError, match="lower bound >= 0"):
        MovingHorizonEstimator(est.model, settings, ARRIVAL_MEAN, ARRIVAL_STD, None, (Bound(),) * 3)

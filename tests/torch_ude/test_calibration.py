"""Calibration: noise estimate, scales, adaptive m, SNR gate, invalid samples."""
import numpy as np
import pytest
import torch

from torch_ude import HybridField, SinglePendulum, simulate
from torch_ude.calibration import calibrate, noise_adaptive_weight_decay


@pytest.fixture(scope="module")
def record():
    rec = simulate(SinglePendulum(), 4.0, noise=0.01, seed=0)
    return torch.as_tensor(rec.y[:3000]), torch.as_tensor(rec.segment[:3000]), rec


def test_noise_estimate_and_scales(record):
    y, seg, rec = record
    cal = calibrate(y, 1000.0, seg)
    assert np.allclose(cal.sigma.numpy(), rec.sigma, rtol=0.05)
    half = 5 * cal.m  # the scales are measured at window centres
    clean = torch.as_tensor(rec.x[half : 3000 - half])
    assert torch.allclose(cal.x_rms, torch.sqrt((clean**2).mean(0)), rtol=0.03)
    true_xdot = SinglePendulum().true_field()(clean)
    assert torch.allclose(cal.s1, torch.sqrt((true_xdot**2).mean(0)), rtol=0.03)
    assert 20 <= cal.m <= 45 and cal.dt_eff == cal.m / 1000.0
    assert cal.lambda2 == 0.0 and cal.snr2 < 12.0  # 1 % noise: second order gated off


def test_gate_opens_at_low_noise_and_can_be_disabled():
    rec = simulate(SinglePendulum(), 4.0, noise=0.0005, seed=0)
    y, seg = torch.as_tensor(rec.y[:3000]), torch.as_tensor(rec.segment[:3000])
    assert calibrate(y, 1000.0, seg).lambda2 == 0.1
    noisy = simulate(SinglePendulum(), 4.0, noise=0.02, seed=0)
    y2 = torch.as_tensor(noisy.y[:3000])
    assert calibrate(y2, 1000.0, lambda2_0=0.3, gate_lambda2=False).lambda2 == 0.3


def test_fixed_m_and_more_noise_means_longer_windows(record):
    y, seg, _ = record
    assert calibrate(y, 1000.0, seg, m=17).m == 17
    low = calibrate(torch.as_tensor(simulate(SinglePendulum(), 4.0, noise=0.002, seed=0).y[:3000]), 1000.0)
    high = calibrate(torch.as_tensor(simulate(SinglePendulum(), 4.0, noise=0.05, seed=0).y[:3000]), 1000.0)
    assert low.m < high.m


def test_nan_samples_and_segment_changes_are_skipped(record):
    y, seg, _ = record
    bad = y.clone()
    bad[100:103, 0] = float("nan")
    bad[2000, 1] = float("inf")
    clean = calibrate(y, 1000.0, seg)
    dirty = calibrate(bad, 1000.0, seg)
    assert torch.isfinite(dirty.sigma).all() and dirty.m == clean.m
    assert torch.allclose(dirty.sigma, clean.sigma, rtol=0.02)


def test_bad_calibration_inputs():
    with pytest.raises(ValueError, match="fs must be positive"):
        calibrate(torch.zeros(100, 2), 0.0)
    with pytest.raises(ValueError, match="no complete SG window|no 11 consecutive"):
        calibrate(torch.randn(50, 2), 1000.0)
    with pytest.raises(ValueError, match="m must be an integer"):
        calibrate(torch.randn(5000, 2), 1000.0, m=0)


def test_from_seed_gives_identical_initial_weights():
    known = SinglePendulum().known_field("A")
    a, b, c = HybridField.from_seed(known, 7), HybridField.from_seed(known, 7), HybridField.from_seed(known, 8)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not torch.equal(a.mlp.weight0, c.mlp.weight0)


def test_the_fastest_channel_sets_the_time_scale():
    from torch_ude import DoublePendulum

    rec = simulate(DoublePendulum(), 4.0, noise=0.01, seed=0)
    cal = calibrate(torch.as_tensor(rec.y[:3000]), 1000.0, torch.as_tensor(rec.segment[:3000]))
    ratios = cal.s2 / cal.s1
    assert cal.omega_c == pytest.approx(float(ratios.max()))
    # the velocity channels are about three times faster than the angles: a short window
    assert float(ratios[2:].min()) > 2.0 * float(ratios[:2].max()) and cal.m <= 12


def test_weight_decay_falls_with_the_squared_noise_below_full_and_is_constant_above():
    assert noise_adaptive_weight_decay(0.02, 1.0, 0.01) == 1.0
    assert noise_adaptive_weight_decay(0.01, 1.0, 0.01) == 1.0
    assert noise_adaptive_weight_decay(0.001, 1.0, 0.01) == pytest.approx(0.01)
    assert noise_adaptive_weight_decay(0.0, 1.0, 0.01) == 0.0
    assert noise_adaptive_weight_decay(0.0, 0.3, None) == 0.3
    for bad in ((float("nan"), 1.0, 0.01), (0.01, -1.0, 0.01), (0.01, 1.0, 0.0), (-0.1, 1.0, 0.01)):
        with pytest.raises(ValueError):
            noise_adaptive_weight_decay(*bad)

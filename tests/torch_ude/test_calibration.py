"""Calibration: noise estimate, scales, adaptive m, SNR gate, invalid samples."""
import numpy as np
import pytest
import torch

from torch_ude import HybridField, SinglePendulum, simulate
from torch_ude.calibration import calibrate, noise_adaptive_weight_decay, screen_outliers


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


def _spiky(plant, noise, seed, spike_rate):
    from torch_ude.systems import SensorFaults

    rec = simulate(plant, 3.0, noise=noise, seed=seed)
    faults = SensorFaults(spike_rate=spike_rate, spike_scale=100.0, seed=seed)
    y, _, seg = faults.apply(rec, np.arange(len(rec)))
    return torch.as_tensor(y), torch.as_tensor(seg), rec.sigma


@pytest.mark.parametrize("plant", ["single", "double"])
def test_noise_estimate_is_unbiased_with_and_without_spikes(plant):
    from torch_ude import DoublePendulum

    system = SinglePendulum() if plant == "single" else DoublePendulum()
    for spike_rate in (0.0, 0.05):
        ratios, plain = [], []
        for seed in range(3):
            y, seg, sigma = _spiky(system, 0.01, seed, spike_rate)
            ratios.append(calibrate(y, 1000.0, seg).sigma.numpy() / sigma)
            plain.append(calibrate(y, 1000.0, seg, outlier_threshold=None).sigma.numpy() / sigma)
        bias = np.mean(ratios, axis=0) - 1.0
        assert np.all(np.abs(bias) < 0.04), (spike_rate, bias)
        if spike_rate:  # the paper's plain Eq. (23), a mean of squares, is ruined by the spikes
            assert np.all(np.mean(plain, axis=0) > 5.0)
        else:  # and without spikes the screen changes nothing
            assert np.allclose(ratios, plain)


def test_spikes_do_not_inflate_the_scales_or_shorten_m(record):
    y, seg, _ = record
    spiky, seg2, _ = _spiky(SinglePendulum(), 0.01, 0, 0.05)
    clean, dirty = calibrate(y, 1000.0, seg), calibrate(spiky, 1000.0, seg2)
    assert torch.allclose(dirty.s2, clean.s2, rtol=0.05) and abs(dirty.m - clean.m) <= 2


def test_outlier_screen_flags_spikes_and_not_gaussian_noise():
    gen = torch.Generator().manual_seed(1)
    y = torch.randn(200_000, 2, generator=gen)
    seg = torch.zeros(200_000, dtype=torch.int64)
    assert int(screen_outliers(y, seg).sum()) <= 2  # a 5-sigma screen: about 1 false flag in 10^6 samples
    y = y[:20_000]
    y[[100, 200, 5000], [0, 0, 1]] += 40.0
    flagged = screen_outliers(y, seg[:20_000])
    assert flagged[[100, 200, 5000]].all() and int(flagged.sum()) == 3
    y[[7000, 7001], 1] += 40.0  # two spikes side by side also flag (harmlessly) their next neighbours
    assert screen_outliers(y, seg[:20_000])[6999:7003].all()
    assert not screen_outliers(torch.zeros(100, 2), seg[:100]).any()  # a constant signal: nothing to flag


def test_bridged_samples_are_left_out_of_the_noise_estimate(record):
    y, seg, rec = record
    bridged = (torch.arange(y.shape[0]) // 40) % 2 == 1  # every other block of 40 samples
    smooth = y.clone()
    smooth[bridged] = ((y.roll(1, 0) + y + y.roll(-1, 0)) / 3.0)[bridged]  # filled samples are smoother
    # the filled samples do not enter the estimate at all, and would have lowered it
    assert torch.equal(calibrate(smooth, 1000.0, seg, bridged=bridged).sigma,
                       calibrate(y, 1000.0, seg, bridged=bridged).sigma)
    assert torch.all(calibrate(smooth, 1000.0, seg).sigma < 0.9 * calibrate(y, 1000.0, seg).sigma)


def test_box_averaged_taps_see_the_tap_noise_in_eq24_and_the_snr_gate():
    noisy = simulate(SinglePendulum(), 4.0, noise=0.05, seed=0)
    y, seg = torch.as_tensor(noisy.y[:3000]), torch.as_tensor(noisy.segment[:3000])
    point, box = calibrate(y, 1000.0, seg), calibrate(y, 1000.0, seg, tap_average=True)
    assert torch.equal(point.sigma, box.sigma)  # the noise estimate itself is unchanged
    # m ~ sigma^(1/5) with the tap noise sigma / sqrt(m): the fixed point m^1.1 = m_point (up to rounding)
    assert box.m < point.m and abs(box.m ** 1.1 / point.m - 1) < 0.1
    assert box.snr2 > 2 * point.snr2  # sqrt(m) less tap noise, at a shorter dt_eff (snr2 ~ dt^2)
    fixed = calibrate(y, 1000.0, seg, m=20, tap_average=True)
    assert fixed.m == 20 and fixed.snr2 > 3 * calibrate(y, 1000.0, seg, m=20).snr2

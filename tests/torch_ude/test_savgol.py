"""Savitzky-Golay rows, exactness, residual projection, noise estimator, SNR, bad input."""
import math

import numpy as np
import pytest
import torch
from scipy.signal import savgol_coeffs

from torch_ude.savgol import SavitzkyGolay, optimal_dt, residual_projection, savgol_rows, snr2


@pytest.mark.parametrize("m,p", [(5, 4), (3, 2), (7, 3), (10, 5), (2, 4), (5, 0)])
def test_rows_match_scipy(m, p):
    rows = savgol_rows(m, p, 2)
    for d in range(3):
        if d > p:
            assert torch.count_nonzero(rows[d]) == 0
            continue
        ref = savgol_coeffs(2 * m + 1, p, deriv=d, use="dot")
        assert np.allclose(rows[d].numpy(), ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("m,p", [(5, 4), (4, 2), (6, 3)])
def test_exact_on_polynomials_up_to_order_p(m, p):
    sg = SavitzkyGolay(m, p)
    rng = np.random.default_rng(0)
    dt = 0.037
    tau = torch.arange(-m, m + 1, dtype=torch.float64) * dt
    for degree in range(p + 1):
        coef = torch.as_tensor(rng.normal(size=degree + 1))
        y = sum(c * tau**k for k, c in enumerate(coef))
        x, xd, xdd = sg.estimate(y, dt)
        assert torch.allclose(x, coef[0], atol=1e-10)
        assert torch.allclose(xd, coef[1] if degree >= 1 else torch.tensor(0.0), atol=1e-8)
        assert torch.allclose(xdd, 2 * coef[2] if degree >= 2 else torch.tensor(0.0), atol=1e-6)
        assert float(sg.misfit(y)) < 1e-9 * (1 + float(y.abs().max()))


def test_residual_projection_is_the_orthogonal_complement():
    r = residual_projection(5, 4)
    assert torch.allclose(r @ r, r, atol=1e-12) and torch.allclose(r, r.T, atol=1e-12)
    assert abs(float(torch.trace(r)) - (11 - 5)) < 1e-10


def test_noise_estimator_bias_under_two_percent():
    sg = SavitzkyGolay(5, 4)
    rng = np.random.default_rng(1)
    sigma, windows, m, fs = 0.01, 100_000, 20, 1000.0
    t0 = rng.uniform(0, 100, size=(windows, 1))
    t = t0 + np.arange(-5, 6) * (m / fs)
    y = np.sin(3.1 * t) + 0.3 * np.cos(1.7 * t) + rng.normal(scale=sigma, size=t.shape)
    est = sg.noise_variance(sg.centre_residual(torch.as_tensor(y)))
    assert abs(math.sqrt(float(est)) / sigma - 1) < 0.01  # std bias; variance below 2 %
    assert abs(float(est) / sigma**2 - 1) < 0.02


def test_snr_and_optimal_step():
    rows = savgol_rows(5, 4)
    s2 = torch.tensor([10.0, 30.0])
    sigma = torch.tensor([0.01, 0.02])
    dt = 0.05
    expected = min(10.0 / (float(rows[2].norm()) * 0.01 / dt**2), 30.0 / (float(rows[2].norm()) * 0.02 / dt**2))
    assert math.isclose(snr2(s2, sigma, dt, rows[2]), expected, rel_tol=1e-12)
    assert snr2(s2, torch.zeros(2), dt, rows[2]) == math.inf
    assert math.isclose(optimal_dt(3.0, 0.01), 0.03) and math.isclose(optimal_dt(3.0, 0.32), 0.06)


def test_bad_windows_are_errors():
    with pytest.raises(ValueError, match="cannot fit a polynomial"):
        savgol_rows(1, 3)
    with pytest.raises(ValueError, match="cannot fit a polynomial"):
        SavitzkyGolay(2, 5)
    with pytest.raises(ValueError, match="positive integer"):
        SavitzkyGolay(0, 0)
    with pytest.raises(ValueError, match="dt_eff must be positive"):
        SavitzkyGolay().estimate(torch.zeros(11), 0.0)
    with pytest.raises(ValueError, match="positive"):
        optimal_dt(0.0, 0.01)


def test_box_averaged_taps_of_width_one_are_the_point_taps_bit_for_bit():
    assert torch.equal(savgol_rows(5, 4, 2, bin_width=1), savgol_rows(5, 4, 2))
    assert torch.equal(residual_projection(5, 4, bin_width=1), residual_projection(5, 4))
    assert SavitzkyGolay(5, 4).bin_width == 1


@pytest.mark.parametrize("b", [2, 7, 30])
def test_box_averaged_taps_fit_polynomials_exactly_at_the_middle_bin_centre(b):
    sg = SavitzkyGolay(5, 4, bin_width=b)
    rng = np.random.default_rng(b)
    fs, taps = 1000.0, 11
    t = torch.arange(taps * b, dtype=torch.float64) / fs
    centre = (5 * b + (b - 1) / 2) / fs  # the middle bin's centre
    for degree in range(5):
        coef = torch.as_tensor(rng.normal(size=degree + 1))
        y = sum(c * (t - centre) ** k for k, c in enumerate(coef)).unsqueeze(1)
        win = sg.windows(y, b)
        assert win.shape == (1, 1, taps)
        x, xd, xdd = sg.estimate(win[0, 0], b / fs)
        assert math.isclose(float(x), float(coef[0]), abs_tol=1e-9)
        assert math.isclose(float(xd), float(coef[1]) if degree >= 1 else 0.0, abs_tol=1e-6)
        assert math.isclose(float(xdd), 2 * float(coef[2]) if degree >= 2 else 0.0, abs_tol=1e-4)
        assert float(sg.misfit(win)) < 1e-9 * (1 + float(y.abs().max()))
    # the point-tap rows are biased on the same bins (the averaging shifts each tap by x'' (b dt)^2 / 24)
    if b > 2:
        y = ((t - centre) ** 2).unsqueeze(1)
        point = SavitzkyGolay(5, 4).estimate(sg.windows(y, b)[0, 0], b / fs)[0]
        assert abs(float(point)) > 1e-3 * (b / fs) ** 2


def test_box_averaged_taps_cut_the_noise_of_every_row_by_the_root_of_the_width():
    gen = torch.Generator().manual_seed(0)
    b, dt = 25, 0.025
    noise = torch.randn(40_000, 1, generator=gen, dtype=torch.float64)
    point, box = SavitzkyGolay(5, 4), SavitzkyGolay(5, 4, bin_width=b)
    est_point = point.estimate(point.windows(noise, b, b * 11), dt)
    est_box = box.estimate(box.windows(noise, b, b * 11), dt)
    for d in range(3):
        ratio = float(est_box[d].std() / est_point[d].std())
        expected = float(box.rows[d].norm() / point.rows[d].norm()) / math.sqrt(b)
        assert abs(ratio / expected - 1) < 0.15


def test_a_bin_width_below_one_is_refused():
    with pytest.raises(ValueError, match="bin_width .* must be a positive integer; got 0"):
        SavitzkyGolay(5, 4, bin_width=0)

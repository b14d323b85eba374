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

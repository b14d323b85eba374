"""Savitzky-Golay derivative rows, residual projection and noise estimation (Eq. 18-27).

A window ``y`` of ``2M + 1`` samples with tap spacing ``m`` (effective step
``dt_eff = m / fs``, Eq. 17) is fitted by a polynomial of order ``P``; the rows
``D_d`` give the state and its derivatives at the centre tap.

Box-averaged taps (ours, issue 17; ``bin_width = m > 1``): each tap is the mean of the
``m`` consecutive samples that end at it, so the window uses every sample of its span
(``(2M + 1) m``) instead of one in ``m``, and the white-noise variance of each tap falls
by ``m``. The least-squares fit then uses the exact averaging operator in its design
matrix: row ``k`` of ``A`` is the mean of ``tau^p`` over the bin of tap ``k``
(``tau = k + (j - (m - 1) / 2) / m``, ``j = 0..m-1``, in tap units about the centre of the
middle bin), so a polynomial of order ``P`` is still fitted without bias and the rows give
the state and its derivatives at the centre of the middle bin (the standard fit of
bin-integrated data; with ``m = 1`` it is the point-tap fit of the paper, bit for bit).
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["SavitzkyGolay", "savgol_rows", "residual_projection", "optimal_dt", "snr2"]


def _design(half_width: int, order: int, bin_width: int = 1) -> Tensor:
    if int(bin_width) != bin_width or bin_width < 1:
        raise ValueError(f"bin_width (samples averaged per tap) must be a positive integer; got {bin_width!r}.")
    if int(half_width) != half_width or half_width < 1:
        raise ValueError(f"half_width M must be a positive integer; got {half_width!r}.")
    if int(order) != order or order < 0:
        raise ValueError(f"order P must be a non-negative integer; got {order!r}.")
    if 2 * half_width + 1 <= order:
        raise ValueError(
            f"a Savitzky-Golay window of 2M+1 = {2 * half_width + 1} taps cannot fit a polynomial of order "
            f"P = {order}: the window must have more taps than P (increase M or lower P)."
        )
    tau = torch.arange(-half_width, half_width + 1, dtype=torch.float64)
    powers = torch.arange(order + 1, dtype=torch.float64)
    if bin_width == 1:
        return tau.unsqueeze(1) ** powers
    offsets = (torch.arange(bin_width, dtype=torch.float64) - (bin_width - 1) / 2) / bin_width
    return ((tau.unsqueeze(1) + offsets).unsqueeze(2) ** powers).mean(dim=1)  # (2M+1, P+1)


def savgol_rows(half_width: int, order: int, max_deriv: int = 2, bin_width: int = 1) -> Tensor:
    """Rows ``D_d = d! [(A^T A)^{-1} A^T]_{d,:}`` for ``d = 0..max_deriv`` (Eq. 19).

    Args:
        half_width: M, the window has ``2M + 1`` taps at ``tau = -M..M``.
        order: polynomial order P.
        max_deriv: highest derivative order; rows above P are zero.
        bin_width: samples averaged per tap (module doc); 1 is the paper's point taps.

    Returns:
        float64 tensor of shape ``(max_deriv + 1, 2M + 1)``; ``D_d . y`` is the d-th
        derivative per tap-unit^d (divide by ``dt_eff**d`` for seconds, Eq. 20-22).

    Raises:
        ValueError: for ``2M + 1 <= P`` or non-integer sizes.
    """
    a = _design(half_width, order, bin_width)
    pinv = torch.linalg.solve(a.T @ a, a.T)  # (P+1, 2M+1)
    rows = torch.zeros(max_deriv + 1, a.shape[0], dtype=torch.float64)
    for d in range(min(max_deriv, order) + 1):
        rows[d] = math.factorial(d) * pinv[d]
    return rows


def residual_projection(half_width: int, order: int, bin_width: int = 1) -> Tensor:
    """``R = I - A A^+`` (Section 3.4): ``R y`` is the part of ``y`` no order-P polynomial fits.

    ``bin_width``: samples averaged per tap (module doc); 1 is the paper's point taps.

    Returns:
        float64 tensor of shape ``(2M + 1, 2M + 1)``.
    """
    a = _design(half_width, order, bin_width)
    return torch.eye(a.shape[0], dtype=torch.float64) - a @ torch.linalg.pinv(a)


def optimal_dt(omega_c: float, sigma_rel: float, scale: float = 0.09) -> float:
    """Noise-optimal effective step ``dt* = scale / omega_c * (sigma_rel / 0.01)^(1/5)`` (Eq. 24).

    Args:
        omega_c: characteristic signal frequency ``s2 / s1`` in rad/s (> 0).
        sigma_rel: estimated noise standard deviation relative to the signal RMS (> 0).
        scale: the constant of Eq. (24), 0.09 in the paper.

    Returns:
        ``dt*`` in seconds.
    """
    if not omega_c > 0 or not sigma_rel > 0:
        raise ValueError(f"omega_c and sigma_rel must be positive; got {omega_c!r} and {sigma_rel!r}.")
    return scale / omega_c * (sigma_rel / 0.01) ** 0.2


def snr2(s2: Tensor, sigma: Tensor, dt_eff: float, d2: Tensor) -> float:
    """Second-derivative signal-to-noise ratio, ``min_i s2_i / (||D2|| sigma_i / dt^2)`` (Eq. 25).

    Args:
        s2: RMS of the second derivative per channel, shape (n,).
        sigma: noise standard deviation per channel, shape (n,), same units as the state.
        dt_eff: effective step in s.
        d2: the second-derivative row ``D_2``, shape (2M + 1,).

    Returns:
        The SNR (``inf`` without noise).
    """
    noise = torch.linalg.vector_norm(d2) * sigma / dt_eff**2
    ratio = torch.where(noise > 0, s2 / noise.clamp_min(torch.finfo(noise.dtype).tiny),
                        torch.full_like(s2, math.inf))
    return float(ratio.min())


class SavitzkyGolay:
    """An ``(M, P)`` Savitzky-Golay estimator with its misfit projection and noise gain.

    Args:
        half_width: M (the paper: 5, 11 taps).
        order: P (the paper: 4).
        dtype: dtype of the rows applied to data (float64 host, float32 device).
        bin_width: samples averaged per tap (module doc; 1: the paper's point taps). The
            windows of `windows` then hold bin means, and ``rows`` and ``projection`` fit them.

    Attributes:
        rows: ``(3, 2M+1)`` rows D0, D1, D2.
        projection: ``(2M+1, 2M+1)`` matrix R.
        noise_gain: ``1 - 2 [D0]_mu + ||D0||^2``, the variance factor of Eq. (23).
    """

    def __init__(self, half_width: int = 5, order: int = 4, dtype: torch.dtype = torch.float64,
                 bin_width: int = 1) -> None:
        self.half_width, self.order = int(half_width), int(order)
        rows = savgol_rows(half_width, order, 2, bin_width)
        self.bin_width = int(bin_width)
        d0 = rows[0]
        self.noise_gain = float(1.0 - 2.0 * d0[half_width] + d0 @ d0)
        self.rows = rows.to(dtype)
        self.projection = residual_projection(half_width, order, bin_width).to(dtype)

    @property
    def taps(self) -> int:
        """Window length ``2M + 1``."""
        return 2 * self.half_width + 1

    def windows(self, y: Tensor, spacing: int, stride: int = 1) -> Tensor:
        """All windows of ``2M + 1`` taps, ``spacing`` samples apart, starting every ``stride``.

        With ``bin_width`` b > 1 each tap is the mean of the b samples ending at it (the
        first window then starts at sample b - 1; a NaN/Inf sample spoils its bins only).

        Args:
            y: samples, shape (T, n).
            spacing: tap spacing m (>= 1).
            stride: samples between consecutive window starts (>= 1).

        Returns:
            Windows of shape (W, n, 2M + 1), oldest tap first; W = 0 if T is too short.
        """
        if spacing < 1 or stride < 1:
            raise ValueError(f"spacing and stride must be >= 1; got {spacing!r} and {stride!r}.")
        if self.bin_width > 1:
            if y.shape[0] < self.bin_width:
                return y.new_empty((0, y.shape[1], self.taps))
            y = y.unfold(0, self.bin_width, 1).mean(dim=2)  # (T - b + 1, n): the bin ending at each sample
        span = (self.taps - 1) * spacing + 1
        if y.shape[0] < span:
            return y.new_empty((0, y.shape[1], self.taps))
        blocks = y.unfold(0, span, stride)  # (W, n, span)
        return blocks[..., ::spacing]

    def estimate(self, windows: Tensor, dt_eff: float) -> tuple[Tensor, Tensor, Tensor]:
        """State, first and second derivative at the window centres (Eq. 20-22).

        Args:
            windows: samples, shape ``(..., 2M + 1)`` (last axis = taps, oldest first).
            dt_eff: tap spacing in s (> 0).

        Returns:
            ``(x_hat, xdot_hat, xddot_hat)``, each of shape ``windows.shape[:-1]``.
        """
        if not dt_eff > 0:
            raise ValueError(f"dt_eff must be positive (seconds); got {dt_eff!r}.")
        est = windows @ self.rows.T
        return est[..., 0], est[..., 1] / dt_eff, est[..., 2] / dt_eff**2

    def misfit(self, windows: Tensor) -> Tensor:
        """``||R y||_2`` of each window (Eq. 27), shape ``windows.shape[:-1]``."""
        return torch.linalg.vector_norm(windows @ self.projection.T, dim=-1)

    def centre_residual(self, windows: Tensor) -> Tensor:
        """``e = y_mu - D0 . y`` of each window (Eq. 23 and 35), shape ``windows.shape[:-1]``."""
        return windows[..., self.half_width] - windows @ self.rows[0]

    def noise_variance(self, residuals: Tensor) -> Tensor:
        """``sigma^2`` from centre residuals ``e`` over W windows (Eq. 23).

        Args:
            residuals: ``e``, shape ``(W, ...)``; the mean is taken over the first axis.

        Returns:
            The variance estimate, shape ``residuals.shape[1:]``.
        """
        if residuals.shape[0] == 0:
            raise ValueError("noise_variance needs at least one window residual.")
        return (residuals * residuals).mean(dim=0) / self.noise_gain

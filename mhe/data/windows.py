"""The data set of Eq. (3): M fixed windows of inputs and outputs, validated once.

Window ``i`` holds ``u~_0..u~_{N-1}`` and ``y~_1..y~_N``; the MHE of Eq. (4) uses
``y~_1..y~_{N-1}`` and the PEM objective of Eq. (5) compares ``C x^_N`` with ``y~_N``.
A recording is a pair of arrays sampled at the same instants: ``inputs[t]`` is applied
from ``t`` to ``t + 1`` and ``outputs[t]`` is measured at ``t``.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["Windows", "make_windows"]


@dataclass(frozen=True)
class Windows:
    """A batch of M windows of horizon N.

    Attributes:
        u: inputs ``u~_0..u~_{N-1}``, shape (M, N, n_u), float64.
        y: outputs ``y~_1..y~_N``, shape (M, N, n_y), float64.
        start: index of each window's first sample in its recording, shape (M,).
        u_end: the input row at the prediction instant, ``u~_N``, shape (M, n_u), or None: what an output
            map that reads the input (`mhe.models.output.OutputMap.feedthrough`) needs at ``x^_N``.
    """

    u: Tensor
    y: Tensor
    start: Tensor
    u_end: Tensor | None = None

    def __post_init__(self) -> None:
        if self.u.ndim != 3 or self.y.ndim != 3 or self.u.shape[:2] != self.y.shape[:2]:
            raise ValueError(f"u and y must have shapes (M, N, n_u) and (M, N, n_y) with the same M and N; "
                             f"got {tuple(self.u.shape)} and {tuple(self.y.shape)}.")
        if self.start.shape != self.u.shape[:1]:
            raise ValueError(f"start must have shape (M,) = ({self.u.shape[0]},); got {tuple(self.start.shape)}.")
        if self.u_end is not None and self.u_end.shape != (self.u.shape[0], self.u.shape[2]):
            raise ValueError(f"u_end must have shape (M, n_u) = {(self.u.shape[0], self.u.shape[2])}; got "
                             f"{tuple(self.u_end.shape)}.")

    def __len__(self) -> int:
        return self.u.shape[0]

    @property
    def horizon(self) -> int:
        """The MHE horizon N."""
        return self.u.shape[1]

    def __getitem__(self, index: Tensor | slice | list[int]) -> "Windows":
        """The windows at ``index`` (indices, mask or slice)."""
        u_end = None if self.u_end is None else self.u_end[index]
        return Windows(self.u[index], self.y[index], self.start[index], u_end)


def _as_table(value: object, name: str) -> Tensor:
    t = torch.as_tensor(value, dtype=torch.float64)
    if t.ndim == 1:
        t = t[:, None]
    if t.ndim != 2:
        raise ValueError(f"{name} must be a table of shape (T, n) with one row per sample; got shape "
                         f"{tuple(t.shape)}.")
    bad = (~torch.isfinite(t)).any(dim=1).nonzero().flatten()
    if bad.numel():
        raise ValueError(f"{name} holds NaN or Inf in {bad.numel()} rows (first: {bad[:5].tolist()}); drop, "
                         "interpolate or split the recording at those rows before making windows.")
    return t


def make_windows(inputs: object, outputs: object, horizon: int, stride: int = 1,
                 breaks: Sequence[int] = ()) -> Windows:
    """Cut a recording into overlapping windows of horizon N (Eq. 3).

    Args:
        inputs: inputs, array-like of shape (T, n_u).
        outputs: measured outputs at the same instants, shape (T, n_y).
        horizon: the MHE horizon N >= 2 (each window spans N + 1 samples).
        stride: samples between consecutive window starts, >= 1.
        breaks: rows ``t`` that do not follow row ``t - 1`` by one sample; windows spanning
            one are left out (`mhe.data.recording.Recording.breaks`).

    Returns:
        The `Windows` starting at ``0, stride, 2 stride, ...`` that fit in the recording
        (and span no break), with the input row at each window's last sample (`Windows.u_end`).

    Raises:
        ValueError: for NaN or Inf rows, a different number of input and output rows,
            or a horizon that does not fit in the data (or in any stretch between breaks).
    """
    u, y = _as_table(inputs, "inputs"), _as_table(outputs, "outputs")
    if u.shape[0] != y.shape[0]:
        raise ValueError(f"inputs has {u.shape[0]} rows but outputs has {y.shape[0]}; both must hold one row "
                         "per sample instant of the same recording.")
    if horizon < 2 or stride < 1:
        raise ValueError(f"horizon must be >= 2 and stride >= 1; got horizon={horizon}, stride={stride}.")
    t = u.shape[0]
    if horizon + 1 > t:
        raise ValueError(f"A window of horizon N={horizon} needs N + 1 = {horizon + 1} samples, but the data "
                         f"hold only {t}; shorten the horizon or supply a longer recording.")
    start = torch.arange(0, t - horizon, stride)
    if len(breaks):
        b = torch.as_tensor(list(breaks))
        spans = ((b[None, :] > start[:, None]) & (b[None, :] <= start[:, None] + horizon)).any(dim=1)
        start = start[~spans]
        if not start.numel():
            raise ValueError(f"No stretch between the breaks {list(breaks)[:5]} of the recording holds N + 1 = "
                             f"{horizon + 1} samples; shorten the horizon or supply longer stretches.")
    k = start[:, None] + torch.arange(horizon)[None, :]
    return Windows(u[k], y[k + 1], start, u[start + horizon])

"""The initial field the baseline shares with jet matching (Section 4.2 of the jet-matching paper).

Seeded initial weights (`HybridField.from_seed`) and the scales of the calibration
of the first 3 s of the 1 kHz stream, both from torch_ude unchanged.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from torch_ude.calibration import Calibration, calibrate
from torch_ude.field import HybridField
from torch_ude.systems.base import System
from torch_ude.systems.simulate import SimulatedStream

__all__ = ["CALIBRATION_SECONDS", "initial_field", "stream_calibration"]

#: Length of the calibration phase jet matching measures its scales on.
CALIBRATION_SECONDS = 3.0


def stream_calibration(rec: SimulatedStream) -> Calibration:
    """Jet matching's calibration of the stream's first `CALIBRATION_SECONDS` (x_rms, s1, sigma_hat, ...).

    Args:
        rec: the 1 kHz stream (float64 samples).

    Returns:
        The `torch_ude.calibration.Calibration` of its head.
    """
    head = round(CALIBRATION_SECONDS * rec.fs)
    return calibrate(torch.as_tensor(rec.y[:head]), rec.fs, torch.as_tensor(rec.segment[:head]))


def initial_field(system: System, case: str, rec: SimulatedStream, seed: int, hidden: Sequence[int] = (16, 16),
                  dtype: torch.dtype = torch.float64, cal: Calibration | None = None,
                  linear: bool = False, periodic: Sequence[int] = ()) -> HybridField:
    """The field jet matching starts from for ``seed``: seeded weights, calibrated scales.

    Args:
        system: the plant.
        case: the case of the known model.
        rec: the stream; its first `CALIBRATION_SECONDS` set the scales.
        seed: the run's seed.
        hidden: hidden widths of the tanh MLP.
        dtype: parameter dtype.
        cal: the stream's `stream_calibration`, if already computed.
        linear: add the zero-initialised linear term to the residual (`HybridField`).
        periodic: the states the network reads as ``(sin, cos)`` (`HybridField`).

    Returns:
        The field, with ``in_scale = x_rms`` and ``out_scale = s1`` of the calibration.
    """
    field = HybridField.from_seed(system.known_field(case), seed, hidden=hidden, dtype=dtype, linear=linear,
                                  periodic=periodic)
    cal = stream_calibration(rec) if cal is None else cal
    field.set_scales(cal.x_rms.to(dtype), cal.s1.to(dtype))
    return field

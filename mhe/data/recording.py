"""A recording and where it comes from: the data every identification problem is cut from.

`Recording` holds the inputs and measured outputs at one sample time (and the true states when
known), simulated (`mhe.data.simulate`) or read from a log (`mhe.data.logs`); a `RecordingSource`
produces one on first use (a simulator, a log reader). `held_inputs` turns a recording's inputs
into the step inputs of an input hold (`mhe.models.hold`); `output_noise_std` measures the noise of its outputs
(the MHE's ``R^(1/2)`` of a logged recording).
"""
from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from torch_ude.savgol import SavitzkyGolay

from ..models.hold import InputHold, step_inputs

__all__ = ["Recording", "RecordingSource", "held_inputs", "output_noise_std"]


@dataclass(frozen=True)
class Recording:
    """A recording sampled at ``dt``, simulated or read from a log (`mhe.data.logs`).

    Attributes:
        states: true (or logged) states ``x_0..x_{T-1}``, shape (T, n_x); (T, 0) when unknown.
        inputs: applied inputs ``u_0..u_{T-1}``, shape (T, n_u).
        outputs: measured outputs ``y_0..y_{T-1}``, shape (T, n_y).
        dt: sample time in seconds.
        breaks: rows ``t`` that do not follow row ``t - 1`` by one sample (rows dropped from a
            log); no window spans one.
    """

    states: Tensor
    inputs: Tensor
    outputs: Tensor
    dt: float
    breaks: tuple[int, ...] = ()

    def follows(self) -> Tensor:
        """Which transitions ``t -> t + 1`` are one sample apart (no break between), shape (T - 1,), bool."""
        keep = torch.ones(max(len(self.outputs) - 1, 0), dtype=torch.bool)
        for b in self.breaks:
            keep[int(b) - 1] = False
        return keep

    def stretches(self) -> list[tuple[int, int]]:
        """The contiguous stretches between breaks as row ranges ``[first, stop)``, in time order."""
        edges = [0, *(int(b) for b in self.breaks), len(self.outputs)]
        return list(zip(edges[:-1], edges[1:]))


class RecordingSource(abc.ABC):
    """Where the recording of an identification problem comes from (a simulator, a log file).

    `record` is called once, on first use of the problem's data, not at construction.

    Attributes:
        recorded: whether the data come from a recorded machine (a log file) rather than a
            simulator; a gray-box model's trust envelope is on by default for recorded data
            (`ResidualSettings.envelope`).
    """

    recorded: bool = False

    @property
    def truth(self) -> Mapping[str, float] | None:
        """True physical parameter values by name where known (simulated data), else None."""
        return None

    @abc.abstractmethod
    def record(self) -> Recording:
        """Produce the recording (inputs and measured outputs at one sample time)."""


def held_inputs(recording: Recording, hold: InputHold) -> Recording:
    """``recording`` with its inputs replaced by the step inputs of ``hold`` (`step_inputs`); itself for ZOH."""
    if not hold.paired:
        return recording
    return replace(recording, inputs=step_inputs(recording.inputs, hold, recording.breaks))


def output_noise_std(recording: Recording, half_width: int = 5, order: int = 4) -> list[float]:
    """Savitzky-Golay estimate of the noise standard deviation of each output (Eq. 23 of TinyUDE).

    The centre residuals of every window of ``2 half_width + 1`` samples that lies inside one stretch of the
    recording (`Recording.stretches`: none spans a break) are pooled; `torch_ude.savgol.SavitzkyGolay.noise_variance`
    turns them into the noise variance.

    Args:
        recording: the recording, outputs (T, n_y).
        half_width: M of the Savitzky-Golay windows.
        order: the fitted polynomial's order P.

    Returns:
        Per output its noise standard deviation, (n_y,), the outputs' units.
    """
    sg, y = SavitzkyGolay(half_width, order), recording.outputs
    e = torch.cat([sg.centre_residual(sg.windows(y[a:b], 1)) for a, b in recording.stretches()])
    return sg.noise_variance(e).sqrt().tolist()

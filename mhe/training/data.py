"""The data set of Eq. (3) as a LightningDataModule: its items are window indices.

Every training batch is the whole (local) set of windows, so one optimizer step is one
PEM iteration over all M windows. Under DDP, Lightning's distributed sampler hands each
process the indices ``rank, rank + world, ...``; when M is not a multiple of the world
size it pads with repeated indices, which `mhe.training.module.PEMModule` drops.
"""
from __future__ import annotations

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset

from ..racing import RacingData
from ..vehicle import BAYESRACE_TRUTH
from ..windows import Windows

__all__ = ["WindowIndices", "RacingWindows"]


class WindowIndices(Dataset):
    """The indices ``0..M-1`` of a `Windows` set."""

    def __init__(self, count: int) -> None:
        self.count = count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: int) -> int:
        return i


class RacingWindows(L.LightningDataModule):
    """Windows of the simulated racing car (Section 4.1), y = (vx, omega), vy hidden.

    Args:
        steps: samples of the recording (dt = 0.02 s).
        horizon: the MHE horizon N.
        stride: samples between window starts.
        process_std: the simulator's process-noise std (m/s^2, m/s^2, rad/s^2).
        measurement_std: the simulator's measurement-noise std of (vx, omega).
        steer_amplitude: peak steering of the excitation (rad).
        speed_range: speed-reference range of the excitation (m/s).
        seed: seed of excitation and noise.
        windows: use only the first this many windows (None: all).
    """

    def __init__(self, steps: int = 2000, horizon: int = 10, stride: int = 10,
                 process_std: tuple[float, float, float] = (0.005, 0.005, 0.1),
                 measurement_std: tuple[float, float] = (0.0005, 0.002), steer_amplitude: float = 0.45,
                 speed_range: tuple[float, float] = (0.8, 3.0), seed: int = 1, windows: int | None = None) -> None:
        super().__init__()
        self.data = RacingData(steps, horizon, stride, tuple(process_std), tuple(measurement_std), steer_amplitude,
                               tuple(speed_range), seed)
        self.limit = windows
        self.windows: Windows | None = None
        self.truth: dict[str, float] = dict(BAYESRACE_TRUTH)

    def setup(self, stage: str | None = None) -> None:
        if self.windows is None:
            old = torch.get_default_dtype()
            torch.set_default_dtype(torch.float64)
            try:
                windows = self.data.windows()
            finally:
                torch.set_default_dtype(old)
            self.windows = windows if self.limit is None else windows[: self.limit]

    @property
    def horizon(self) -> int:
        """The MHE horizon N of the windows."""
        return self.data.horizon

    def train_dataloader(self) -> DataLoader:
        return DataLoader(WindowIndices(len(self.windows)), batch_size=len(self.windows), shuffle=False)

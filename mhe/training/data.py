"""The data set of Eq. (3) as a LightningDataModule: an `IdentificationProblem` whose items are window indices.

Every training batch is the whole (local) set of windows, so one optimizer step is one
PEM iteration over all M windows; the validation batch (``torch-ude validate``) is the same
set. Under DDP, Lightning's distributed sampler hands each process the indices ``rank, rank + world,
...``; when M is not a multiple of the world size it pads with repeated indices, which
`mhe.training.module.PEMModule` drops.
"""
from __future__ import annotations

import lightning as L
from torch.utils.data import DataLoader, Dataset

from ..identification import IdentificationProblem

__all__ = ["WindowIndices", "IdentificationData"]


class WindowIndices(Dataset):
    """The indices ``0..M-1`` of a set of windows."""

    def __init__(self, count: int) -> None:
        self.count = count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: int) -> int:
        return i


class IdentificationData(L.LightningDataModule):
    """The windows of an identification problem (the problem itself is `problem`).

    Args:
        problem: model, data, measured outputs, MHE settings and arrival cost, e.g. the
            simulated racing car of ``configs/mhe_racing_physics_gn.yaml``.
    """

    def __init__(self, problem: IdentificationProblem) -> None:
        super().__init__()
        self.problem = problem

    def setup(self, stage: str | None = None) -> None:
        """Produce the recording and cut the windows (once)."""
        self.problem.windows

    def train_dataloader(self) -> DataLoader:
        """One batch of all window indices per epoch."""
        count = len(self.problem.windows)
        return DataLoader(WindowIndices(count), batch_size=count, shuffle=False)

    def val_dataloader(self) -> DataLoader:
        """One batch of all window indices (``torch-ude validate`` scores a trained run on this problem's recording)."""
        return self.train_dataloader()

"""The data set of Eq. (3) as a LightningDataModule: an `IdentificationProblem` whose items are window indices.

Every training batch is the whole (local) set of windows, so one optimizer step is one
PEM iteration over all M windows; the validation batch (``torch-ude validate``) is the same
set. Under DDP, Lightning's distributed sampler hands each process the indices ``rank, rank + world,
...``; when M is not a multiple of the world size it pads with repeated indices, which
`mhe.training.module.PEMModule` drops.
"""
from __future__ import annotations

import math

import lightning as L
from torch.utils.data import DataLoader, Dataset

from ..identification import IdentificationProblem

__all__ = ["WindowIndices", "IdentificationData", "nonfinite_settings"]

#: How `IdentificationProblem.describe` names a setting that the config names otherwise.
_CONFIG_NAMES = (("physics.start.", "physics.init_args.values."), ("recording.", "recording.init_args."))


def nonfinite_settings(node: object, path: str = "") -> list[tuple[str, float]]:
    """The NaN and infinite numbers of a problem's settings (`IdentificationProblem.describe`), with their
    dotted paths (``mhe.process_std[0]``)."""
    if isinstance(node, dict):
        return [hit for k, v in node.items() for hit in nonfinite_settings(v, f"{path}.{k}" if path else str(k))]
    if isinstance(node, (list, tuple)):
        return [hit for i, v in enumerate(node) for hit in nonfinite_settings(v, f"{path}[{i}]")]
    if isinstance(node, float) and not math.isfinite(node):
        return [(path, node)]
    return []


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

    Raises:
        ValueError: for a setting of the problem that is NaN or infinite (a standard deviation, an
            arrival cost, a start value, ...): named by its config key, before any work.
    """

    def __init__(self, problem: IdentificationProblem) -> None:
        super().__init__()
        bad = nonfinite_settings(problem.describe())
        if bad:
            path, value = bad[0]
            for short, full in _CONFIG_NAMES:
                path = full + path[len(short):] if path.startswith(short) else path
            raise ValueError(f"data.problem.{path} is {value}, not a finite number ({len(bad)} such setting"
                             f"{'s' if len(bad) > 1 else ''} in the problem); set a finite value in the config (a "
                             f"standard deviation must be a positive number).")
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

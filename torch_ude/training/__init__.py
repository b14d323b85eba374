"""Lightning integration: data module, jet-matching module, callbacks, run outputs."""
from .callbacks import (FieldEvaluation as FieldEvaluation, PeriodicCheckpoint as PeriodicCheckpoint,
                        ResidentMemory as ResidentMemory)
from .data import StreamDataModule as StreamDataModule, run_seed as run_seed
from .module import JetMatchingModule as JetMatchingModule
from .progress import UpdateProgressBar as UpdateProgressBar
from .outputs import METRIC_KEYS as METRIC_KEYS, RunOutputs as RunOutputs, residual_figure as residual_figure
from .recorded import RecordedDataModule as RecordedDataModule, RecordedPlant as RecordedPlant
from .true_state import TrueStateDataModule as TrueStateDataModule, TrueStateModule as TrueStateModule

__all__ = ["FieldEvaluation", "PeriodicCheckpoint", "ResidentMemory", "StreamDataModule", "run_seed",
           "JetMatchingModule", "METRIC_KEYS", "RunOutputs", "residual_figure", "RecordedDataModule", "RecordedPlant",
           "UpdateProgressBar", "TrueStateDataModule", "TrueStateModule"]

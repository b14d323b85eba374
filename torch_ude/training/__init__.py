"""Lightning integration: data module, jet-matching module, callbacks, run outputs."""
from .callbacks import FieldEvaluation as FieldEvaluation
from .data import StreamDataModule as StreamDataModule, run_seed as run_seed
from .module import JetMatchingModule as JetMatchingModule
from .outputs import METRIC_KEYS as METRIC_KEYS, residual_figure as residual_figure, write_run_outputs as write_run_outputs

__all__ = ["FieldEvaluation", "StreamDataModule", "run_seed", "JetMatchingModule", "METRIC_KEYS",
           "residual_figure", "write_run_outputs"]

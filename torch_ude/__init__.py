"""torch-ude: universal differential equations, trained solver-free by Lie-Taylor jet matching."""
__version__ = "0.1.0"

from .calibration import Calibration as Calibration, calibrate as calibrate, valid_windows as valid_windows
from .export import LoadedField as LoadedField, export_field as export_field, load_field as load_field
from .field import FieldJet as FieldJet, HybridField as HybridField
from .jet import JetLoss as JetLoss, JetResult as JetResult
from .metrics import (
    damping_estimate as damping_estimate,
    evaluate_field as evaluate_field,
    evaluation_states as evaluation_states,
    field_error as field_error,
    rollout_error as rollout_error,
)
from .mlp import TanhMLP as TanhMLP
from .prediction import prediction_errors as prediction_errors, rk4_input_rollout as rk4_input_rollout
from .recorded import RecordedLog as RecordedLog, read_log as read_log
from .rk4 import rk4_rollout as rk4_rollout, rk4_step as rk4_step
from .savgol import SavitzkyGolay as SavitzkyGolay, optimal_dt as optimal_dt, savgol_rows as savgol_rows, snr2 as snr2
from .sparse import Library as Library, ResidualEquations as ResidualEquations, fit_residual as fit_residual
from .systems import (
    ControlledField as ControlledField,
    DoublePendulum as DoublePendulum,
    FrictionPendulum as FrictionPendulum,
    SinglePendulum as SinglePendulum,
    Simulator as Simulator,
    System as System,
    TorquePendulumModel as TorquePendulumModel,
    VectorField as VectorField,
    simulate as simulate,
)

__all__ = [
    "__version__",
    "HybridField", "FieldJet", "TanhMLP", "JetLoss", "JetResult",
    "SavitzkyGolay", "savgol_rows", "optimal_dt", "snr2", "calibrate", "Calibration", "valid_windows",
    "field_error", "damping_estimate", "rollout_error", "evaluation_states", "evaluate_field",
    "rk4_step", "rk4_rollout", "export_field", "load_field", "LoadedField", "fit_residual", "Library", "ResidualEquations",
    "System", "VectorField", "SinglePendulum", "DoublePendulum", "FrictionPendulum", "Simulator", "simulate",
    "ControlledField", "TorquePendulumModel", "read_log", "RecordedLog", "prediction_errors", "rk4_input_rollout",
]

"""Solver-based UDE baselines: RK4 multiple shooting with a hand-derived discrete adjoint."""
from .accounting import (
    IterationCost as IterationCost,
    account_iteration as account_iteration,
    matmul_macs as matmul_macs,
    measure_iteration as measure_iteration,
    tape_breakdown as tape_breakdown,
)
from .adjoint import rk4_adjoint as rk4_adjoint
from .initialization import (
    CALIBRATION_SECONDS as CALIBRATION_SECONDS,
    initial_field as initial_field,
    stream_calibration as stream_calibration,
)
from .optimize import FitHistory as FitHistory, ShootingAdam as ShootingAdam, StepResult as StepResult
from .rk4 import RK4Tape as RK4Tape, rk4_forward as rk4_forward
from .shooting import ShootingGradient as ShootingGradient, ShootingObjective as ShootingObjective
from .windows import (
    Observations as Observations,
    ShootingWindows as ShootingWindows,
    observe as observe,
    recorded_observations as recorded_observations,
    shooting_windows as shooting_windows,
)

__all__ = [
    "RK4Tape", "rk4_forward", "rk4_adjoint",
    "Observations", "ShootingWindows", "observe", "recorded_observations", "shooting_windows",
    "ShootingObjective", "ShootingGradient", "ShootingAdam", "StepResult", "FitHistory",
    "IterationCost", "measure_iteration", "matmul_macs", "tape_breakdown", "account_iteration",
    "CALIBRATION_SECONDS", "initial_field", "stream_calibration",
]

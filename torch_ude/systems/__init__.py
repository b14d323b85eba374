"""Plants: true fields, known models per case, simulator, excitation and noise."""
from .base import System as System, VectorField as VectorField, ZeroField as ZeroField, check_states as check_states
from .controlled import ControlledField as ControlledField, TorquePendulumModel as TorquePendulumModel
from .dfki_double_pendulum import TorqueDoublePendulumModel as TorqueDoublePendulumModel
from .double_pendulum import DoublePendulum as DoublePendulum, DoublePendulumField as DoublePendulumField
from .duffing import DuffingField as DuffingField, DuffingOscillator as DuffingOscillator
from .friction import FrictionField as FrictionField, FrictionPendulum as FrictionPendulum
from .linear_axis import LinearAxisModel as LinearAxisModel
from .pendulum import PendulumField as PendulumField, SinglePendulum as SinglePendulum
from .faults import SensorFaults as SensorFaults
from .simulate import SimulatedStream as SimulatedStream, Simulator as Simulator, simulate as simulate
from .torque_law import (TorqueLaw as TorqueLaw, simulate_torque_law as simulate_torque_law,
                         swing_up_torques as swing_up_torques)

__all__ = [
    "System", "VectorField", "ZeroField", "check_states", "ControlledField", "TorquePendulumModel",
    "TorqueDoublePendulumModel", "SinglePendulum", "PendulumField", "DoublePendulum", "DoublePendulumField",
    "FrictionPendulum", "FrictionField", "LinearAxisModel", "DuffingOscillator", "DuffingField",
    "SimulatedStream", "Simulator", "simulate", "SensorFaults", "TorqueLaw", "simulate_torque_law", "swing_up_torques",
]

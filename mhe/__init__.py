"""PEM-MHE identification from partial measurements (CasADi + L4CasADi, exact adjoint-VJP hypergradients).

A problem (`IdentificationProblem`: model, recording, windows, MHE settings, arrival cost)
is identified by the outer loop (`OuterSettings`: Adam, L-BFGS or Gauss-Newton) in one
process (`PEMIdentifier`) or under the CLI (``mhe.training``). Importing builds nothing:
recordings are simulated and CasADi problems compiled on first use.
"""
from .bounds import Bound as Bound, BoundedParameters as BoundedParameters
from .estimator import MHESettings as MHESettings, MovingHorizonEstimator as MovingHorizonEstimator
from .free_run import simulate_free_run as simulate_free_run
from .gauss_newton import GaussNewtonStopping as GaussNewtonStopping, residual_jacobian as residual_jacobian
from .identification import (
    ArrivalCost as ArrivalCost,
    IdentificationProblem as IdentificationProblem,
    RecordingSource as RecordingSource,
    ResidualSettings as ResidualSettings,
)
from .joint import JointMHE as JointMHE, JointSettings as JointSettings
from .kkt import hypergradient_adjoint as hypergradient_adjoint, hypergradient_explicit as hypergradient_explicit
from .model import NeuralResidual as NeuralResidual, PhysicsField as PhysicsField, StateSpaceModel as StateSpaceModel
from .noise_fit import NoiseFitSettings as NoiseFitSettings
from .outer import OuterSettings as OuterSettings, PEMLoop as PEMLoop
from .report import PEMResult as PEMResult, PEMStep as PEMStep
from .pem import PEMIdentifier as PEMIdentifier
from .simulate import Recording as Recording, simulate as simulate
from .solver import SolverSettings as SolverSettings, WindowSolver as WindowSolver
from .vehicle import SingleTrackVehicle as SingleTrackVehicle
from .windows import Windows as Windows, make_windows as make_windows

__all__ = [
    "IdentificationProblem", "RecordingSource", "Recording", "ArrivalCost", "ResidualSettings", "MHESettings",
    "PhysicsField", "NeuralResidual", "StateSpaceModel", "SingleTrackVehicle", "Bound", "BoundedParameters",
    "Windows", "make_windows", "simulate", "simulate_free_run",
    "OuterSettings", "GaussNewtonStopping", "NoiseFitSettings", "SolverSettings", "PEMIdentifier", "PEMLoop",
    "PEMStep", "PEMResult",
    "MovingHorizonEstimator", "WindowSolver", "hypergradient_adjoint", "hypergradient_explicit", "residual_jacobian",
    "JointMHE", "JointSettings",
]

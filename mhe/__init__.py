"""PEM-MHE identification from partial measurements (CasADi + L4CasADi, exact adjoint-VJP hypergradients)."""
from .arrival import arrival_bounds as arrival_bounds
from .blocktri import block_tridiagonal_dense as block_tridiagonal_dense, block_tridiagonal_solve as block_tridiagonal_solve
from .bounds import Bound as Bound, BoundedParameters as BoundedParameters
from .casadi_model import CasadiDynamics as CasadiDynamics
from .estimator import MHESettings as MHESettings, MovingHorizonEstimator as MovingHorizonEstimator
from .gauss_newton import (
    GaussNewtonStopping as GaussNewtonStopping,
    LevenbergMarquardt as LevenbergMarquardt,
    LMStep as LMStep,
    ResidualJacobian as ResidualJacobian,
    levenberg_marquardt_step as levenberg_marquardt_step,
    residual_jacobian as residual_jacobian,
)
from .kkt import (
    Hypergradient as Hypergradient,
    hypergradient_adjoint as hypergradient_adjoint,
    hypergradient_explicit as hypergradient_explicit,
    kkt_blocks as kkt_blocks,
    kkt_residual as kkt_residual,
    prediction_loss as prediction_loss,
    prediction_rhs as prediction_rhs,
    refine as refine,
)
from .model import NeuralResidual as NeuralResidual, PhysicsField as PhysicsField, StateSpaceModel as StateSpaceModel
from .pem import PEMIdentifier as PEMIdentifier, PEMStep as PEMStep, apply_hypergradient as apply_hypergradient
from .point import KKTPoint as KKTPoint, StageLayout as StageLayout
from .problem import MHEProblem as MHEProblem, MHESolution as MHESolution, OuterValues as OuterValues
from .simulate import Recording as Recording, simulate as simulate, vehicle_policy as vehicle_policy
from .solver import (
    WindowSolutions as WindowSolutions,
    WindowSolver as WindowSolver,
    cold_guesses as cold_guesses,
    cold_solve as cold_solve,
    lower_cost as lower_cost,
)
from .vehicle import BAYESRACE_BOUNDS as BAYESRACE_BOUNDS, BAYESRACE_TRUTH as BAYESRACE_TRUTH, IDENTIFIED as IDENTIFIED
from .vehicle import SingleTrackVehicle as SingleTrackVehicle
from .windows import Windows as Windows, make_windows as make_windows

__all__ = [
    "Bound", "BoundedParameters", "PhysicsField", "NeuralResidual", "StateSpaceModel", "SingleTrackVehicle",
    "BAYESRACE_TRUTH", "BAYESRACE_BOUNDS", "IDENTIFIED", "Recording", "simulate", "vehicle_policy",
    "Windows", "make_windows", "MHESettings", "MovingHorizonEstimator", "KKTPoint", "StageLayout",
    "arrival_bounds", "CasadiDynamics", "MHEProblem", "MHESolution", "OuterValues", "WindowSolver", "WindowSolutions",
    "lower_cost", "cold_guesses", "cold_solve",
    "block_tridiagonal_solve", "block_tridiagonal_dense", "Hypergradient", "kkt_residual", "kkt_blocks",
    "prediction_rhs", "prediction_loss", "refine", "hypergradient_adjoint", "hypergradient_explicit",
    "ResidualJacobian", "residual_jacobian", "LevenbergMarquardt", "LMStep", "levenberg_marquardt_step",
    "GaussNewtonStopping",
    "PEMIdentifier", "PEMStep", "apply_hypergradient",
]

"""PEM-MHE identification from partial measurements (CasADi + L4CasADi, exact adjoint-VJP hypergradients).

A problem (`IdentificationProblem`: model, recording, windows, MHE settings, arrival cost)
is identified by the outer loop (`OuterSettings`: Adam, L-BFGS or Gauss-Newton) in one
process (`PEMIdentifier`) or under the CLI (``mhe.training``). Importing loads and builds nothing:
each public name imports its module on first use (CasADi with the first that needs it),
recordings are simulated and CasADi problems compiled on first use.
"""
import importlib

from .simulate import Recording as Recording, simulate as simulate  # eager: mhe.simulate is the function

_HOMES = {
    "bounds": ("Bound", "BoundedParameters"), "estimator": ("MHESettings", "MovingHorizonEstimator"),
    "free_run": ("simulate_free_run",), "gauss_newton": ("GaussNewtonStopping", "residual_jacobian"),
    "identification": ("ArrivalCost", "IdentificationProblem", "RecordingSource", "ResidualSettings"),
    "joint": ("JointMHE", "JointSettings"), "kkt": ("hypergradient_adjoint", "hypergradient_explicit"),
    "model": ("NeuralResidual", "PhysicsField", "StateSpaceModel"), "noise_fit": ("NoiseFitSettings",),
    "outer": ("OuterSettings", "PEMLoop"), "report": ("PEMResult", "PEMStep"), "pem": ("PEMIdentifier",),
    "simulate": ("Recording", "simulate"), "solver": ("SolverSettings", "WindowSolver"),
    "vehicle": ("SingleTrackVehicle",), "windows": ("Windows", "make_windows"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}
__all__ = sorted(_HOME_OF)


def __getattr__(name: str) -> object:
    """Import a public name's module on first use (PEP 562) and keep the name."""
    if name not in _HOME_OF:
        raise AttributeError(f"module 'mhe' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_HOME_OF[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

"""PEM-MHE identification from partial measurements (CasADi + L4CasADi, exact adjoint-VJP hypergradients).

A problem (`IdentificationProblem`: model, recording, windows, MHE settings, arrival cost)
is identified by the outer loop (`OuterSettings`: Adam, L-BFGS or Gauss-Newton) in one
process (`PEMIdentifier`) or under the CLI (``mhe.training``). Importing loads and builds nothing:
each public name imports its module on first use (CasADi with the first that needs it),
recordings are simulated and CasADi problems compiled on first use.
"""
import importlib

_HOMES = {
    "models.bounds": ("Bound", "BoundedParameters"), "estimator.estimator": ("MHESettings", "MovingHorizonEstimator"),
    "outer.free_run": ("simulate_free_run",), "outer.gauss_newton": ("GaussNewtonStopping", "residual_jacobian"),
    "identification": ("ArrivalCost", "IdentificationProblem", "ResidualSettings"),
    "data.recording": ("Recording", "RecordingSource"), "data.simulate": ("simulate_closed_loop",),
    "peers.joint": ("JointMHE", "JointSettings"), "estimator.kkt": ("hypergradient_adjoint", "hypergradient_explicit"),
    "models.model": ("NeuralResidual", "PhysicsField", "StateSpaceModel"), "outer.noise_fit": ("NoiseFitSettings",),
    "outer.outer": ("OuterSettings", "PEMLoop"), "outer.report": ("PEMResult", "PEMStep"), "pem": ("PEMIdentifier",),
    "estimator.solver": ("SolverSettings", "WindowSolver"), "models.vehicle": ("SingleTrackVehicle",),
    "data.windows": ("Windows", "make_windows"),
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

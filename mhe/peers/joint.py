"""Joint-MHE (Kühl et al., 2011), the baseline of Table 1: parameters as constant states of the MHE.

The identified physical parameters become extra states of the model (`AugmentedPhysics`),
held constant by the dynamics up to a random walk (``rho' = w_rho`` with the small standard
deviation ``random_walk_std``: the MHE's weights must be positive, so this is how it writes
"constant"). They are carried in the unconstrained coordinates ``rho`` of `mhe.models.bounds.Bound`
(the coordinates of PEM-MHE's outer loop), so every value the estimator can reach lies inside
the parameters' bounds. The MHE of this augmented model is the existing one
(`mhe.estimator.estimator.MovingHorizonEstimator`, its NLP `mhe.estimator.problem.MHEProblem`, solver
`mhe.estimator.solver.WindowSolver`); nothing is added to it.

`JointMHE.run` slides that MHE over the recording window after window in time order (``stride``
samples apart), ``passes`` times: the arrival mean ``s_bar`` of each window is the previous
window's estimate of the augmented state, parameters included, at the sample where the new window
starts; ``Sigma`` stays at its start (a fixed arrival weight: the parameters' prior standard
deviation ``parameter_std`` in every window, no covariance update). The first window of every pass
restarts the physical states at the problem's arrival-cost start and keeps the parameters. The
identified parameters are the last solved window's estimate at its last sample. A window whose
solve fails is counted and skipped: its prior carries over to the next window, whose physical
states restart at the arrival-cost start. There is no hypergradient, so IPOPT's solution is used
without the torch Newton polish (``refine_steps = 0``); the torch KKT residual still verifies each
window (``kkt_tol``).
"""
from __future__ import annotations

import copy
import dataclasses
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import torch

from ..models.bounds import Bound, BoundedParameters
from ..models.model import PhysicsField, StateSpaceModel
from ..estimator.estimator import MovingHorizonEstimator
from ..estimator.solver import WindowSolver
from ..identification import IdentificationProblem

__all__ = ["bounded_value", "AugmentedPhysics", "JointSettings", "JointResult", "JointMHE"]


def bounded_value(bound: Bound, raw, ops: SimpleNamespace):
    """`mhe.models.bounds.Bound.from_raw` written with an ``ops`` namespace, so it also runs on CasADi symbols.

    Args:
        bound: the parameter's bound.
        raw: the unconstrained ``rho``: a tensor (any shape) or a CasADi expression.
        ops: `mhe.models.ops.TORCH_OPS` or `mhe.models.casadi_model.CASADI_OPS`.

    Returns:
        The bounded value, shaped like ``raw`` (physical units).
    """
    lo, hi = bound.lower, bound.upper
    if lo is not None and hi is not None:
        s = 1.0 / (1.0 + ops.exp(-raw))
        if bound.log:
            return ops.exp(math.log(lo) + math.log(hi / lo) * s)
        return lo + (hi - lo) * s
    if lo is not None:
        return lo + ops.log(1.0 + ops.exp(raw))
    if hi is not None:
        return hi - ops.log(1.0 + ops.exp(raw))
    return raw


class AugmentedPhysics(PhysicsField):
    """``physics`` with its identified parameters as extra states ``rho`` (constant up to ``w``).

    States: the physics' states, then ``rho_<name>`` for each identified parameter, in
    ``physics.params.free_names`` order; the value of that parameter is
    ``bounds[name].from_raw(rho)``. The parameters the physics keeps fixed stay fixed here.

    Args:
        physics: the known physics; its identified parameters and bounds define the extra states.

    Raises:
        ValueError: if ``physics`` identifies no parameter.
    """

    def __init__(self, physics: PhysicsField) -> None:
        params = physics.params
        if not params.free_names:
            raise ValueError("Joint-MHE estimates the identified parameters as states; the physics identifies none. "
                             "Name them in the physics' identify argument.")
        values = {n: float(v.detach()) for n, v in params().items()}
        super().__init__(BoundedParameters({n: values[n] for n in params.fixed_names}, identify=()))
        self.base = physics
        self.free_names, self.bounds = params.free_names, dict(params.bounds)
        self.state_names = tuple(physics.state_names) + tuple(f"rho_{n}" for n in self.free_names)
        self.input_names = tuple(physics.input_names)

    def raw_start(self) -> list[float]:
        """``rho`` of the physics' current values of the identified parameters, in ``free_names`` order."""
        values = self.base.params()
        return [self.bounds[n].to_raw(float(values[n].detach())) for n in self.free_names]

    def values(self, rho: Sequence[float]) -> dict[str, float]:
        """Physical values of the identified parameters at ``rho`` (``free_names`` order), by name."""
        return {n: float(self.bounds[n].from_raw(torch.tensor(float(r), dtype=torch.float64)))
                for n, r in zip(self.free_names, rho)}

    def vector_field(self, x: Sequence, u: Sequence, p: Mapping[str, object], ops: SimpleNamespace) -> list:
        """The physics' ``dx/dt`` with the identified parameters read from the states, then ``rho' = 0``."""
        n = self.base.n_x
        values = dict(p)
        values.update({name: bounded_value(self.bounds[name], r, ops) for name, r in zip(self.free_names, x[n:])})
        zero = x[0] * 0.0
        return list(self.base.vector_field(x[:n], u, values, ops)) + [zero] * len(self.free_names)


@dataclass(frozen=True)
class JointSettings:
    """Settings of Joint-MHE, validated once; horizon, weights and IPOPT settings are the problem's.

    Attributes:
        parameter_std: ``sigma`` of the parameter states in the arrival cost of every window
            (``rho`` units).
        random_walk_std: ``q`` of the parameter states (``rho`` units per second): the random
            walk that stands for "constant" (the MHE's weights must be positive).
        stride: samples between the starts of consecutive windows, 1 <= stride <= horizon
            (1: the classical MHE that moves by one sample).
        passes: how many times the MHE slides over the recording (>= 1); each pass starts
            from the parameters the previous one ended at.
        windows: slide over the first this many windows only (None: the whole recording).
    """

    parameter_std: float = 0.1
    random_walk_std: float = 1e-3
    stride: int = 1
    passes: int = 1
    windows: int | None = None

    def __post_init__(self) -> None:
        if not (self.parameter_std > 0 and self.random_walk_std > 0 and self.stride >= 1 and self.passes >= 1
                and (self.windows is None or self.windows >= 1)):
            raise ValueError(f"Joint-MHE needs parameter_std > 0, random_walk_std > 0, stride >= 1, passes >= 1 "
                             f"and windows None or >= 1; got parameter_std={self.parameter_std}, random_walk_std="
                             f"{self.random_walk_std}, stride={self.stride}, passes={self.passes}, "
                             f"windows={self.windows}.")


@dataclass(frozen=True)
class JointResult:
    """What `JointMHE.run` estimated.

    Attributes:
        values: the identified parameters at the last solved window, by name (physical units).
        history: per solved window its pass, start sample and parameter estimate by name.
        windows: window solves in the run (windows per pass times passes).
        failed: window solves that failed (skipped).
        wall_s: wall time of the run in seconds (all window solves, including the CasADi build).
    """

    values: dict[str, float]
    history: list[dict] = field(default_factory=list)
    windows: int = 0
    failed: int = 0
    wall_s: float = 0.0


class JointMHE:
    """The MHE of the augmented model (`AugmentedPhysics`) slid over ``problem``'s recording.

    Args:
        problem: a physics-only identification problem (recording, measured states,
            discretization, MHE horizon, weights and IPOPT settings, arrival-cost start, start
            values of the parameters). Its stride, window limit and arrival box are not used.
        settings: the Joint-MHE settings.
        build_dir: build folder of the window solver (physics-only: no code is generated).

    Attributes:
        estimator: the augmented MHE (its arrival mean is moved from window to window).
        physics: the augmented physics (`AugmentedPhysics`).

    Raises:
        ValueError: for a problem with a neural residual or without physics, an output map with
            identified parameters, or a stride longer than the horizon.
    """

    def __init__(self, problem: IdentificationProblem, settings: JointSettings = JointSettings(),
                 build_dir: str | Path = "build/joint_mhe") -> None:
        if problem.physics is None or problem.residual is not None:
            raise ValueError("Joint-MHE estimates physical parameters of a physics-only problem; got physics="
                             f"{problem.physics is not None}, residual={problem.residual is not None}.")
        if problem.output is not None and problem.output.params.free_names:
            raise ValueError(f"Joint-MHE estimates physical parameters only; the output map's identified parameters "
                             f"{list(problem.output.params.free_names)} would stay at their start: fix them (identify "
                             f"none) or use PEM-MHE.")
        if settings.stride > problem.mhe.horizon:
            raise ValueError(f"stride must not exceed the horizon {problem.mhe.horizon} (consecutive windows must "
                             f"overlap or touch so the arrival mean can be carried over); got {settings.stride}.")
        self.problem, self.settings = problem, settings
        physics = AugmentedPhysics(copy.deepcopy(problem.physics))
        n_p = len(physics.free_names)
        model = StateSpaceModel(physics, dt=problem.recording.dt, measured=problem.measured,
                                discretization=problem.discretization, hold=problem.hold,
                                output=copy.deepcopy(problem.output))
        mhe = dataclasses.replace(problem.mhe, process_std=problem.mhe.process_std + (settings.random_walk_std,) * n_p,
                                  refine_steps=0)
        self.state_mean = torch.tensor(problem.arrival.mean, dtype=torch.float64)
        self.estimator = MovingHorizonEstimator(model, mhe, tuple(problem.arrival.mean) + tuple(physics.raw_start()),
                                                tuple(problem.arrival.std) + (settings.parameter_std,) * n_p)
        self.physics, self.n_x = physics, problem.n_x
        self.build_dir = Path(build_dir)

    def run(self) -> JointResult:
        """Slide the MHE over the recording ``passes`` times in time order (see the module docstring).

        Returns:
            The last solved window's parameters, the per-window history and the counts.
        """
        windows = self.problem.replace(stride=self.settings.stride, windows=self.settings.windows).windows
        est, n, n_x = self.estimator, self.problem.mhe.horizon, self.n_x
        starts = windows.start.tolist()
        rho = est.arrival_mean.detach()[n_x:].clone()
        history, failed, t0 = [], 0, time.perf_counter()
        with WindowSolver(est, self.build_dir, name="joint_mhe") as solver:
            for p in range(self.settings.passes):
                mean = torch.cat([self.state_mean, rho])
                for i in range(len(windows)):
                    with torch.no_grad():
                        est.arrival_mean_raw.copy_(mean)  # unbounded s_bar: its raw value is s_bar
                    sol = solver.solve(windows[i:i + 1])
                    gap = starts[i + 1] - starts[i] if i + 1 < len(windows) else n + 1
                    if not bool(sol.ok[0]):
                        failed += 1
                        mean = torch.cat([self.state_mean, mean[n_x:]])
                        continue
                    x = sol.point.x[0].detach()
                    rho = x[n, n_x:].clone()
                    history.append({"pass": p, "start": starts[i], **self.physics.values(rho.tolist())})
                    mean = x[gap].clone() if gap <= n else torch.cat([self.state_mean, rho])
        wall = time.perf_counter() - t0
        return JointResult(self.physics.values(rho.tolist()), history, len(windows) * self.settings.passes, failed,
                           wall)

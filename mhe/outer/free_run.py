"""Free-run simulation of an identified model and the output-error refinement after PEM (``outer.criterion``).

PEM-MHE minimises the one-step prediction error of Eq. (9): each window's MHE re-estimates the
states from the data before predicting one sample. A user is often judged by the free-run
(simulation, output-error) error instead: the model driven by the recorded inputs alone, from one
estimated initial state, over the whole record. The two criteria can disagree (issue 33: PEM-MHE
started at the output-error optimum of a two-tank model moved away from it), so after PEM a run
can refine the parameters on the free-run criterion.

* `simulate_free_run` runs ``x_{k+1} = f_d(x_k, u~_k, 0)`` from ``x0`` with the model's input hold
  (`mhe.models.hold`), and the outputs ``h(x_k, u_k; p_y)`` (torch, float64, differentiable).
* `refine_output_error` minimises ``1/2 sum_k ||(y~_k - h(x_k, u_k; p_y)) / r||^2`` over the free-run
  trajectory, ``r`` the MHE's measurement standard deviations, in the identified physical and
  output-map parameters and the initial state of every stretch of the recording.

Design of the refinement (multiple shooting, Bock 1984):

* The record is cut into segments of ``segment`` samples; the state at the start of each segment is
  a decision variable and continuity constraints ``x_end(segment j) = s_{j+1}`` tie the segments
  into one trajectory. At a solution the constraints hold, so the criterion is exactly the free-run
  error of one simulation from the estimated initial state (no break inside a stretch); but each
  segment's sensitivity to its start is that of ``segment`` steps, not of the whole record, so the
  problem is far better conditioned than single shooting over hundreds of samples, whose cost
  surface of a lightly damped or nearly unstable model is steep and has many local minima.
* The segment starts are initialised from a free run of the PEM model (the unmeasured states) with
  the measured states put at their outputs' `mhe.models.output.OutputMap.state_guess`: the data pull the
  start towards the measured trajectory from the first iteration.
* Parameters are optimised in the unconstrained coordinates ``rho`` of `mhe.models.bounds.Bound`, as the
  PEM loop does, so the result stays strictly inside every bound; the physics is CasADi SX with
  exact Hessians and IPOPT solves the equality-constrained least squares.
* The score before refinement (``rmse_before``) is the free-run error of the PEM parameters with
  their initial states estimated by the same problem with the parameters fixed, so both numbers
  compare models, not initial states.

The refinement refuses models with a neural residual: its weights would enter through L4CasADi
(float32, no second derivatives inside a composed step) at every sample of the record. Scoring
one (`estimate_initial_states`, its parameters fixed) writes the network out in float64 with its
current weights and trust envelope (`mhe.models.casadi_model.CasadiDynamics` with ``residual="sx"``), one
call per step in an MX graph.
"""
from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import casadi as cs
import numpy as np
import torch
from torch import Tensor

from ..models.bounds import Bound
from ..models.casadi_model import CasadiDynamics
from ..models.checks import require
from ..models.hold import step_inputs
from ..models.model import StateSpaceModel
from ..data.recording import Recording
from ..estimator.estimator import MovingHorizonEstimator

__all__ = ["CRITERIA", "FreeRun", "OutputErrorSettings", "OutputErrorResult", "simulate_free_run", "free_run_rmse",
           "estimate_initial_states", "refine_output_error"]

CRITERIA = ("prediction", "simulation")
"""The outer criteria: the one-step prediction error of PEM alone, or PEM followed by the free-run refinement."""


@dataclass(frozen=True)
class FreeRun:
    """A free-run simulation.

    Attributes:
        states: ``x_0..x_{T-1}``, shape (T, n_x).
        outputs: ``h(x_k, u_k; p_y)``, shape (T, n_y), noise-free.
    """

    states: Tensor
    outputs: Tensor


def _stretches(t: int, breaks: Sequence[int]) -> list[tuple[int, int]]:
    edges = [0, *(int(b) for b in breaks), t]
    return list(zip(edges[:-1], edges[1:]))


def simulate_free_run(model: StateSpaceModel, x0: Sequence[float] | Tensor, inputs: Tensor,
                      breaks: Sequence[int] = ()) -> FreeRun:
    """``x_{k+1} = f_d(x_k, u~_k, 0)`` from ``x0``, the input between samples as the model's hold says.

    Args:
        model: the identified model (float64).
        x0: the initial state, (n_x,), or one per stretch between ``breaks``, (S, n_x).
        inputs: the inputs at the sample instants, (T, n_u) (the model's inputs, not step inputs: the
            hold pairs them, `mhe.models.hold.step_inputs`).
        breaks: rows that do not follow their predecessor (`mhe.data.recording.Recording.breaks`); each
            stretch starts again from its own ``x0``.

    Returns:
        The `FreeRun` (differentiable in the model's parameters and ``x0``).

    Raises:
        ValueError: for inputs without ``model.n_u`` columns or ``x0`` of the wrong shape.
    """
    inputs = torch.as_tensor(inputs, dtype=torch.float64)
    if inputs.ndim != 2 or inputs.shape[1] != model.n_u:
        raise ValueError(f"inputs must have shape (T, n_u) = (T, {model.n_u}) (the inputs at the samples); got "
                         f"{tuple(inputs.shape)}.")
    spans = _stretches(inputs.shape[0], breaks)
    x0 = torch.as_tensor(x0, dtype=torch.float64).reshape(-1, model.n_x) if torch.as_tensor(x0).numel() else None
    if x0 is None or x0.shape[0] != len(spans):
        raise ValueError(f"x0 needs one state of {model.n_x} numbers per stretch ({len(spans)}); got "
                         f"{None if x0 is None else tuple(x0.shape)}.")
    held = step_inputs(inputs, model.hold, breaks)
    zero = torch.zeros(1, model.n_w, dtype=torch.float64)
    states = []
    for (a, b), x in zip(spans, x0):
        x = x[None]
        for t in range(a, b):
            states.append(x[0])
            if t + 1 < b:
                x = model.step(x, held[t:t + 1], zero)
    xs = torch.stack(states)
    return FreeRun(xs, model.output(xs, held))


def free_run_rmse(run: FreeRun, outputs: Tensor) -> Tensor:
    """Root-mean-square error of the free run's outputs against measured ``outputs`` (T, n_y), per output (n_y,)."""
    return ((run.outputs - outputs) ** 2).mean(dim=0).sqrt()


@dataclass(frozen=True)
class OutputErrorSettings:
    """Settings of the output-error refinement (`refine_output_error`), validated once.

    Attributes:
        segment: samples per shooting segment, >= 1 (1: every sample's state is a variable).
        max_iter: IPOPT's iteration limit.
        tol: IPOPT's convergence tolerance.
    """

    segment: int = 10
    max_iter: int = 300
    tol: float = 1e-9

    def __post_init__(self) -> None:
        if isinstance(self.segment, bool) or not isinstance(self.segment, int) or self.segment < 1:
            raise ValueError(f"simulation.segment (samples per shooting segment) must be an integer >= 1; got "
                             f"{self.segment!r}.")
        require([(self.max_iter >= 1, f"simulation.max_iter must be >= 1; got {self.max_iter}."),
                 (self.tol > 0, f"simulation.tol must be > 0; got {self.tol}.")])


@dataclass(frozen=True)
class OutputErrorResult:
    """What the refinement did.

    Attributes:
        initial_states: the estimated initial state of each stretch after refinement, (S, n_x).
        rmse_before: free-run RMSE per output at the PEM parameters (initial states estimated), (n_y,).
        rmse_after: free-run RMSE per output at the refined parameters, (n_y,).
        success: IPOPT reported success.
        status: IPOPT's return status.
        iterations: IPOPT iterations of the refinement.
        wall_s: wall time of both solves in seconds.
    """

    initial_states: Tensor
    rmse_before: Tensor
    rmse_after: Tensor
    success: bool
    status: str
    iterations: int
    wall_s: float


def _from_raw(bound: Bound, raw):
    """`mhe.models.bounds.Bound.from_raw` on a CasADi symbol."""
    lo, hi = bound.lower, bound.upper
    if bound.log:
        return cs.exp(math.log(lo) + math.log(hi / lo) / (1 + cs.exp(-raw)))
    if lo is not None and hi is not None:
        return lo + (hi - lo) / (1 + cs.exp(-raw))
    softplus = cs.fmax(raw, 0) + cs.log1p(cs.exp(-cs.fabs(raw)))
    if lo is not None:
        return lo + softplus
    if hi is not None:
        return hi - softplus
    return raw


def _values(part, raw) -> list:
    """All parameter values of a `mhe.models.bounds.BoundedParameters` in ``names`` order, the free ones from ``raw``."""
    now = part()
    free = {n: _from_raw(part.bounds[n], raw[i]) for i, n in enumerate(part.free_names)}
    return [free[n] if n in free else float(now[n].detach()) for n in part.names]


class _Shooting:
    """The multiple-shooting output-error NLP of a model on a recording (module docstring), built once.

    Decision vector: the raw coordinates of the identified parameters (physics, then output map), then the
    segment starts ``s_j`` (n_x each) in time order; constraints: the continuity defects.
    """

    def __init__(self, estimator: MovingHorizonEstimator, recording: Recording, settings: OutputErrorSettings) -> None:
        model = estimator.model
        u, y = recording.inputs.to(torch.float64), recording.outputs.to(torch.float64)
        if u.shape[1] != model.n_u or y.shape[1] != model.n_y:
            raise ValueError(f"The recording has {u.shape[1]} inputs and {y.shape[1]} outputs; the model needs "
                             f"{model.n_u} and {model.n_y}.")
        self.model, self.u, self.y, self.breaks = model, u, y, recording.breaks
        self.parts = [p.params for p in (model.physics, model.output_map) if p is not None]
        self.n_free = [len(p.free_names) for p in self.parts]
        # the network (if any) written out in SX with its weights and fade: nothing is compiled or written
        dyn = CasadiDynamics(model, build_dir="build/free_run", residual="sx")
        sym = cs.SX if model.residual is None else cs.MX  # MX: one call node per step, not the network inlined
        spans = _stretches(len(y), recording.breaks)
        held = step_inputs(u, model.hold, recording.breaks).numpy()
        weights = np.sqrt(estimator.r_inv.numpy())
        raws = [sym.sym(f"rho{i}", n) for i, n in enumerate(self.n_free)]
        p = cs.vertcat(*_values(model.physics.params, raws[0]))
        q = cs.vertcat(*_values(model.output_map.params, raws[1])) if model.output_map is not None else sym(0, 1)
        zero = cs.DM.zeros(model.n_w)
        # segment starts: a free run of the current model, the measured states at their outputs' state guess
        with torch.no_grad():
            guess = model.state_guess(y)
            x0 = estimator.arrival_mean.detach().expand(len(spans), model.n_x).clone()
            x0[:, list(model.measured)] = guess[[a for a, _ in spans]]
            init = simulate_free_run(model, x0, u, recording.breaks).states.clone()
            init[:, list(model.measured)] = guess
        self.starts: list[int] = []
        nodes, node_init, residuals, defects = [], [], [], []
        for a, b in spans:
            first = len(nodes)
            self.starts.append(first)
            heads = list(range(a, b, settings.segment))
            nodes += [sym.sym(f"s{h}", model.n_x) for h in heads]
            node_init += [init[h].numpy() for h in heads]
            for j, h in enumerate(heads):
                x = nodes[first + j]
                for t in range(h, min(h + settings.segment, b)):
                    residuals.append(weights * (y[t].numpy() - dyn.output(x, held[t, :model.n_u], q)))
                    if t + 1 < b:
                        x = dyn.step(x, held[t], zero, p)
                if j + 1 < len(heads):
                    defects.append(x - nodes[first + j + 1])
        e = cs.vertcat(*residuals)
        nlp = {"x": cs.vertcat(*raws, *nodes), "f": 0.5 * cs.dot(e, e),
               "g": cs.vertcat(*defects) if defects else sym(0, 1)}
        self.solver = cs.nlpsol("output_error", "ipopt", nlp, {
            "print_time": False, "ipopt.print_level": 0, "ipopt.sb": "yes", "ipopt.tol": settings.tol,
            "ipopt.max_iter": settings.max_iter})
        self.raw0 = np.concatenate([part.raw.detach().numpy() for part in self.parts])
        self.v0 = np.concatenate([self.raw0, *node_init])

    def solve(self, fixed: bool) -> tuple[np.ndarray, dict]:
        """Solve from the start; ``fixed``: the parameters held at their current values (initial states only)."""
        lb, ub = np.full(self.v0.shape, -np.inf), np.full(self.v0.shape, np.inf)
        n = len(self.raw0)
        if fixed:
            lb[:n] = ub[:n] = self.raw0
        sol = self.solver(x0=self.v0, lbx=lb, ubx=ub, lbg=0.0, ubg=0.0)
        return np.asarray(sol["x"]).ravel(), self.solver.stats()

    def initial_states(self, v: np.ndarray) -> Tensor:
        """The first segment start of every stretch, (S, n_x)."""
        return torch.as_tensor(v[len(self.raw0):].reshape(-1, self.model.n_x)[self.starts])

    def apply(self, v: np.ndarray) -> Tensor:
        """Set the model's identified parameters from ``v`` and return the free-run RMSE per output from ``v``'s
        initial states, (n_y,)."""
        with torch.no_grad():
            chunks = np.split(v[:len(self.raw0)], np.cumsum(self.n_free)[:-1])
            for part, chunk in zip(self.parts, chunks):
                part.raw.copy_(torch.as_tensor(chunk))
            run = simulate_free_run(self.model, self.initial_states(v), self.u, self.breaks)
            return free_run_rmse(run, self.y)


def estimate_initial_states(estimator: MovingHorizonEstimator, recording: Recording,
                            settings: OutputErrorSettings = OutputErrorSettings()) -> tuple[Tensor, Tensor]:
    """The initial state of every stretch of ``recording`` that minimises the model's free-run error, its parameters
    fixed: how a model is scored by free run.

    Args:
        estimator: the MHE (its model and its measurement standard deviations ``r``, the residuals' weights).
        recording: inputs at the samples (T, n_u) and outputs (T, n_y), with its breaks.
        settings: segment length and IPOPT's limits.

    Returns:
        The initial states (S, n_x) and the free-run RMSE per output from them (n_y,), output units.

    Raises:
        ValueError: for a recording that does not fit the model.
    """
    nlp = _Shooting(estimator, recording, settings)
    v, _ = nlp.solve(fixed=True)
    return nlp.initial_states(v), nlp.apply(v)


def refine_output_error(estimator: MovingHorizonEstimator, recording: Recording,
                        settings: OutputErrorSettings = OutputErrorSettings()) -> OutputErrorResult:
    """Refine the identified parameters of ``estimator.model`` on the free-run error of ``recording`` (module docstring).

    The model's identified physical and output-map parameters are overwritten with the refined values
    (when IPOPT does not report success they are kept only if the free-run error fell).

    Args:
        estimator: the MHE after PEM (its model and its measurement standard deviations ``r``).
        recording: the data, inputs at the samples (T, n_u) and outputs (T, n_y), with its breaks.
        settings: segment length and IPOPT's limits.

    Returns:
        The `OutputErrorResult`.

    Raises:
        ValueError: for a model with a neural residual or without identified parameters, or a recording
            whose inputs or outputs do not fit the model.
    """
    t0 = time.perf_counter()
    if estimator.model.residual is not None:
        raise ValueError("The free-run criterion (outer.criterion: simulation) works on physics and output-map "
                         "parameters; this model has a neural residual (set outer.criterion: prediction, or "
                         "refine its physics-only model).")
    nlp = _Shooting(estimator, recording, settings)
    if not sum(nlp.n_free):
        raise ValueError("outer.criterion: simulation needs identified parameters (physics or output map identify); "
                         "this model has none.")
    fixed, _ = nlp.solve(fixed=True)
    before = nlp.apply(fixed)
    free, stats = nlp.solve(fixed=False)
    after = nlp.apply(free)
    success = bool(stats.get("success", False)) and bool(np.isfinite(free).all())
    if not success and not bool((after ** 2).sum() < (before ** 2).sum()):
        free, after = fixed, nlp.apply(fixed)
    return OutputErrorResult(nlp.initial_states(free), before, after, success, str(stats.get("return_status", "")),
                             int(stats.get("iter_count", -1)), time.perf_counter() - t0)

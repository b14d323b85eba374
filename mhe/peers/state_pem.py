"""One-step prediction-error fit of physical parameters on given states (second stage of EKF->PEM).

The states ``x^_k`` (true ones, or an EKF's frozen estimates, `mhe.peers.ekf`) are taken as exact and
the identified physical parameters minimize ``sum_k ||(x^_{k+1} - f_d(x^_k, u~_k, 0; theta)) / (h q)||^2``
over all transitions that do not cross a break of the recording: the one-step error in the units
of the process noise ``q`` (dx/dt) held over a sample of ``h`` seconds. Residuals and their exact
Jacobian in ``theta`` are CasADi functions of the model's discretization
(`mhe.models.casadi_model.CasadiDynamics`); ``scipy.optimize.least_squares`` (trust-region reflective)
keeps the parameters in their bounds (`mhe.models.bounds.Bound`, the model's). Following the paper's
EKF->PEM (Section 4.3) the fit runs from several starts drawn within ``+-spread`` of the
given values and keeps the lowest cost.

`fit_residual_on_states` asks the same data, before an expensive gray-box PEM-MHE run, how well a residual of a
chosen form (width, input history, driven channels) predicts what the physics misses: fitted to the one-step
residuals of the physics on the first part of the logged states, scored on the rest. The one-step residuals on
logged states (`state_residuals`) also size a neural residual (`residual_scales`).
"""
from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import casadi as cs
import numpy as np
import scipy.optimize
import torch

from ..models.casadi_model import CasadiDynamics
from ..models.checks import require
from ..data.recording import Recording
from ..models.model import StateSpaceModel
from ..identification import IdentificationProblem

__all__ = ["StateFit", "fit_on_states", "fit_residual_on_states", "jittered_starts", "residual_scales",
           "state_residuals"]


@dataclass(frozen=True)
class StateFit:
    """The result of `fit_on_states`.

    Attributes:
        values: the identified parameters of the best start, by name (physical units).
        cost: its ``0.5 * sum r^2`` (scipy's cost).
        starts: per start the start values, the final cost, scipy's status and evaluations.
        transitions: number of transitions fitted.
        at_bounds: identified parameters of the best start that end on or within 1e-9 of the
            bounds' width of a bound (a model built from ``values`` needs them moved inside).
        wall_s: wall time of all starts in seconds.
    """

    values: dict[str, float]
    cost: float
    starts: list[dict] = field(default_factory=list)
    transitions: int = 0
    wall_s: float = 0.0
    at_bounds: tuple[str, ...] = ()


def jittered_starts(values: Mapping[str, float], names: Sequence[str], count: int, spread: float, seed: int,
                    bounds: Mapping[str, object] | None = None) -> list[dict[str, float]]:
    """``count`` seeded starts ``v_j (1 + e_j)``, ``e_j`` uniform in ``[-spread, spread]``, for ``names``.

    A draw outside its bound (`mhe.models.bounds.Bound.contains`) is drawn again; parameters not in
    ``names`` keep their value.

    Raises:
        ValueError: for ``count < 1`` or a negative ``spread``.
    """
    if count < 1 or spread < 0:
        raise ValueError(f"count must be >= 1 and spread >= 0; got count={count}, spread={spread}.")
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        start = dict(values)
        for n in names:
            for _ in range(1000):
                v = values[n] * (1.0 + spread * (2.0 * rng.random() - 1.0))
                if bounds is None or n not in bounds or bounds[n].contains(v):
                    break
            else:
                raise ValueError(f"No value of {n} within {spread:.0%} of {values[n]} lies inside {bounds[n]}.")
            start[n] = v
        out.append(start)
    return out


def fit_on_states(model: StateSpaceModel, states: np.ndarray, inputs: np.ndarray, process_std: Sequence[float],
                  starts: Sequence[Mapping[str, float]] | None = None, breaks: Sequence[int] = (),
                  max_nfev: int = 200) -> StateFit:
    """Fit the model's identified physical parameters to one-step transitions of ``states``.

    Args:
        model: a physics-only model; its identified parameters (``physics.params.free_names``)
            are fitted within their bounds, the others stay at the model's values.
        states: states ``x^_0..x^_{T-1}``, shape (T, n_x) (state units).
        inputs: inputs ``u~_0..u~_{T-1}`` (``u~_k`` drives ``k -> k + 1``), shape (T, n_u).
        process_std: q, n_x positive numbers (units of dx/dt): residual ``i`` is divided by ``h q_i``.
        starts: start values by name (identified ones; missing names take the model's values);
            None: the model's current values only.
        breaks: rows ``t`` that do not follow row ``t - 1`` (no transition ``t - 1 -> t`` is fitted).
        max_nfev: evaluation limit of each least-squares run.

    Returns:
        The best start's values and cost, and every start's outcome.

    Raises:
        ValueError: for a model without physics or with a residual, mismatched shapes, or a
            start outside the bounds.
    """
    if model.physics is None or model.residual is not None:
        raise ValueError("fit_on_states fits physical parameters of a physics-only model; got a model "
                         f"with physics={model.physics is not None} and residual={model.residual is not None}.")
    states, inputs = np.asarray(states, dtype=np.float64), np.asarray(inputs, dtype=np.float64)
    q = np.asarray(process_std, dtype=np.float64)
    require([(states.ndim == 2 and states.shape[1] == model.n_x,
              f"states must have shape (T, {model.n_x}); got {states.shape}.")])
    require([(inputs.shape == (len(states), model.n_u_step),
              f"step inputs must have shape (T, {model.n_u_step}) with T = {len(states)}; got {inputs.shape}."),
             (q.shape == (model.n_x,) and bool((q > 0).all()),
              f"process_std must be {model.n_x} positive numbers; got {q.tolist()}.")])
    params = model.physics.params
    names, free = params.names, params.free_names
    current = dict(zip(names, CasadiDynamics.parameter_values(model)))
    keep = np.ones(len(states) - 1, dtype=bool)
    for b in breaks:
        if 0 < b < len(states):
            keep[b - 1] = False
    x, xn, u = states[:-1][keep].T, states[1:][keep].T, inputs[:-1][keep].T
    count = x.shape[1]

    dyn = CasadiDynamics(model, build_dir="build/state_pem")
    xs, us, xns = cs.SX.sym("x", model.n_x), cs.SX.sym("u", model.n_u_step), cs.SX.sym("xn", model.n_x)
    theta, fixed = cs.SX.sym("theta", len(free)), cs.SX.sym("p", len(names))
    p = cs.vertcat(*[theta[free.index(n)] if n in free else fixed[i] for i, n in enumerate(names)])
    r = (xns - dyn.step(xs, us, cs.SX.zeros(model.n_w), p)) / (model.dt * q)
    one = cs.Function("r", [xs, us, xns, theta, fixed], [r, cs.jacobian(r, theta)])
    batch = one.map(count, "serial")
    fixed_values = np.array([current[n] for n in names])

    def residuals(t: np.ndarray) -> np.ndarray:
        return batch(x, u, xn, t, fixed_values)[0].full().T.reshape(-1)

    def jacobian(t: np.ndarray) -> np.ndarray:
        jac = batch(x, u, xn, t, fixed_values)[1].full()  # (n_x, count * n_free), block k = columns k*n_free...
        return jac.reshape(model.n_x, count, len(free)).transpose(1, 0, 2).reshape(-1, len(free))

    lower = np.array([-np.inf if params.bounds[n].lower is None else params.bounds[n].lower for n in free])
    upper = np.array([np.inf if params.bounds[n].upper is None else params.bounds[n].upper for n in free])
    t0, outcomes, best = time.perf_counter(), [], None
    for start in (starts if starts is not None else [current]):
        v0 = np.array([float(start.get(n, current[n])) for n in free])
        outside = [n for n, v in zip(free, v0) if not params.bounds[n].contains(v)]
        if outside:
            raise ValueError(f"The start values of {outside} lie on or outside their bounds; move them inside.")
        sol = scipy.optimize.least_squares(residuals, v0, jac=jacobian, bounds=(lower, upper), method="trf",
                                           x_scale=np.maximum(np.abs(v0), 1e-8), max_nfev=max_nfev,
                                           ftol=1e-15, xtol=1e-15, gtol=1e-15)
        outcomes.append({"start": dict(zip(free, v0.tolist())), "cost": float(sol.cost), "status": int(sol.status),
                         "nfev": int(sol.nfev), "values": dict(zip(free, sol.x.tolist()))})
        if best is None or sol.cost < best.cost:
            best = sol
    values = dict(zip(free, best.x.tolist()))
    at_bounds = tuple(n for n, v, lo, hi in zip(free, best.x, lower, upper)
                      if min(v - lo, hi - v) <= 1e-9 * (hi - lo if np.isfinite(hi - lo) else max(abs(v), 1.0)))
    return StateFit(values, float(best.cost), outcomes, count, time.perf_counter() - t0, at_bounds)


def state_residuals(model: StateSpaceModel, recording: Recording) -> np.ndarray:
    """The one-step residuals of ``model`` on the logged states of ``recording``: ``x_{k+1} - f_d(x_k, u~_k, 0)``.

    Args:
        model: the model (its current parameters, its discretization over the recording's sample time).
        recording: a recording with logged states (T, n_x) and step inputs (T, n_u_step).

    Returns:
        One row per transition ``k -> k + 1`` that spans no gap (``recording.follows()``, in order),
        shape (that many, n_x), state units (divide by ``h`` for the units of dx/dt).
    """
    keep = recording.follows()
    with torch.no_grad():
        x = recording.states[:-1][keep]
        nxt = model.step(x, recording.inputs[:-1][keep], torch.zeros_like(x))
        return (recording.states[1:][keep] - nxt).numpy()


def fit_residual_on_states(problem: IdentificationProblem, seed: int, fraction: float = 0.7, steps: int = 1500,
                           lr: float = 0.01) -> dict:
    """Fit ``problem``'s residual network to the physics' one-step residuals on the logged states; score the rest.

    The targets are `state_residuals` of the physics at the problem's start values divided by the sample time
    (dx/dt units); the network (the problem's `mhe.identification.ResidualSettings`, hidden layers seeded by
    ``seed``) is fitted by full-batch Adam to the first ``fraction`` of the rows, each driven channel in units of
    its output scale, and scored per driven channel by ``R^2 = 1 - mean((N - target)^2) / var(target)``.

    Args:
        problem: a gray-box problem on a recording with logged states (float64); its start values are
            the physics the residual corrects.
        seed: seed of the network's hidden layers (replaces the config's).
        fraction: the first ``fraction`` of the one-step rows fit, the rest are held out, in (0, 1).
        steps: full-batch Adam steps.
        lr: Adam's learning rate.

    Returns:
        ``channels`` (the driven state indices), ``train_r2`` and ``held_out_r2`` per driven channel,
        the row counts and the wall time in seconds.

    Raises:
        ValueError: without a residual or logged states, or for ``fraction`` outside (0, 1).
    """
    rec = problem.recording
    if problem.residual is None or rec.states.shape[-1] != problem.n_x:
        raise ValueError("The check needs a gray-box problem (data.problem.residual) on a recording with logged "
                         f"states; got residual={problem.residual} and states of shape {tuple(rec.states.shape)}.")
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"fraction (the rows that fit) must lie in (0, 1); got {fraction}.")
    t0 = time.perf_counter()
    target = torch.as_tensor(state_residuals(problem.model(), rec) / rec.dt)  # none across a gap
    keep = rec.follows()
    x, u = rec.states[:-1][keep], rec.inputs[:-1][keep]
    net = replace(problem.residual, seed=seed).build(problem.n_x, problem.physics.n_u)
    channels = list(net.outputs)
    scale = net.out_scale[channels]
    cut = int(fraction * len(target))
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        loss = (((net(x[:cut], u[:cut]) - target[:cut])[:, channels] / scale) ** 2).mean()
        loss.backward()
        opt.step()

    def r2(rows: slice) -> list[float]:
        with torch.no_grad():
            t = target[rows][:, channels]
            err = (net(x[rows], u[rows])[:, channels] - t).pow(2).mean(dim=0)
            return (1.0 - err / t.var(dim=0, unbiased=False)).tolist()

    return {"seed": seed, "channels": channels, "train_r2": r2(slice(0, cut)), "held_out_r2": r2(slice(cut, None)),
            "fit_rows": cut, "held_out_rows": len(target) - cut, "wall_s": time.perf_counter() - t0}
def residual_scales(model: StateSpaceModel, recording: Recording) -> dict[str, list[float]]:
    """The scales of a neural residual for ``model`` measured on the logged states of ``recording``.

    Args:
        model: the physics the residual is added to (its current parameters).
        recording: a recording with logged states (T, n_x) and inputs (T, n_u).

    Returns:
        ``in_scale``: the RMS of each logged state and input, (n_x + n_u,) (`mhe.ResidualSettings`' ``in_scale``);
        ``out_scale``: the RMS of the one-step residuals on the logged states (`state_residuals`) divided by ``h``,
        (n_x,), the units of dx/dt (its ``out_scale``).
    """
    z = torch.cat([recording.states, recording.inputs], dim=-1)
    res = state_residuals(model, recording) / recording.dt
    return {"in_scale": z.pow(2).mean(dim=0).sqrt().tolist(), "out_scale": np.sqrt((res ** 2).mean(axis=0)).tolist()}

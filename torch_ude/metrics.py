"""Evaluation shared by every trainer: field error (Eq. 9), recovered damping, rollouts; the noise estimate's error."""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import Tensor

from .calibration import calibrate
from .rk4 import rk4_rollout
from .systems.base import System, VectorField, check_states
from .systems.simulate import simulate

__all__ = [
    "field_error", "damping_estimate", "rollout_error", "evaluation_states", "evaluate_field", "residual_torques",
    "residual_forces", "noise_estimate_errors",
]

Field = Callable[[Tensor], Tensor]


def field_error(field: Field, true_field: VectorField, x: Tensor) -> float:
    """Relative field error ``||F - f*||_L2(X) / ||f*||_L2(X)`` over the states ``x`` (Eq. 9).

    Args:
        field: learned field, (N, n) -> (N, n).
        true_field: true field ``f*``, (N, n) -> (N, n).
        x: evaluation states, shape (N, n).

    Returns:
        The dimensionless relative error.
    """
    check_states(x, true_field.n_states)
    with torch.no_grad():
        f_true = true_field(x)
        diff = field(x) - f_true
        return float(torch.linalg.vector_norm(diff) / torch.linalg.vector_norm(f_true))


def damping_estimate(field: Field, known: VectorField, x: Tensor,
                     terms: tuple[tuple[int, int, float], ...]) -> list[float]:
    """Recovered damping: least-squares slope of the learned residual on the velocities.

    The residual is ``F(x) - f_known(x)``; for each ``(i, j, _)`` in ``terms``,
    ``c_hat = -<res_i, x_j> / <x_j, x_j>`` over the states ``x``.

    Args:
        field: learned field, (N, n) -> (N, n).
        known: the known model the field was trained with.
        x: evaluation states, shape (N, n).
        terms: from ``System.damping_terms(case)``.

    Returns:
        One ``c_hat`` per term, in 1/s.
    """
    check_states(x, known.n_states)
    with torch.no_grad():
        res = field(x) - known(x)
        out = []
        for i, j, _ in terms:
            v = x[:, j]
            out.append(float(-(res[:, i] * v).sum() / (v * v).sum()))
    return out


def rollout_error(field: Field, true_field: VectorField, x0: Tensor, horizon: float = 8.0, dt: float = 0.01,
                  substeps: int = 10) -> float:
    """Relative autonomous-rollout error of a learned field against the true plant.

    Both fields are integrated by RK4 from ``x0`` over ``horizon`` seconds; the error is
    ``||X - X*|| / ||X*||`` over all output times and channels.

    Args:
        field: learned (or known-only) field, (N, n) -> (N, n).
        true_field: the true plant's field.
        x0: initial states, shape (N, n).
        horizon: seconds (> 0).
        dt: output step in s.
        substeps: RK4 steps per output step.

    Returns:
        The dimensionless relative trajectory error.
    """
    check_states(x0, true_field.n_states, "x0")
    if not horizon > 0 or not dt > 0:
        raise ValueError(f"horizon and dt must be positive; got {horizon!r} and {dt!r}.")
    steps = round(horizon / dt)
    with torch.no_grad():
        ref = rk4_rollout(true_field, x0, dt, steps, substeps)
        out = rk4_rollout(field, x0, dt, steps, substeps)
        return float(torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref))


def noise_estimate_errors(system: System, noise: float, seed: int, seconds: float, duration: float,
                          fs: float = 1000.0) -> list[float]:
    """The relative error ``sigma_hat_i / sigma_i - 1`` of the noise estimate (Eq. 23, with its outlier
    screen, `torch_ude.calibration.calibrate`) per channel, against the simulated sensor's true noise.

    Args:
        system: the plant, simulated by `torch_ude.systems.simulate`.
        noise: relative noise level (>= 0).
        seed: seed of the excitation and the noise.
        seconds: the estimate reads the first ``seconds`` of the stream (the trainer's calibration phase).
        duration: the simulated stream in s (its noise is scaled by the RMS over ``min(duration, 60)`` s).
        fs: sample rate in Hz.

    Returns:
        One relative error per channel (n,), dimensionless.
    """
    rec = simulate(system, duration, fs=fs, noise=noise, seed=seed)
    n = int(round(seconds * fs))
    cal = calibrate(torch.as_tensor(rec.y[:n]), fs, segment=torch.as_tensor(rec.segment[:n]))
    return [float(s) / float(t) - 1.0 for s, t in zip(cal.sigma, rec.sigma)]


def evaluation_states(system: System, duration: float = 60.0, seed: int = 0, fs: float = 1000.0,
                      every: int = 10) -> dict[str, Tensor]:
    """The state sets the field error is reported on.

    A plant with an evaluation grid (the single pendulum's 41 x 41 grid) gives
    ``"grid"`` (the whole grid) and ``"visited"`` (its points inside the visited
    region). Otherwise both are the clean states of the plant's own trajectory from
    ``x0`` for ``duration`` s under ``seed``'s excitation, taken every ``every`` samples.

    Returns:
        ``{"grid": (G, n), "visited": (V, n)}`` float64 tensors.
    """
    grid = system.evaluation_grid()
    if grid is not None:
        return {"grid": grid, "visited": grid[system.visited_region(grid)]}
    rec = simulate(system, duration, fs=fs, noise=0.0, seed=seed)
    visited = torch.as_tensor(np.ascontiguousarray(rec.x[::every]))
    return {"grid": visited, "visited": visited}


def evaluate_field(field: Field, system: System, case: str, states: dict[str, Tensor]) -> dict[str, float | list]:
    """The metrics every trainer reports for a learned field.

    Args:
        field: the learned field, (N, n) -> (N, n).
        system: the plant.
        case: the case the field was trained on (its known model).
        states: from `evaluation_states`.

    Returns:
        ``e_field`` (on ``states["grid"]``), ``e_field_visited``, ``c_hat`` (first damping
        term) and ``c_hat_channels`` (all terms), all computed on the visited states
        for the damping.
    """
    true = system.true_field()
    known = system.known_field(case)
    c_hat = damping_estimate(field, known, states["visited"], system.damping_terms(case))
    return {
        "e_field": field_error(field, true, states["grid"]),
        "e_field_visited": field_error(field, true, states["visited"]),
        "c_hat": c_hat[0],
        "c_hat_channels": c_hat,
    }


def _joint_torques(known, x: Tensor, u: Tensor, accel: Tensor) -> Tensor:
    """Joint torques ``M(q) a`` (N, n_u) of accelerations ``a`` (N, n_u), ``M`` the inverse of the
    known model's input Jacobian rows of the accelerations."""
    inverse_mass = known.input_jacobian(x, u)[:, x.shape[1] - u.shape[1]:, :]
    return torch.linalg.solve(inverse_mass, accel)


def residual_torques(field, reference, known, logs: Sequence) -> dict:
    """The joint torques a trained field adds to its configured known model, against a reference model's.

    On the logs' measured states and recorded inputs, ``M(q) (F(x, u) - f_known(x, u))``: the learned
    residual plus any trained change of the physical parameters, ``f_known`` the known model at its
    configured constants and ``M`` its mass matrix (the inverse of its input Jacobian's acceleration
    rows), against the reference's ``M(q) (f_ref - f_known)`` (e.g. a lab model's friction and offset).

    Args:
        field: the trained `torch_ude.HybridField` (or any field with ``evaluate(x, u)``, ``dtype``).
        reference: a controlled field ``f_ref(x, u)`` (N, n), optionally with ``friction(velocity)``.
        known: the known model at its configured constants (a `torch_ude.systems.ControlledField` with
            ``input_jacobian``), e.g. the data module's ``system.known``.
        logs: `torch_ude.recorded.RecordedLog` whose segments give the states (N, n) and inputs (N, n_u).

    Returns:
        Per joint (lists, N m): ``rms_residual``, ``rms_reference``, ``rms_difference`` and, where the
        reference has a ``friction`` method, ``rms_reference_friction`` and ``rms_difference_friction``;
        and the torques themselves under ``"series"`` (``velocity``, ``residual``, ``reference`` and
        ``friction``, tensors (N, n_u)).
    """
    n = known.n_states
    y = torch.as_tensor(np.concatenate([s for log in logs for s in log.segments]), dtype=torch.float64)
    x, u = y[:, :n], y[:, n:]
    n_u = u.shape[1]
    with torch.no_grad():
        learned = field.evaluate(x.to(field.dtype), u.to(field.dtype)).to(torch.float64) - known(x, u)
        res = _joint_torques(known, x, u, learned[:, -n_u:])
        ref = _joint_torques(known, x, u, (reference(x, u) - known(x, u))[:, -n_u:])

    def rms(t: Tensor) -> list[float]:
        return torch.sqrt((t * t).mean(dim=0)).tolist()

    out = {"rms_residual": rms(res), "rms_reference": rms(ref), "rms_difference": rms(res - ref),
           "series": {"velocity": x[:, -n_u:], "residual": res, "reference": ref}}
    if hasattr(reference, "friction"):
        fric = -reference.friction(x[:, -n_u:])
        out.update({"rms_reference_friction": rms(fric), "rms_difference_friction": rms(res - fric)})
        out["series"]["friction"] = fric
    return out


def residual_forces(field, reference, known, logs: Sequence) -> dict:
    """`residual_torques` of a force-driven axis in N: its input-unit forces (V) times the known model's ``gain``.

    Args:
        field, reference, logs: as `residual_torques`.
        known: the known model at its configured constants, with ``gain`` (N per input unit), e.g. a
            `torch_ude.systems.LinearAxisModel`.

    Returns:
        ``rms_residual``, ``rms_reference``, ``rms_difference`` (lists, N) and ``series`` (``velocity`` (N, 1)
        in m/s, ``residual`` and ``reference`` (N, 1) in N).
    """
    gain = known.gain
    comp = residual_torques(field, reference, known, logs)
    out = {k: [gain * v for v in comp[k]] for k in ("rms_residual", "rms_reference", "rms_difference")}
    series = comp["series"]
    out["series"] = {"velocity": series["velocity"], "residual": gain * series["residual"],
                     "reference": gain * series["reference"]}
    return out

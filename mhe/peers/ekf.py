"""The extended Kalman filter of a `mhe.models.model.StateSpaceModel` (first stage of the EKF->PEM baseline).

The model of Eq. (1)-(2) as a filter: ``x_{k+1} = f_d(x_k, u_k, w_k)`` with ``w_k ~ N(0, Q)``
held over the sample in the units of ``dx/dt`` (as in the MHE's weights), ``y_k = C x_k + eta_k``
(or the model's output map ``h(x_k, u_k) + eta_k``, linearized at the prior, `mhe.models.output`) with
``eta_k ~ N(0, R)``. The Jacobians ``A = df_d/dx`` and ``G = df_d/dw`` at ``w = 0`` come from
CasADi (`mhe.models.casadi_model.CasadiDynamics`, the same discretization as the MHE), so the
prediction is ``P- = A P A^T + G Q G^T``; the update uses the Joseph form. A row after a
break of the recording (`mhe.data.recording.Recording.breaks`) restarts the filter from its prior.

The EKF->PEM baseline of the paper's Table 1 (Tedrake, Ch. 18) runs this filter with the
initial model and then fits the parameters to the frozen estimates (`mhe.peers.state_pem`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import casadi as cs
import numpy as np
import torch

from ..models.casadi_model import CasadiDynamics
from ..models.checks import require
from ..models.model import StateSpaceModel
from ..data.recording import Recording

__all__ = ["EKFSettings", "EKFResult", "ExtendedKalmanFilter"]


@dataclass(frozen=True)
class EKFSettings:
    """Noise model and prior of the filter, validated once.

    Attributes:
        process_std: q, standard deviations of ``w`` (Q = diag(q^2)), n_x numbers (units of dx/dt).
        measurement_std: r, standard deviations of ``eta`` (R = diag(r^2)), n_y numbers (output units).
        initial_mean: prior mean of ``x_0``, n_x numbers; its measured components are replaced
            by the first output.
        initial_std: prior standard deviations of ``x_0``, n_x positive numbers (state units).
    """

    process_std: tuple[float, ...]
    measurement_std: tuple[float, ...]
    initial_mean: tuple[float, ...]
    initial_std: tuple[float, ...]

    def __post_init__(self) -> None:
        for name in ("process_std", "measurement_std", "initial_mean", "initial_std"):
            object.__setattr__(self, name, tuple(float(v) for v in getattr(self, name)))
        require([(getattr(self, name) and not any(v <= 0 for v in getattr(self, name)),
                  f"{name} must be positive numbers; got {getattr(self, name)}.")
                 for name in ("process_std", "measurement_std", "initial_std")])
        if len(self.initial_mean) != len(self.initial_std):
            raise ValueError(f"initial_mean and initial_std need one number per state each; got "
                             f"{len(self.initial_mean)} and {len(self.initial_std)}.")


@dataclass(frozen=True)
class EKFResult:
    """What the filter estimated over a recording of T samples.

    Attributes:
        states: filtered estimates ``x^_{k|k}``, shape (T, n_x).
        covariances: their covariances ``P_{k|k}``, shape (T, n_x, n_x).
        predicted: one-step predictions ``x^_{k|k-1}`` (the prior at a restart), shape (T, n_x).
        innovations: ``y~_k - C x^_{k|k-1}``, shape (T, n_y).
        wall_s: wall time of the run in seconds.
    """

    states: np.ndarray
    covariances: np.ndarray
    predicted: np.ndarray
    innovations: np.ndarray
    wall_s: float


class ExtendedKalmanFilter:
    """An EKF of ``model`` at its current parameter values.

    Args:
        model: the state-space model (physics, residual or both); its values are read once.
        settings: noise model and prior (dimensions checked against the model).
        build_dir: folder for L4CasADi's code when the model has a neural residual.

    Raises:
        ValueError: if the settings' sizes do not match the model's ``n_x`` and ``n_y``.
    """

    def __init__(self, model: StateSpaceModel, settings: EKFSettings, build_dir: str | Path = "build/ekf") -> None:
        require([(len(getattr(settings, name)) == size, f"{name} needs {size} numbers for this model (n_x = "
                                                        f"{model.n_x}, n_y = {model.n_y}); got {len(getattr(settings, name))}.")
                 for name, size in (("process_std", model.n_x), ("initial_std", model.n_x),
                                    ("measurement_std", model.n_y))])
        dyn = CasadiDynamics(model, build_dir, name="ekf")
        sym = dyn.symbol
        x, u, p = sym.sym("x", model.n_x), sym.sym("u", model.n_u_step), sym.sym("p", dyn.n_p)
        w = sym.sym("w", model.n_w)
        nxt = dyn.step(x, u, w, p)
        zero = cs.DM.zeros(model.n_w)
        jac = cs.Function("ekf_jacobians", [x, u, w, p], [nxt, cs.jacobian(nxt, x), cs.jacobian(nxt, w)])
        self._predict = cs.Function("ekf_predict", [x, u, p], jac(x, u, zero, p), ["x", "u", "p"], ["x+", "A", "G"])
        self.p = CasadiDynamics.parameter_values(model)
        self.model, self.settings = model, settings
        xo, uo = cs.SX.sym("x", model.n_x), cs.SX.sym("u", model.n_u)
        h = dyn.output(xo, uo, CasadiDynamics.output_values(model))
        self._observe = cs.Function("ekf_output", [xo, uo], [h, cs.jacobian(h, xo)])  # y = C x or the output map
        self.Q = np.diag(np.square(settings.process_std))
        self.R = np.diag(np.square(settings.measurement_std))

    def _prior(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = np.array(self.settings.initial_mean)
        with torch.no_grad():
            x[list(self.model.measured)] = self.model.state_guess(torch.as_tensor(y)).numpy()
        return x, np.diag(np.square(self.settings.initial_std))

    def run(self, recording: Recording) -> EKFResult:
        """Filter the whole recording: update with ``y~_0``, then predict with ``u~_k`` and update with ``y~_{k+1}``.

        Args:
            recording: step inputs (T, n_u_step) (the model's hold, `mhe.models.hold`: ``u_k``, or ``[u_k, u_{k+1}]``
                for a paired hold, as in `mhe.identification.IdentificationProblem.recording`) and outputs
                (T, n_y) at the model's sample time.

        Returns:
            The filtered and predicted states, covariances and innovations.

        Raises:
            ValueError: for a recording of another sample time, output size or number of input columns.
        """
        shape = (recording.dt, recording.outputs.shape[1], recording.inputs.shape[1])
        if abs(shape[0] - self.model.dt) > 1e-12 * self.model.dt or shape[1:] != (self.model.n_y, self.model.n_u_step):
            raise ValueError(f"The recording has dt={shape[0]} s, {shape[1]} outputs and {shape[2]} input columns; the "
                             f"model needs dt={self.model.dt} s, {self.model.n_y} and {self.model.n_u_step} (its "
                             f"{self.model.hold.name} hold's step inputs: mhe.data.recording.held_inputs).")
        t0 = time.perf_counter()
        u = recording.inputs.detach().numpy()
        y = recording.outputs.detach().numpy()
        n, n_x = len(y), self.model.n_x
        states, covs = np.zeros((n, n_x)), np.zeros((n, n_x, n_x))
        predicted, innovations = np.zeros((n, n_x)), np.zeros_like(y)
        restarts = set(recording.breaks) | {0}
        eye, n_u = np.eye(n_x), self.model.n_u
        x, p_cov = self._prior(y[0])
        for k in range(n):
            if k in restarts:
                x, p_cov = self._prior(y[k])
            else:
                nxt, a, g = (v.full() for v in self._predict(x, u[k - 1], self.p))
                x = nxt[:, 0]
                p_cov = a @ p_cov @ a.T + g @ self.Q @ g.T
            predicted[k] = x
            h, c = (v.full() for v in self._observe(x, u[k, :n_u]))
            innovations[k] = y[k] - h[:, 0]
            s = c @ p_cov @ c.T + self.R
            gain = np.linalg.solve(s, c @ p_cov).T
            x = x + gain @ innovations[k]
            i_kc = eye - gain @ c
            p_cov = i_kc @ p_cov @ i_kc.T + gain @ self.R @ gain.T
            states[k], covs[k] = x, p_cov
        return EKFResult(states, covs, predicted, innovations, time.perf_counter() - t0)


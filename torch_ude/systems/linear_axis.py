"""A force-driven linear axis (the EMPS positioning system): ``M q'' = gtau vir - friction - offset``.

The electro-mechanical positioning system of the nonlinear system-identification benchmark
(Janot, Gautier, Brunot; ``../shared/data/emps``) is a prismatic joint driven by a motor
whose force is ``gtau * vir``, with ``vir`` the controller's output voltage, and measured by
position only. Its benchmark model (IDIM-LS, ``Script_IDIM_LS.m``) is
``M q'' = gtau vir - Fv q' - Fc sign(q') - offset``. Here the sign is smoothed to
``tanh(q' / v_c)`` so that the field is differentiable and an RK4 step stays stable at
1 kHz (``Fc / (M v_c) = 215 /s`` with the benchmark's values and ``v_c = 1 mm/s``).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import scipy.io
import scipy.signal
import torch
from torch import Tensor

from .controlled import ControlledField
from .parameters import PhysicalParameters

__all__ = ["LinearAxisModel", "EMPS_IDIM_LS", "idim_ls", "idim_ls_model", "pulse_steps"]

#: The EMPS benchmark's IDIM-LS values (kg, N s/m, N, N), as Simulation_EMPS_Validation.m states them (mhe's start).
EMPS_IDIM_LS = {"M": 95.1089, "Fv": 203.5034, "Fc": 20.3935, "offset": -3.1648}


class LinearAxisModel(PhysicalParameters, ControlledField):
    """``q' = v``, ``v' = (gain u - Fv v - Fc tanh(v / v_c) - offset) / M``.

    State ``x = (q, v)`` (m, m/s), input ``u = (vir,)`` (V; the motor force is ``gain * vir``
    in N). With the defaults (no friction, no offset) it is the known model ``M q'' = gtau vir``
    whose friction and offset a residual learns; with the IDIM-LS ``Fv``, ``Fc`` and ``offset``
    it is the benchmark's whole inverse-model fit (a reference, not the truth). Any of ``mass``,
    ``gain``, ``viscous``, ``coulomb`` and ``offset`` can be trained with the residual
    (``trainable``, `torch_ude.systems.parameters`; ``mass`` and ``gain`` enter only as their
    ratio, so train one of them). Float64 for verification, float32 where a device runs it,
    complex128 for complex-step checks.

    Args:
        mass: ``M`` in kg (> 0).
        gain: ``gtau`` in N/V (the EMPS files store 35.15).
        viscous: ``Fv`` in N s/m.
        coulomb: ``Fc`` in N.
        coulomb_velocity: ``v_c`` in m/s (> 0), the smoothing of ``sign(v)``.
        offset: force offset in N.
        trainable: the parameters to train and their bounds, e.g. ``{"mass": [50, 200]}``;
            None trains none. The bounds of ``mass`` must stay positive.

    Raises:
        ValueError: for a non-finite constant, a non-positive mass or ``v_c``, or bad trainable
            names or bounds.
    """

    n_states = 2
    n_inputs = 1
    invariant = (0,)  # no force depends on the position: the residual reads (v, u) only

    def __init__(self, mass: float = 95.1, gain: float = 35.15, viscous: float = 0.0, coulomb: float = 0.0,
                 coulomb_velocity: float = 1e-3, offset: float = 0.0,
                 trainable: dict[str, list[float]] | None = None) -> None:
        super().__init__()
        values = (("mass", mass), ("gain", gain), ("viscous", viscous), ("coulomb", coulomb),
                  ("coulomb_velocity", coulomb_velocity), ("offset", offset))
        for name, value in values:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number; got {value!r}.")
        for name, unit, value in (("mass", "M in kg", mass), ("coulomb_velocity", "v_c in m/s", coulomb_velocity)):
            if not value > 0:
                raise ValueError(f"{name} ({unit}) must be positive; got {value!r}.")
        if trainable and "coulomb_velocity" in trainable:
            raise ValueError("coulomb_velocity (the smoothing of sign(v)) is not trainable; train coulomb instead.")
        if trainable and "mass" in trainable and not (isinstance(trainable["mass"], (list, tuple))
                                                       and len(trainable["mass"]) == 2
                                                       and isinstance(trainable["mass"][0], (int, float))
                                                       and trainable["mass"][0] > 0):
            raise ValueError(f"the bounds of mass must be [low, high] with low > 0 (kg); got {trainable['mass']!r}.")
        self.init_parameters(dict(values), trainable)

    mass = property(lambda self: self.values()["mass"], doc="``M`` in kg (current value).")
    gain = property(lambda self: self.values()["gain"], doc="``gtau`` in N/V (current value).")
    viscous = property(lambda self: self.values()["viscous"], doc="``Fv`` in N s/m (current value).")
    coulomb = property(lambda self: self.values()["coulomb"], doc="``Fc`` in N (current value).")
    coulomb_velocity = property(lambda self: self.values()["coulomb_velocity"], doc="``v_c`` in m/s.")
    offset = property(lambda self: self.values()["offset"], doc="force offset in N (current value).")

    def init_args(self) -> dict:
        """The constructor arguments, with the current (trained) values."""
        return self.constructor_args()

    def _friction(self) -> bool:
        v = self._values
        return self.trainable or bool(v["viscous"] or v["coulomb"] or v["offset"])

    def _force(self, x: Tensor, u: Tensor, c: Mapping[str, float | Tensor]) -> Tensor:
        """``gain u - Fv v - Fc tanh(v / v_c) - offset``, (N,), with the constants ``c``
        (`PhysicalParameters.constants`: read once per call, as a rollout calls this per step)."""
        v = x[:, 1]
        force = c["gain"] * u[:, 0]
        if self._friction():
            force = force - c["viscous"] * v - c["coulomb"] * torch.tanh(v / c["coulomb_velocity"]) - c["offset"]
        return force

    def forward(self, x: Tensor, u: Tensor) -> Tensor:
        """``(v, (gain u - friction - offset) / M)``, shapes (N, 2), (N, 1) -> (N, 2) in m/s, m/s^2."""
        c = self.constants()
        return torch.stack((x[:, 1], self._force(x, u, c) / c["mass"]), dim=1)

    def _slope(self, v: Tensor) -> Tensor:
        """``(1 - tanh^2(v / v_c)) / v_c``, the derivative of the smoothed sign."""
        t = torch.tanh(v / self.value("coulomb_velocity"))
        return (1.0 - t * t) / self.value("coulomb_velocity")

    def jacobian(self, x: Tensor, u: Tensor) -> Tensor:
        """``[[0, 1], [0, -(Fv + Fc (1 - tanh^2(v / v_c)) / v_c) / M]]`` per state, (N, 2, 2)."""
        jac = x.new_zeros(x.shape[0], 2, 2)
        jac[:, 0, 1] = 1.0
        if self._friction():
            jac[:, 1, 1] = -(self.value("viscous") + self.value("coulomb") * self._slope(x[:, 1])) / self.value("mass")
        return jac

    def input_jacobian(self, x: Tensor, u: Tensor) -> Tensor:
        """``[[0], [gain / M]]`` per state, (N, 2, 1)."""
        jac = x.new_zeros(x.shape[0], 2, 1)
        jac[:, 1, 0] = self.value("gain") / self.value("mass")
        return jac

    def parameter_jacobian(self, x: Tensor, u: Tensor) -> Tensor:
        """``df/dtheta`` (`torch_ude.systems.parameters`), (N, 2, P): of ``v'`` only, ``-a / M^2``
        (``a`` the net force), ``u / M``, ``-v / M``, ``-tanh(v / v_c) / M`` and ``-1 / M`` for M,
        gain, Fv, Fc and the offset."""
        v, mass = x[:, 1], self.value("mass")
        return self.acceleration_columns(
            x, mass=-self._force(x, u, self.constants()) / mass ** 2, gain=u[:, 0] / mass, viscous=-v / mass,
            coulomb=-torch.tanh(v / self.value("coulomb_velocity")) / mass, offset=-torch.ones_like(v) / mass)

    def parameter_lie_jacobian(self, x: Tensor, u: Tensor, w: Tensor, udot: Tensor) -> Tensor:
        """``d/dtheta (J_x f w + J_u f udot)`` with ``w`` (N, 2) and ``udot`` (N, 1) held fixed,
        (N, 2, P): with ``b = -(Fv + Fc slope(v)) w_v + gain udot`` the acceleration row is
        ``b / M``, so ``-b / M^2``, ``udot / M``, ``-w_v / M``, ``-slope(v) w_v / M`` and 0 for
        M, gain, Fv, Fc and the offset."""
        v, mass, slope = x[:, 1], self.value("mass"), self._slope(x[:, 1])
        b = -(self.value("viscous") + self.value("coulomb") * slope) * w[:, 1] + self.value("gain") * udot[:, 0]
        return self.acceleration_columns(
            x, mass=-b / mass ** 2, gain=udot[:, 0] / mass, viscous=-w[:, 1] / mass,
            coulomb=-slope * w[:, 1] / mass, offset=torch.zeros_like(v))


def idim_ls(path: str | Path) -> dict:
    """The EMPS benchmark's IDIM-LS fit on a record, as Script_IDIM_LS.m computes it (`EMPS_IDIM_LS` from
    DATA_EMPS).

    ``qm`` filtered forward-backward by a 4th-order Butterworth at 100 Hz, central differences
    for ``q'`` and ``q''`` (``diffcent`` = `numpy.gradient`), 50 samples dropped at the start
    (the script drops 49 at the start and none at the end), every column and the force
    ``gtau vir`` decimated by 10 (`scipy.signal.decimate`: order-8 Chebyshev, zero phase, as
    MATLAB's ``decimate``; scipy keeps samples 0, 10, ..., MATLAB ends on the last one), then
    least squares of ``gtau vir = M q'' + Fv q' + Fc sign(q') + offset``.

    Args:
        path: a .mat record with ``qm`` (m), ``vir`` (V), ``gtau`` (N/V) at 1 kHz (DATA_EMPS.mat).

    Returns:
        ``M`` (kg), ``Fv`` (N s/m), ``Fc`` (N), ``offset`` (N), their standard deviations
        ``std`` (the script's ``std(error) sqrt(diag((X^T X)^-1))``), ``relative_error_percent``
        (``100 ||e|| / ||y||``), ``gtau`` (N/V) and ``samples`` (rows of the regression).
    """
    data = scipy.io.loadmat(path)
    qm, vir, gtau = data["qm"].ravel(), data["vir"].ravel(), float(data["gtau"].squeeze())
    fs = 1000.0
    b, a = scipy.signal.butter(4, 100.0 / (fs / 2))
    q = scipy.signal.filtfilt(b, a, qm)
    dq = np.gradient(q, 1.0 / fs)
    ddq = np.gradient(dq, 1.0 / fs)
    keep = slice(49, None)
    x = np.stack((ddq[keep], dq[keep], np.sign(dq[keep]), np.ones_like(dq[keep])), axis=1)
    x = np.stack([scipy.signal.decimate(x[:, j], 10) for j in range(4)], axis=1)
    y = scipy.signal.decimate(gtau * vir[keep], 10)
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    error = y - x @ beta
    std = error.std(ddof=1) * np.sqrt(np.diag(np.linalg.inv(x.T @ x)))
    names = ("M", "Fv", "Fc", "offset")
    return {**{k: float(v) for k, v in zip(names, beta)}, "std": {k: float(s) for k, s in zip(names, std)},
            "relative_error_percent": float(100 * np.linalg.norm(error) / np.linalg.norm(y)), "gtau": gtau,
            "samples": int(y.shape[0])}


def idim_ls_model(fit: Mapping[str, float], gain: float, coulomb_velocity: float = 1e-3) -> LinearAxisModel:
    """An IDIM-LS fit as a whole model ``M q'' = gtau vir - Fv q' - Fc tanh(q' / v_c) - offset``: a reference.

    Args:
        fit: ``M`` (kg), ``Fv`` (N s/m), ``Fc`` (N), ``offset`` (N), e.g. `idim_ls` or `EMPS_IDIM_LS`.
        gain: ``gtau`` in N/V.
        coulomb_velocity: ``v_c`` in m/s, the smoothing of ``sign(q')``.
    """
    return LinearAxisModel(mass=fit["M"], gain=gain, viscous=fit["Fv"], coulomb=fit["Fc"],
                           coulomb_velocity=coulomb_velocity, offset=fit["offset"])


def pulse_steps(path: str | Path) -> dict:
    """How ``vir`` steps at the onsets and ends of the force pulses of a record (DATA_EMPS_PULSES.mat).

    The record's voltage already holds its force pulses: ``vir`` steps where ``pulses_N`` turns on or off.

    Args:
        path: a .mat record with ``pulses_N`` and ``vir`` (V).

    Returns:
        ``onset`` and ``end``, each with ``count`` and the steps' ``mean_V`` and ``std_V`` (V).
    """
    data = scipy.io.loadmat(path)
    on = (data["pulses_N"].ravel() != 0).astype(int)
    vir = data["vir"].ravel()
    out = {}
    for name, edge in (("onset", 1), ("end", -1)):
        k = np.flatnonzero(np.diff(on) == edge) + 1
        step = vir[k] - vir[k - 1]
        out[name] = {"count": int(k.size), "mean_V": float(step.mean()), "std_V": float(step.std())}
    return out

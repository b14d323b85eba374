"""The dynamic single-track racing model of Section 4.1 with BayesRace ground truth.

States ``x = (vx, vy, omega)`` (m/s, m/s, rad/s), inputs ``u = (delta, gamma)``
(steering in rad, throttle/PWM in [-1, 1]). Forces (BayesRace / Deep Dynamics):

* slip angles ``alpha_f = delta - atan2(lf*omega + vy, vx)``, ``alpha_r = atan2(lr*omega - vy, vx)``;
* Pacejka Magic Formula lateral forces, front and rear,
  ``F_y = Sv + D sin(C atan(B a - E (B a - atan(B a))))`` with ``a = alpha + Sh``;
* drivetrain ``F_rx = (Cm1 - Cm2 vx) gamma - Cr0 - Cr2 vx^2``;
* ``vx' = (F_rx - F_fy sin delta)/m + vy omega``, ``vy' = (F_ry + F_fy cos delta)/m - vx omega``,
  ``omega' = (F_fy lf cos delta - F_ry lr)/Iz``.

By default 16 parameters are identified (`IDENTIFIED`): the Magic-Formula coefficients
B, C, D, Sh, Sv front and rear, the front curvature Ef, the 4 drivetrain coefficients
and the yaw inertia Iz. The rear curvature Er is not identifiable from (vx, omega) at
the slip angles a racing line produces (its term changes the rear force by under 1 %;
Cramer-Rao standard deviation 150 % of its value in ``benchmarks/mhe/vehicle_recovery.py``),
so it is not identified; the specs m, lf, lr are known (``../shared/data/README.md``).
BayesRace's code takes ``|vx|`` inside both ``atan2`` (so a car rolling backwards sees the
slip angles of one rolling forwards); ``abs_vx=True`` does the same, which the BayesRace files
need (ETHZMobil's ``dstates`` have ``vx < 0`` for 68 samples). The default ``abs_vx=False``
assumes ``vx > 0`` (our simulator runs at racing speeds) and keeps the field smooth; both are
equal wherever ``vx > 0``.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import SimpleNamespace

from .bounds import Bound, BoundedParameters
from .model import PhysicsField

__all__ = ["BAYESRACE_TRUTH", "BAYESRACE_BOUNDS", "IDENTIFIED", "SingleTrackVehicle"]

BAYESRACE_TRUTH: dict[str, float] = {
    "Bf": 5.579, "Cf": 1.2, "Df": 0.192, "Ef": -0.083, "Shf": -0.0013, "Svf": 0.00043,
    "Br": 5.3852, "Cr": 1.2691, "Dr": 0.1737, "Er": -0.019, "Shr": -0.00376, "Svr": 0.00091,
    "Cm1": 0.287, "Cm2": 0.0545, "Cr0": 0.0518, "Cr2": 0.00035,
    "Iz": 27.8e-6, "m": 0.041, "lf": 0.029, "lr": 0.033,
}
"""Ground truth of the BayesRace simulator (ORCA 1:43 car), SI units."""

BAYESRACE_BOUNDS: dict[str, Bound] = {
    "Bf": Bound(5.0, 30.0, log=True), "Br": Bound(5.0, 30.0, log=True), "Cf": Bound(0.5, 2.0, log=True),
    "Cr": Bound(0.5, 2.0, log=True), "Df": Bound(0.1, 0.9, log=True), "Dr": Bound(0.1, 0.9, log=True),
    "Ef": Bound(-2.0, 0.0), "Er": Bound(-2.0, 0.0),
    "Cm1": Bound(0.1435, 0.574, log=True), "Cm2": Bound(0.02725, 0.109, log=True),
    "Cr0": Bound(0.0259, 0.1036, log=True), "Cr2": Bound(1.75e-4, 7e-4, log=True), "Iz": Bound(1.39e-5, 5.56e-5, log=True),
    "Shf": Bound(-0.02, 0.02), "Shr": Bound(-0.02, 0.02), "Svf": Bound(-0.003, 0.003), "Svr": Bound(-0.003, 0.003),
}
"""Physically meaningful ranges used by Deep Dynamics; positive ones as sigmoid bounds on log p."""

IDENTIFIED: tuple[str, ...] = ("Bf", "Cf", "Df", "Ef", "Shf", "Svf", "Br", "Cr", "Dr", "Shr", "Svr",
                               "Cm1", "Cm2", "Cr0", "Cr2", "Iz")
"""The 16 parameters identified by default (all but Er and the specs m, lf, lr)."""


def _magic_formula(alpha, b, c, d, e, sh, sv, ops: SimpleNamespace):
    a = b * (alpha + sh)
    return sv + d * ops.sin(c * ops.atan(a - e * (a - ops.atan(a))))


class SingleTrackVehicle(PhysicsField):
    """Dynamic single-track model with Pacejka tyres and a drivetrain (Section 4.1).

    Args:
        values: parameter values by name (all of `BAYESRACE_TRUTH`'s names); defaults to
            the ground truth.
        identify: names to identify; the rest are fixed. Defaults to `IDENTIFIED`.
        bounds: bounds of identified parameters; defaults to `BAYESRACE_BOUNDS`.
        abs_vx: use ``|vx|`` inside the slip-angle ``atan2`` as BayesRace does (not smooth at
            ``vx = 0``); False uses ``vx``.
    """

    state_names = ("vx", "vy", "omega")
    input_names = ("delta", "gamma")

    def __init__(self, values: Mapping[str, float] | None = None, identify: Sequence[str] | None = IDENTIFIED,
                 bounds: Mapping[str, Bound] | None = None, abs_vx: bool = False) -> None:
        values = dict(BAYESRACE_TRUTH if values is None else values)
        missing = sorted(set(BAYESRACE_TRUTH) - set(values))
        if missing:
            raise ValueError(f"values is missing the parameters {missing}; give all of {sorted(BAYESRACE_TRUTH)}.")
        super().__init__(BoundedParameters(values, BAYESRACE_BOUNDS if bounds is None else bounds, identify))
        self.abs_vx = bool(abs_vx)

    def vector_field(self, x: Sequence, u: Sequence, p: Mapping[str, object], ops: SimpleNamespace) -> list:
        """Eq. of Section 4.1 on components; see the module docstring."""
        vx, vy, omega = x
        delta, gamma = u
        speed = ops.fabs(vx) if self.abs_vx else vx
        alpha_f = delta - ops.atan2(p["lf"] * omega + vy, speed)
        alpha_r = ops.atan2(p["lr"] * omega - vy, speed)
        f_fy = _magic_formula(alpha_f, p["Bf"], p["Cf"], p["Df"], p["Ef"], p["Shf"], p["Svf"], ops)
        f_ry = _magic_formula(alpha_r, p["Br"], p["Cr"], p["Dr"], p["Er"], p["Shr"], p["Svr"], ops)
        f_rx = (p["Cm1"] - p["Cm2"] * vx) * gamma - p["Cr0"] - p["Cr2"] * vx * vx
        sin_d, cos_d = ops.sin(delta), ops.cos(delta)
        return [
            (f_rx - f_fy * sin_d) / p["m"] + vy * omega,
            (f_ry + f_fy * cos_d) / p["m"] - vx * omega,
            (f_fy * p["lf"] * cos_d - f_ry * p["lr"]) / p["Iz"],
        ]

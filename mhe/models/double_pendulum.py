"""The DFKI double pendulum identified by PEM–MHE from its two angles (issue 35, item 3).

States ``x = (q1, q2, q1', q2')`` (rad, rad/s; ``q2`` relative to link 1), inputs ``u = (tau1, tau2)``
(N m, the recorded motor torques). The known physics is the lab's rigid-body model of
`torch_ude.systems.TorqueDoublePendulumModel`, written once for torch and CasADi
(`DoublePendulumPhysics`):

``M(q2) q'' = tau + G(q) - C(q, q') q' - F(q')``, ``F_i = b_i q_i' + cf_i atan(k q_i')``,

with the 2 x 2 mass matrix inverted in closed form. The link constants are the lab's model 3.1
(fixed); physics-only PEM–MHE identifies a chosen subset of the rotor inertia ``Ir`` and the
friction ``b1, b2, cf1, cf2`` (the terms jet matching leaves to its residual), started at the
lab's model 3.0 values (``model_3.0_parameters.yml``).

The Coulomb term is stiff near rest: with the lab's ``k = 100`` and its model-3.0 friction
(``cf1 = 0.093``, ``cf2 = 0.078`` N m) the largest eigenvalue of ``-dq''/dq'`` is about 805 /s, so
an RK4 step must be shorter than 3.5 ms. ``coulomb_slope`` (``k``, fixed) lets a config smooth it
instead (``configs/mhe_dfki_double_pendulum.yaml``: ``k = 10``, about 80 /s at the start, stable at
the 100 Hz grid of the jet-matching and RK4 rows); trial parameters beyond the stable range make
window solves fail, and the outer loop drops and counts them and rejects the trial. The logs are
read by `mhe.problems.torque_pendulum.LogsRecording` (four state columns, the two angles measured).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import SimpleNamespace

import torch

from torch_ude.systems.dfki_double_pendulum import MODEL_3_1, TorqueDoublePendulumModel

from .bounds import Bound, BoundedParameters
from .model import PhysicsField

__all__ = ["DOUBLE_PENDULUM_BOUNDS", "MODEL_3_0_FRICTION", "DoublePendulumPhysics"]

MODEL_3_0_FRICTION = {"Ir": 9.937281205437459e-05, "b1": 0.001, "b2": 0.001, "cf1": 0.093, "cf2": 0.078}
"""The lab's model 3.0 rotor inertia (kg m^2) and friction (N m s, N m): the start of identified ones."""

DOUBLE_PENDULUM_BOUNDS = {"Ir": Bound(0.0, 1e-3), "b1": Bound(0.0, 0.5), "b2": Bound(0.0, 0.5),
                          "cf1": Bound(0.0, 0.5), "cf2": Bound(0.0, 0.5)}
"""Ranges of the identified parameters (kg m^2, N m s, N m): about 10x the lab's model 3.0 Ir, 5x its Coulomb
friction and 500x its viscous friction."""


class DoublePendulumPhysics(PhysicsField):
    """The double pendulum's field (module doc), backend-neutral.

    Args:
        values: start (identified) or fixed values of ``Ir`` (kg m^2), ``b1``, ``b2`` (N m s), ``cf1``, ``cf2``
            (N m); missing ones default to `MODEL_3_0_FRICTION`.
        identify: names of the parameters to identify, within `DOUBLE_PENDULUM_BOUNDS`.
        links: the fixed link constants ``m1, m2, l1, r1, r2, I1, I2`` (kg, m, kg m^2); missing ones are the
            lab's model 3.1 (`torch_ude.systems.dfki_double_pendulum.MODEL_3_1`).
        gr: the gear ratio (fixed).
        gravity: ``g`` in m/s^2 (fixed).
        coulomb_slope: ``k`` in s/rad (> 0, fixed), the smoothing ``atan(k q')`` of ``sign(q')``; the lab's is 100.

    Raises:
        ValueError: for an unknown parameter or link name, a start value outside its bound, or ``k <= 0``.
    """

    state_names = ("q1", "q2", "q1dot", "q2dot")
    input_names = ("tau1", "tau2")

    def __init__(self, values: Mapping[str, float] | None = None, identify: Sequence[str] = (),
                 links: Mapping[str, float] | None = None, gr: float = 6.0, gravity: float = 9.81,
                 coulomb_slope: float = 100.0) -> None:
        start = dict(MODEL_3_0_FRICTION)
        unknown = sorted(set(values or {}) - set(start)) + sorted(set(identify) - set(start))
        if unknown:
            raise ValueError(f"unknown parameter(s) {unknown} of DoublePendulumPhysics; the parameters are "
                             f"{list(start)}.")
        bad = sorted(set(links or {}) - set(MODEL_3_1))
        if bad:
            raise ValueError(f"unknown link constant(s) {bad}; the links are {list(MODEL_3_1)}.")
        if not coulomb_slope > 0:
            raise ValueError(f"coulomb_slope (k in atan(k q'), s/rad) must be > 0; got {coulomb_slope}.")
        start.update({k: float(v) for k, v in (values or {}).items()})
        self.links = {**MODEL_3_1, **{k: float(v) for k, v in (links or {}).items()}}
        self.gr, self.gravity, self.coulomb_slope = float(gr), float(gravity), float(coulomb_slope)
        super().__init__(BoundedParameters(start, {k: DOUBLE_PENDULUM_BOUNDS[k] for k in identify}, tuple(identify)))

    def torch_model(self) -> TorqueDoublePendulumModel:
        """The current parameters as `torch_ude.systems.TorqueDoublePendulumModel` (equal field when ``k = 100``)."""
        with torch.no_grad():
            p = {k: float(v) for k, v in self.params().items()}
        return TorqueDoublePendulumModel(**self.links, gr=self.gr, g=self.gravity, **p)

    def vector_field(self, x: Sequence, u: Sequence, p: Mapping[str, object], ops: SimpleNamespace) -> list:
        """The double pendulum's field on components (module doc)."""
        q1, q2, w1, w2 = x
        L, gr, k = self.links, self.gr, self.coulomb_slope
        a = L["I1"] + L["I2"] + L["m2"] * L["l1"] ** 2 + (gr ** 2 + 1.0) * p["Ir"]
        c = L["m2"] * L["l1"] * L["r2"]
        d = L["I2"] - gr * p["Ir"]
        e = L["I2"] + gr ** 2 * p["Ir"]
        g1 = (L["m1"] * L["r1"] + L["m2"] * L["l1"]) * self.gravity
        g2 = L["m2"] * L["r2"] * self.gravity
        cq, s2, s12 = c * ops.cos(q2), ops.sin(q2), ops.sin(q1 + q2)
        m11, m12, m22 = a + 2.0 * cq, d + cq, e
        det = m11 * m22 - m12 * m12
        h1 = (u[0] - g1 * ops.sin(q1) - g2 * s12 + c * s2 * (2.0 * w1 * w2 + w2 * w2)
              - p["b1"] * w1 - p["cf1"] * ops.atan(k * w1))
        h2 = u[1] - g2 * s12 - c * s2 * w1 * w1 - p["b2"] * w2 - p["cf2"] * ops.atan(k * w2)
        return [w1, w2, (m22 * h1 - m12 * h2) / det, (m11 * h2 - m12 * h1) / det]

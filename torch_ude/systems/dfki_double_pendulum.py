"""The DFKI double pendulum's rigid-body model with both motor torques as recorded inputs.

The lab's model of its double pendulum (``dfki-ric-underactuated-lab/double_pendulum``,
``DoublePendulumPlant``, "UnderactuatedLecture" formulas), state
``x = (q1, q2, q1', q2')`` (rad, rad/s; ``q2`` relative to link 1), inputs
``u = (tau1, tau2)`` (N m, both motors):

    M(q2) q'' = tau + G(q) - C(q, q') q' - F(q')

    M = [[a + 2 c cos q2, d + c cos q2], [d + c cos q2, e]],
        a = I1 + I2 + m2 l1^2 + (gr^2 + 1) Ir,  c = m2 l1 r2,  d = I2 - gr Ir,  e = I2 + gr^2 Ir,
    C q' = (-c sin q2 (2 q1' q2' + q2'^2),  c sin q2 q1'^2),
    G = (-(m1 r1 + m2 l1) g sin q1 - m2 g r2 sin(q1 + q2),  -m2 g r2 sin(q1 + q2)),
    F = (b1 q1' + cf1 atan(100 q1'),  b2 q2' + cf2 atan(100 q2')).

With ``Ir = b = cf = 0`` (the defaults: the lab's model 3.1,
``../shared/data/dfki_double_pendulum/model_3.1_parameters.yml``) it is the rigid-body model
a residual learns the friction and rotor inertia on top of; with the lab's ``Ir``, ``b`` and
``cf`` (model 3.0) it is the lab's whole model, a reference. Both motors drive their joint
(``B = I``); the lab's torque limits (``tl``) are not part of the field.
"""
from __future__ import annotations

import math
from pathlib import Path

import torch
from torch import Tensor

from .controlled import GRAVITY, ControlledField

__all__ = ["TorqueDoublePendulumModel", "MODEL_3_1"]

#: The lab's rigid-body model 3.1 (design C.0), as in ``model_3.1_parameters.yml``.
MODEL_3_1 = {"m1": 0.6416937799349799, "m2": 0.563935954099688, "l1": 0.2, "r1": 0.2, "r2": 0.3212669909674605,
             "I1": 0.02671076499939512, "I2": 0.053878129629650884}

_NAMES = ("m1", "m2", "l1", "r1", "r2", "I1", "I2", "Ir", "gr", "b1", "b2", "cf1", "cf2", "g")


class TorqueDoublePendulumModel(ControlledField):
    """``q'' = M(q2)^-1 (tau + G(q) - C(q, q') q' - F(q'))`` with hand-written Jacobians (module doc).

    The state Jacobian is ``d q''/dx = M^-1 (dh/dx - dM/dx q'')`` with ``h`` the right-hand
    side, the input Jacobian ``d q''/du = M^-1``; the 2 x 2 inverse is written out, so the
    model runs in float64, float32 and complex128 (complex-step checks).

    Args:
        m1, m2: link masses in kg (> 0).
        l1: length of link 1 in m (> 0; ``l2`` does not enter the dynamics).
        r1, r2: distances of the links' centres of mass from their joints in m.
        I1, I2: link inertias about their joints in kg m^2 (> 0).
        Ir: rotor inertia of each motor in kg m^2 (>= 0), reflected through the gear ratio.
        gr: gear ratio.
        b1, b2: viscous friction in N m s.
        cf1, cf2: Coulomb friction in N m (smoothed by ``atan(100 q')``, the lab's form).
        g: gravity in m/s^2.

    Raises:
        ValueError: for a non-finite constant, a non-positive mass, length or inertia, a
            negative rotor inertia, or constants whose mass matrix is not positive definite.
    """

    n_states = 4
    n_inputs = 2
    periodic = (0, 1)

    def __init__(self, m1: float = MODEL_3_1["m1"], m2: float = MODEL_3_1["m2"], l1: float = MODEL_3_1["l1"],
                 r1: float = MODEL_3_1["r1"], r2: float = MODEL_3_1["r2"], I1: float = MODEL_3_1["I1"],
                 I2: float = MODEL_3_1["I2"], Ir: float = 0.0, gr: float = 6.0, b1: float = 0.0, b2: float = 0.0,
                 cf1: float = 0.0, cf2: float = 0.0, g: float = GRAVITY) -> None:
        super().__init__()
        values = dict(zip(_NAMES, (m1, m2, l1, r1, r2, I1, I2, Ir, gr, b1, b2, cf1, cf2, g)))
        for name, value in values.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number; got {value!r}.")
        for name in ("m1", "m2", "l1", "I1", "I2"):
            if not values[name] > 0:
                raise ValueError(f"{name} must be positive (a mass in kg, a length in m or an inertia in kg m^2); "
                                 f"got {values[name]!r}.")
        if Ir < 0:
            raise ValueError(f"Ir (rotor inertia in kg m^2) must be >= 0; got {Ir!r}.")
        self.params = {k: float(v) for k, v in values.items()}
        p = self.params
        self._a = p["I1"] + p["I2"] + p["m2"] * p["l1"] ** 2 + (p["gr"] ** 2 + 1.0) * p["Ir"]
        self._c = p["m2"] * p["l1"] * p["r2"]
        self._d = p["I2"] - p["gr"] * p["Ir"]
        self._e = p["I2"] + p["gr"] ** 2 * p["Ir"]
        self._g1 = (p["m1"] * p["r1"] + p["m2"] * p["l1"]) * p["g"]
        self._g2 = p["m2"] * p["r2"] * p["g"]
        # det M = e (a + 2 c cos q2) - (d + c cos q2)^2 > 0 for every q2 (its minimum over cos q2 in [-1, 1])
        det = [self._e * (self._a + 2 * self._c * k) - (self._d + self._c * k) ** 2 for k in (-1.0, 1.0)]
        if min(det) <= 0 or self._e <= 0:
            raise ValueError(f"the constants {p} give a mass matrix that is not positive definite for every q2 "
                             f"(det M at cos q2 = -1, 1: {det}); check the inertias and the centre of mass r2.")

    @classmethod
    def from_lab_file(cls, path: str | Path) -> TorqueDoublePendulumModel:
        """The model from one of the lab's parameter files (``model_3.1_parameters.yml`` etc.).

        Args:
            path: a YAML file of ``name: value`` lines with at least the constructor's names;
                other names (``l2``, the torque limits ``tl1``, ``tl2``) are ignored.

        Raises:
            FileNotFoundError: if the file does not exist.
            ValueError: if a name is missing or a value is not a number.
        """
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"the lab's parameter file {path} does not exist; the DFKI double-pendulum "
                                    f"files live in ../shared/data/dfki_double_pendulum (see its README).")
        values = {}
        for line in path.read_text().splitlines():
            name, sep, value = line.partition(":")
            if sep and name.strip() in _NAMES:
                try:
                    values[name.strip()] = float(value)
                except ValueError:
                    raise ValueError(f"{path}: {name.strip()} must be a number; got {value.strip()!r}.") from None
        missing = [n for n in _NAMES if n not in values]
        if missing:
            raise ValueError(f"{path} lacks the parameters {missing}; a lab parameter file names {list(_NAMES)}.")
        return cls(**values)

    def init_args(self) -> dict:
        """The constructor arguments."""
        return dict(self.params)

    def mass_matrix(self, q2: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The entries ``(M11, M12, M22)`` of the symmetric mass matrix at ``q2`` (N,), each (N,), kg m^2."""
        k = self._c * torch.cos(q2)
        return self._a + 2.0 * k, self._d + k, self._e + 0.0 * k

    def friction(self, qd: Tensor) -> Tensor:
        """The friction torques ``F(q')`` (N m), velocities (N, 2) in rad/s -> (N, 2)."""
        b = (self.params["b1"], self.params["b2"])
        cf = (self.params["cf1"], self.params["cf2"])
        return torch.stack([b[i] * qd[:, i] + cf[i] * torch.atan(100.0 * qd[:, i]) for i in range(2)], dim=1)

    def _solve(self, x: Tensor, u: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        """``q''`` (N, 2) and ``M^-1`` as (i11, i12, i22), (N,) each."""
        q1, q2, w1, w2 = x[:, 0], x[:, 1], x[:, 2], x[:, 3]
        m11, m12, m22 = self.mass_matrix(q2)
        det = m11 * m22 - m12 * m12
        i11, i12, i22 = m22 / det, -m12 / det, m11 / det
        s2, s12 = torch.sin(q2), torch.sin(q1 + q2)
        fric = self.friction(x[:, 2:])
        h1 = u[:, 0] - self._g1 * torch.sin(q1) - self._g2 * s12 + self._c * s2 * (2.0 * w1 * w2 + w2 * w2) - fric[:, 0]
        h2 = u[:, 1] - self._g2 * s12 - self._c * s2 * w1 * w1 - fric[:, 1]
        acc = torch.stack((i11 * h1 + i12 * h2, i12 * h1 + i22 * h2), dim=1)
        return acc, i11, i12, i22, s2

    def forward(self, x: Tensor, u: Tensor) -> Tensor:
        """``(q1', q2', q1'', q2'')``, shapes (N, 4), (N, 2) -> (N, 4)."""
        acc = self._solve(x, u)[0]
        return torch.cat((x[:, 2:], acc), dim=1)

    def jacobian(self, x: Tensor, u: Tensor) -> Tensor:
        """``d f/dx``, rows ``[0 I]`` and ``M^-1 (dh/dx - dM/dx q'')``, (N, 4), (N, 2) -> (N, 4, 4)."""
        acc, i11, i12, i22, s2 = self._solve(x, u)
        q1, q2, w1, w2 = x[:, 0], x[:, 1], x[:, 2], x[:, 3]
        c2, c12, c = torch.cos(q2), torch.cos(q1 + q2), self._c
        zero = torch.zeros_like(q1)
        dfric = [self.params[b] + 100.0 * self.params[cf] / (1.0 + (100.0 * w) ** 2)
                 for b, cf, w in (("b1", "cf1", w1), ("b2", "cf2", w2))]
        # dh/dx, rows h1, h2; columns q1, q2, q1', q2'
        dh1 = (-self._g1 * torch.cos(q1) - self._g2 * c12, -self._g2 * c12 + c * c2 * (2.0 * w1 * w2 + w2 * w2),
               2.0 * c * s2 * w2 - dfric[0], 2.0 * c * s2 * (w1 + w2))
        dh2 = (-self._g2 * c12, -self._g2 * c12 - c * c2 * w1 * w1, -2.0 * c * s2 * w1, zero - dfric[1])
        # dM/dq2 q'' (the only state that enters M)
        dm1 = -c * s2 * (2.0 * acc[:, 0] + acc[:, 1])
        dm2 = -c * s2 * acc[:, 0]
        jac = x.new_zeros(x.shape[0], 4, 4)
        jac[:, 0, 2] = 1.0
        jac[:, 1, 3] = 1.0
        for j in range(4):
            r1 = dh1[j] - dm1 if j == 1 else dh1[j]
            r2 = dh2[j] - dm2 if j == 1 else dh2[j]
            jac[:, 2, j] = i11 * r1 + i12 * r2
            jac[:, 3, j] = i12 * r1 + i22 * r2
        return jac

    def input_jacobian(self, x: Tensor, u: Tensor) -> Tensor:
        """``d f/du``: zeros over ``M(q2)^-1``, (N, 4), (N, 2) -> (N, 4, 2)."""
        m11, m12, m22 = self.mass_matrix(x[:, 1])
        det = m11 * m22 - m12 * m12
        jac = x.new_zeros(x.shape[0], 4, 2)
        jac[:, 2, 0], jac[:, 2, 1] = m22 / det, -m12 / det
        jac[:, 3, 0], jac[:, 3, 1] = -m12 / det, m11 / det
        return jac

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

Any constant but ``g`` can be trained with (or instead of) the residual (``trainable``,
`torch_ude.systems.parameters`): the rotor inertia and the four friction gains are what model
3.0 adds to 3.1. The constants reach the dynamics through ten lumped coefficients (``a``, ``c``,
``d``, ``e`` of ``M``; ``g1 = (m1 r1 + m2 l1) g``, ``g2 = m2 r2 g``; ``b1``, ``b2``, ``cf1``,
``cf2``), so the parameter Jacobians are written once per coefficient, ``d q''/dk = M^-1 (dh/dk
- dM/dk q'')``, and chained to the named constants.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor

from .controlled import GRAVITY, ControlledField, TorquePendulumModel
from .parameters import PhysicalParameters

__all__ = ["TorqueDoublePendulumModel", "MODEL_3_1", "dfki_lab_model"]

#: The lab's rigid-body model 3.1 (design C.0), as in ``model_3.1_parameters.yml``.
MODEL_3_1 = {"m1": 0.6416937799349799, "m2": 0.563935954099688, "l1": 0.2, "r1": 0.2, "r2": 0.3212669909674605,
             "I1": 0.02671076499939512, "I2": 0.053878129629650884}

_NAMES = ("m1", "m2", "l1", "r1", "r2", "I1", "I2", "Ir", "gr", "b1", "b2", "cf1", "cf2", "g")
#: The constants that must stay positive (a mass, a length or an inertia), within trainable bounds too.
_POSITIVE = ("m1", "m2", "l1", "I1", "I2")
_SHARPNESS = 100.0  # of the lab's atan(100 q') Coulomb form


def _partials(v: Callable[[str], float | Tensor]) -> dict[str, dict[str, float | Tensor]]:
    """``d k / d name`` for each lumped coefficient ``k`` (module doc) and each constant it reads."""
    return {"a": {"I1": 1.0, "I2": 1.0, "m2": v("l1") ** 2, "l1": 2.0 * v("m2") * v("l1"),
                  "Ir": v("gr") ** 2 + 1.0, "gr": 2.0 * v("gr") * v("Ir")},
            "c": {"m2": v("l1") * v("r2"), "l1": v("m2") * v("r2"), "r2": v("m2") * v("l1")},
            "d": {"I2": 1.0, "Ir": -v("gr"), "gr": -v("Ir")},
            "e": {"I2": 1.0, "Ir": v("gr") ** 2, "gr": 2.0 * v("gr") * v("Ir")},
            "g1": {"m1": v("r1") * v("g"), "r1": v("m1") * v("g"), "m2": v("l1") * v("g"), "l1": v("m2") * v("g")},
            "g2": {"m2": v("r2") * v("g"), "r2": v("m2") * v("g")},
            "b1": {"b1": 1.0}, "b2": {"b2": 1.0}, "cf1": {"cf1": 1.0}, "cf2": {"cf2": 1.0}}


def _lumped(v: Callable[[str], float | Tensor]) -> dict[str, float | Tensor]:
    """The lumped coefficients (module doc) from the constants ``v(name)``."""
    return {"a": v("I1") + v("I2") + v("m2") * v("l1") ** 2 + (v("gr") ** 2 + 1.0) * v("Ir"),
            "c": v("m2") * v("l1") * v("r2"), "d": v("I2") - v("gr") * v("Ir"), "e": v("I2") + v("gr") ** 2 * v("Ir"),
            "g1": (v("m1") * v("r1") + v("m2") * v("l1")) * v("g"), "g2": v("m2") * v("r2") * v("g")}


def _min_det(k: dict[str, float]) -> float:
    """The smallest ``det M`` over ``q2`` (at cos q2 = -1 or 1), or -1 when ``M22 <= 0``."""
    if k["e"] <= 0:
        return -1.0
    return min(k["e"] * (k["a"] + 2 * k["c"] * s) - (k["d"] + k["c"] * s) ** 2 for s in (-1.0, 1.0))


class TorqueDoublePendulumModel(PhysicalParameters, ControlledField):
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
        trainable: the constants to train and their bounds, e.g. ``{"Ir": [0, 1e-3], "cf1": [0, 0.3]}``
            (any name but ``g``); None trains none. The bounds of a mass, length or inertia must
            stay positive, those of ``Ir`` non-negative.

    Raises:
        ValueError: for a non-finite constant, a non-positive mass, length or inertia, a
            negative rotor inertia, constants whose mass matrix is not positive definite (at the
            configured values or at a corner of the trainable bounds), or bad trainable names or
            bounds.
    """

    n_states = 4
    n_inputs = 2
    periodic = (0, 1)

    def __init__(self, m1: float = MODEL_3_1["m1"], m2: float = MODEL_3_1["m2"], l1: float = MODEL_3_1["l1"],
                 r1: float = MODEL_3_1["r1"], r2: float = MODEL_3_1["r2"], I1: float = MODEL_3_1["I1"],
                 I2: float = MODEL_3_1["I2"], Ir: float = 0.0, gr: float = 6.0, b1: float = 0.0, b2: float = 0.0,
                 cf1: float = 0.0, cf2: float = 0.0, g: float = GRAVITY,
                 trainable: dict[str, list[float]] | None = None) -> None:
        super().__init__()
        values = dict(zip(_NAMES, (m1, m2, l1, r1, r2, I1, I2, Ir, gr, b1, b2, cf1, cf2, g)))
        for name, value in values.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number; got {value!r}.")
        for name in _POSITIVE:
            if not values[name] > 0:
                raise ValueError(f"{name} must be positive (a mass in kg, a length in m or an inertia in kg m^2); "
                                 f"got {values[name]!r}.")
        if Ir < 0:
            raise ValueError(f"Ir (rotor inertia in kg m^2) must be >= 0; got {Ir!r}.")
        if trainable and "g" in trainable:
            raise ValueError("g is not a trainable parameter of TorqueDoublePendulumModel (the masses and centres of "
                             "mass carry its scale); train those instead.")
        self.init_parameters(values, trainable)
        lows = dict(zip(self.trainable_names, self.p_low.tolist())) if self.trainable else {}
        for name, low in lows.items():
            if (name in _POSITIVE and not low > 0) or (name == "Ir" and low < 0):
                raise ValueError(f"the lower bound of {name} must be {'> 0' if name != 'Ir' else '>= 0'}; got {low!r}.")
        self._check_mass_matrix(values)

    def _check_mass_matrix(self, values: dict[str, float]) -> None:
        """Refuse constants (the configured ones and every corner of the trainable box) whose
        mass matrix is singular for some ``q2``."""
        boxes = [(float(lo), float(hi)) for lo, hi in zip(self.p_low, self.p_high)] if self.trainable else []
        for corner in itertools.chain([None], itertools.product(*boxes)):
            point = dict(values) if corner is None else values | dict(zip(self.trainable_names, corner))
            det = _min_det(_lumped(point.__getitem__))
            if det <= 0:
                where = "" if corner is None else f" at the corner {dict(zip(self.trainable_names, corner))} of the " \
                                                   "trainable bounds"
                raise ValueError(f"the constants {point} give a mass matrix that is not positive definite for every "
                                 f"q2{where} (smallest det M {det:.3g}); check the inertias and the centre of mass r2.")

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
        """The constructor arguments, with the current (trained) values."""
        return self.constructor_args()

    def mass_matrix(self, q2: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The entries ``(M11, M12, M22)`` of the symmetric mass matrix at ``q2`` (N,), each (N,), kg m^2."""
        return _mass(_lumped(self.constants().__getitem__), q2)

    def friction(self, qd: Tensor) -> Tensor:
        """The friction torques ``F(q')`` (N m), velocities (N, 2) in rad/s -> (N, 2)."""
        return _friction(self.constants(), qd)

    def _solve(self, x: Tensor, u: Tensor) -> tuple[Tensor, tuple[Tensor, Tensor, Tensor], dict, dict]:
        """``q''`` (N, 2), ``M^-1`` as (i11, i12, i22), (N,) each, the constants and the lumped coefficients."""
        const = self.constants()
        k = _lumped(const.__getitem__)
        q1, q2, w1, w2 = x[:, 0], x[:, 1], x[:, 2], x[:, 3]
        m11, m12, m22 = _mass(k, q2)
        det = m11 * m22 - m12 * m12
        inv = (m22 / det, -m12 / det, m11 / det)
        s2, s12 = torch.sin(q2), torch.sin(q1 + q2)
        fric = _friction(const, x[:, 2:])
        h1 = u[:, 0] - k["g1"] * torch.sin(q1) - k["g2"] * s12 + k["c"] * s2 * (2.0 * w1 * w2 + w2 * w2) - fric[:, 0]
        h2 = u[:, 1] - k["g2"] * s12 - k["c"] * s2 * w1 * w1 - fric[:, 1]
        return _apply(inv, h1, h2), inv, const, k

    def forward(self, x: Tensor, u: Tensor) -> Tensor:
        """``(q1', q2', q1'', q2'')``, shapes (N, 4), (N, 2) -> (N, 4)."""
        acc = self._solve(x, u)[0]
        return torch.cat((x[:, 2:], acc), dim=1)

    @staticmethod
    def _state_rows(x: Tensor, acc: Tensor, const: dict, k: dict) -> tuple[tuple, tuple]:
        """``dh/dx - dM/dx q''``: the rows for h1 and h2, four columns (q1, q2, q1', q2') of (N,) each."""
        q1, q2, w1, w2 = x[:, 0], x[:, 1], x[:, 2], x[:, 3]
        s2, c2, c12, c = torch.sin(q2), torch.cos(q2), torch.cos(q1 + q2), k["c"]
        zero = torch.zeros_like(q1)
        dfric = [const[f"b{i}"] + _SHARPNESS * const[f"cf{i}"] / (1.0 + (_SHARPNESS * w) ** 2)
                 for i, w in ((1, w1), (2, w2))]
        # dM/dq2 q'' (q2 is the only state that enters M)
        dm1 = -c * s2 * (2.0 * acc[:, 0] + acc[:, 1])
        dm2 = -c * s2 * acc[:, 0]
        r1 = (-k["g1"] * torch.cos(q1) - k["g2"] * c12, -k["g2"] * c12 + c * c2 * (2.0 * w1 * w2 + w2 * w2) - dm1,
              2.0 * c * s2 * w2 - dfric[0], 2.0 * c * s2 * (w1 + w2))
        r2 = (-k["g2"] * c12, -k["g2"] * c12 - c * c2 * w1 * w1 - dm2, -2.0 * c * s2 * w1, zero - dfric[1])
        return r1, r2

    def jacobian(self, x: Tensor, u: Tensor) -> Tensor:
        """``d f/dx``, rows ``[0 I]`` and ``M^-1 (dh/dx - dM/dx q'')``, (N, 4), (N, 2) -> (N, 4, 4)."""
        acc, inv, const, k = self._solve(x, u)
        r1, r2 = self._state_rows(x, acc, const, k)
        jac = x.new_zeros(x.shape[0], 4, 4)
        jac[:, 0, 2] = 1.0
        jac[:, 1, 3] = 1.0
        jac[:, 2:, :] = _apply(inv, torch.stack(r1, dim=1), torch.stack(r2, dim=1))
        return jac

    def input_jacobian(self, x: Tensor, u: Tensor) -> Tensor:
        """``d f/du``: zeros over ``M(q2)^-1``, (N, 4), (N, 2) -> (N, 4, 2)."""
        m11, m12, m22 = self.mass_matrix(x[:, 1])
        det = m11 * m22 - m12 * m12
        jac = x.new_zeros(x.shape[0], 4, 2)
        jac[:, 2, 0], jac[:, 2, 1] = m22 / det, -m12 / det
        jac[:, 3, 0], jac[:, 3, 1] = -m12 / det, m11 / det
        return jac

    def _coefficients(self, const: dict) -> tuple[list[str], Tensor]:
        """The lumped coefficients the trained constants move and ``D[c, p] = d k_c / d p``, (C, P)."""
        partials = _partials(const.__getitem__)
        used = [c for c, by_name in partials.items() if any(name in by_name for name in self.trainable_names)]
        dtype = self.theta.dtype
        rows = [torch.stack([torch.as_tensor(partials[c].get(name, 0.0), dtype=dtype) for name in self.trainable_names])
                for c in used]
        return used, torch.stack(rows)

    @staticmethod
    def _coefficient_terms(x: Tensor, used: list[str]) -> tuple[Tensor, Tensor]:
        """``dM/dk`` as (M11, M12, M22) and ``dh/dk`` as (h1, h2) per coefficient ``k`` of ``used``:
        (N, 3, C) and (N, 2, C)."""
        q1, q2, w1, w2 = x[:, 0], x[:, 1], x[:, 2], x[:, 3]
        zero, one = torch.zeros_like(q1), torch.ones_like(q1)
        s2, c2 = torch.sin(q2), torch.cos(q2)
        terms = {"a": ((one, zero, zero), (zero, zero)), "d": ((zero, one, zero), (zero, zero)),
                 "e": ((zero, zero, one), (zero, zero))}
        if "c" in used:
            terms["c"] = ((2.0 * c2, c2, zero), (s2 * (2.0 * w1 * w2 + w2 * w2), -s2 * w1 * w1))
        if "g1" in used:
            terms["g1"] = ((zero, zero, zero), (-torch.sin(q1), zero))
        if "g2" in used:
            s12 = torch.sin(q1 + q2)
            terms["g2"] = ((zero, zero, zero), (-s12, -s12))
        for i, w in ((1, w1), (2, w2)):
            pick = (lambda t: (-t, zero)) if i == 1 else (lambda t: (zero, -t))
            terms[f"b{i}"] = ((zero, zero, zero), pick(w))
            if f"cf{i}" in used:
                terms[f"cf{i}"] = ((zero, zero, zero), pick(torch.atan(_SHARPNESS * w)))
        dm = torch.stack([torch.stack(terms[c][0], dim=1) for c in used], dim=2)
        dh = torch.stack([torch.stack(terms[c][1], dim=1) for c in used], dim=2)
        return dm, dh

    @staticmethod
    def _coefficient_state_terms(x: Tensor, v: Tensor, used: list[str]) -> tuple[Tensor, Tensor]:
        """``d(dh/dx)/dk v`` as (h1, h2), (N, 2, C), and ``d(dM/dq2)/dk`` as a factor of ``(2, 1, 0)``
        (nonzero for ``c`` alone), (N, C), per coefficient ``k`` of ``used``."""
        q1, q2, w1, w2 = x[:, 0], x[:, 1], x[:, 2], x[:, 3]
        zero = torch.zeros_like(q1)
        s2 = torch.sin(q2)
        terms = {c: ((zero, zero), zero) for c in ("a", "d", "e")}
        if "c" in used:
            c2 = torch.cos(q2)
            dc1 = c2 * (2.0 * w1 * w2 + w2 * w2) * v[:, 1] + 2.0 * s2 * w2 * v[:, 2] + 2.0 * s2 * (w1 + w2) * v[:, 3]
            dc2 = -c2 * w1 * w1 * v[:, 1] - 2.0 * s2 * w1 * v[:, 2]
            terms["c"] = ((dc1, dc2), -s2)
        if "g1" in used:
            terms["g1"] = ((-torch.cos(q1) * v[:, 0], zero), zero)
        if "g2" in used:
            g2 = -torch.cos(q1 + q2) * (v[:, 0] + v[:, 1])
            terms["g2"] = ((g2, g2), zero)
        terms["b1"], terms["b2"] = ((-v[:, 2], zero), zero), ((zero, -v[:, 3]), zero)
        for i, w in ((1, w1), (2, w2)):
            if f"cf{i}" in used:
                t = -_SHARPNESS / (1.0 + (_SHARPNESS * w) ** 2) * v[:, 1 + i]
                terms[f"cf{i}"] = ((t, zero) if i == 1 else (zero, t), zero)
        dhv = torch.stack([torch.stack(terms[c][0], dim=1) for c in used], dim=2)
        dmq = torch.stack([terms[c][1] for c in used], dim=1)
        return dhv, dmq

    def _chain(self, x: Tensor, per_coefficient: Tensor, chain: Tensor) -> Tensor:
        """Derivatives of the accelerations per coefficient (N, 2, C) chained to ``theta`` -> (N, 4, P)."""
        out = x.new_zeros(x.shape[0], 4, len(self.trainable_names))
        n, c = per_coefficient.shape[0], per_coefficient.shape[2]
        out[:, 2:, :] = (per_coefficient.reshape(2 * n, c) @ chain.to(per_coefficient.dtype)).reshape(n, 2, -1)
        return self.scale_jacobian(out)

    @staticmethod
    def _acceleration_partials(dm: Tensor, dh: Tensor, acc: Tensor, inv: tuple) -> Tensor:
        """``d q''/dk = M^-1 (dh/dk - dM/dk q'')`` per coefficient, (N, 2, C)."""
        a0, a1 = acc[:, :1], acc[:, 1:]
        return _apply(inv, dh[:, 0] - dm[:, 0] * a0 - dm[:, 1] * a1, dh[:, 1] - dm[:, 1] * a0 - dm[:, 2] * a1)

    def parameter_jacobian(self, x: Tensor, u: Tensor) -> Tensor:
        """``df/dtheta`` (`torch_ude.systems.parameters`), (N, 4, P): of ``q''`` only,
        ``M^-1 (dh/dk - dM/dk q'')`` per lumped coefficient ``k``, chained to the constants."""
        acc, inv, const, _ = self._solve(x, u)
        used, chain = self._coefficients(const)
        dm, dh = self._coefficient_terms(x, used)
        return self._chain(x, self._acceleration_partials(dm, dh, acc, inv), chain)

    def parameter_lie_jacobian(self, x: Tensor, u: Tensor, v: Tensor, udot: Tensor) -> Tensor:
        """``d/dtheta (J_x f v + J_u f udot)`` with ``v`` (N, 4) and ``udot`` (N, 2) held fixed,
        (N, 4, P). The acceleration rows are ``L = M^-1 r``, ``r = (dh/dx - dM/dx q'') v + udot``, so
        ``dL/dk = M^-1 (dr/dk - dM/dk L)`` with ``dr/dk = d(dh/dx)/dk v - d(dM/dq2)/dk v_q2 q''
        - dM/dq2 v_q2 dq''/dk``, chained to the constants; the position rows (``v``'s rates) do not move."""
        acc, inv, const, k = self._solve(x, u)
        used, chain = self._coefficients(const)
        r1, r2 = self._state_rows(x, acc, const, k)
        lie = _apply(inv, sum(r1[j] * v[:, j] for j in range(4)) + udot[:, 0],
                     sum(r2[j] * v[:, j] for j in range(4)) + udot[:, 1])
        dm, dh = self._coefficient_terms(x, used)
        da = self._acceleration_partials(dm, dh, acc, inv)
        dhv, dmq = self._coefficient_state_terms(x, v, used)
        # d(dM/dq2 v_q2 q'')/dk: dM/dq2 = -c sin q2 (2, 1, 0) moves with c, and q'' with every k
        vq2, cs2 = v[:, 1:2], k["c"] * torch.sin(x[:, 1:2])
        e1 = vq2 * (dmq * (2.0 * acc[:, :1] + acc[:, 1:]) - cs2 * (2.0 * da[:, 0] + da[:, 1]))
        e2 = vq2 * (dmq * acc[:, :1] - cs2 * da[:, 0])
        l0, l1 = lie[:, :1], lie[:, 1:]
        out = _apply(inv, dhv[:, 0] - e1 - dm[:, 0] * l0 - dm[:, 1] * l1,
                     dhv[:, 1] - e2 - dm[:, 1] * l0 - dm[:, 2] * l1)
        return self._chain(x, out, chain)


def _mass(k: dict, q2: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``(M11, M12, M22)`` from the lumped coefficients at ``q2`` (N,), each (N,)."""
    cc = k["c"] * torch.cos(q2)
    return k["a"] + 2.0 * cc, k["d"] + cc, k["e"] + 0.0 * cc


def _friction(const: dict, qd: Tensor) -> Tensor:
    """``F(q')`` (N, 2) from the constants and the velocities (N, 2)."""
    return torch.stack([const[f"b{i + 1}"] * qd[:, i] + const[f"cf{i + 1}"] * torch.atan(_SHARPNESS * qd[:, i])
                        for i in range(2)], dim=1)


def dfki_lab_model(known: TorquePendulumModel | TorqueDoublePendulumModel,
                   folder: str | Path) -> tuple[TorquePendulumModel | TorqueDoublePendulumModel, dict]:
    """The DFKI lab's whole identified model beside its logs, a reference (not the truth), and its constants.

    Args:
        known: the known model a config trains on: a `TorquePendulumModel` (single pendulum) or a
            `TorqueDoublePendulumModel`.
        folder: the folder of the logs, e.g. ``../shared/data/dfki_pendulum``.

    Returns:
        For the single pendulum `TorquePendulumModel.from_lab_file` of ``system_identification.txt`` at the known
        model's gravity and ``{"J", "m*cx", "Fv", "Fc", "offset"}``; for the double pendulum the lab's model 3.0
        (``model_3.0_parameters.yml``: friction and rotor inertia added to model 3.1) and its ``init_args``.

    Raises:
        FileNotFoundError, ValueError: for a missing or unreadable lab file (the ``from_lab_file`` readers).
    """
    folder = Path(folder)
    if isinstance(known, TorqueDoublePendulumModel):
        model = TorqueDoublePendulumModel.from_lab_file(folder / "model_3.0_parameters.yml")
        return model, model.init_args()
    model = TorquePendulumModel.from_lab_file(folder / "system_identification.txt", known.gravity)
    return model, {"J": model.inertia, "m*cx": model.mass_com, "Fv": model.viscous, "Fc": model.coulomb,
                   "offset": model.offset}


def _apply(inv: tuple[Tensor, Tensor, Tensor], y1: Tensor, y2: Tensor) -> Tensor:
    """``M^-1 y`` from the inverse's entries (i11, i12, i22), (N,) each: ``y1``, ``y2`` (N,) -> (N, 2),
    or (N, K) columns -> (N, 2, K)."""
    i11, i12, i22 = (t if y1.ndim == 1 else t.unsqueeze(1) for t in inv)
    return torch.stack((i11 * y1 + i12 * y2, i12 * y1 + i22 * y2), dim=1)

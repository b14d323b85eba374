"""The single pendulum's physics, ``theta' = omega``, ``omega' = -k sin(theta) - c omega``, for torch and CasADi.

States ``x = (theta, omega)`` (rad, rad/s), no inputs; ``k = g_model / L`` (1/s^2) and damping ``c``
(1/s), the pendulum field of `torch_ude.systems.PendulumField` written once on an ``ops``
namespace (`PendulumPhysics`); `known_pendulum` is the known model of a plant and case. The
problem built on it (its stream and settings) is `mhe.problems.pendulum`.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import SimpleNamespace

from torch_ude.systems import PendulumField, System

from .bounds import Bound, BoundedParameters
from .model import PhysicsField

__all__ = ["DAMPING_BOUND", "PendulumPhysics", "known_pendulum"]

DAMPING_BOUND = Bound(0.0, 2.0)
"""Range of an identified damping ``c`` in 1/s (five times the plants' 0.40)."""


class PendulumPhysics(PhysicsField):
    """``theta' = omega``, ``omega' = -k sin(theta) - c omega``, backend-neutral.

    Args:
        k: ``g_model / L`` in 1/s^2 (fixed).
        c: damping in 1/s: the start value when identified, else the fixed value.
        identify_damping: identify ``c`` within `DAMPING_BOUND`.

    Raises:
        ValueError: for ``k <= 0``, or an identified start ``c`` outside `DAMPING_BOUND`.
    """

    state_names = ("theta", "omega")
    input_names = ()

    def __init__(self, k: float, c: float = 0.0, identify_damping: bool = False) -> None:
        if not k > 0:
            raise ValueError(f"k = g/L must be positive (1/s^2); got {k}.")
        super().__init__(BoundedParameters({"k": float(k), "c": float(c)}, {"c": DAMPING_BOUND},
                                           ("c",) if identify_damping else ()))

    def vector_field(self, x: Sequence, u: Sequence, p: Mapping[str, object], ops: SimpleNamespace) -> list:
        """The pendulum field on components (see the class docstring)."""
        theta, omega = x
        return [omega, -p["k"] * ops.sin(theta) - p["c"] * omega]


def known_pendulum(system: System, case: str, identify_damping: bool = False, damping_start: float = 0.1
                   ) -> PendulumPhysics:
    """The known model ``f_known`` of a pendulum plant and case as `PendulumPhysics`.

    Args:
        system: a plant whose known field is a `torch_ude.systems.PendulumField`
            (`torch_ude.systems.SinglePendulum`, `torch_ude.systems.FrictionPendulum`).
        case: the case of its known model (``"A"``, ``"B"``, ``"C"``).
        identify_damping: identify ``c`` (physics-only PEM–MHE), starting at ``damping_start``;
            otherwise ``c`` is the known model's (0 in Cases A and C).
        damping_start: start value of an identified ``c`` in 1/s.

    Raises:
        ValueError: for a plant whose known model is not the pendulum field (naming both), or
            an unknown case.
    """
    known = system.known_field(case)
    if not isinstance(known, PendulumField):
        raise ValueError(f"mhe's pendulum model is the single pendulum field; {type(system).__name__} case "
                         f"{case!r} has the known model {type(known).__name__}.")
    k = known.gravity / known.length
    return PendulumPhysics(k, damping_start if identify_damping else known.damping, identify_damping)

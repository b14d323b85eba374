"""The discretization ``f_d`` of ``f_c``: one explicit Runge-Kutta step of a Butcher tableau (Eq. 1-2).

``f_d(x, u, w) = x + h sum_j b_j k_j`` with stage derivatives
``k_j = f_c(x + h sum_{l<j} a_jl k_l, u(c_j), w)`` (``w`` held over the sample; the input at the
stage's node ``c_j`` as the model's input hold says, `mhe.models.hold`: ``u_k`` for a zero-order hold). Three
tableaus, chosen by name (`TABLEAUS`, the ``discretization`` of a `mhe.models.model.StateSpaceModel`
and of a `mhe.identification.IdentificationProblem`):

* ``"euler"``: explicit Euler, ``x + h f_c(x)``; BayesRace's ``dstates`` trajectories
  (the Deep Dynamics data) are this map of the single-track model at h = 0.02 s;
* ``"rk4"``: the classical fourth-order method (our simulator and the earlier configs);
* ``"rkf45"``: one step of Runge-Kutta-Fehlberg 4(5), propagating the fifth-order solution
  (Fehlberg's coefficients), with no step-size control: BayesRace's ``states`` trajectories.

The arithmetic is plain ``+`` and ``*`` on the stage values, so the same `ButcherTableau.step`
runs on torch tensors and on CasADi symbols, and `ButcherTableau.stage_state` /
`ButcherTableau.combine` give the lifted NLP of `mhe.estimator.problem` its stage constraints. The
classical RK4 is evaluated in the operation order of ``torch_ude.rk4.rk4_step`` (weights
1, 2, 2, 1 times ``h / 6``), so its numbers are bitwise those of the earlier code.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ButcherTableau", "EULER", "RK4", "RKF45", "TABLEAUS", "tableau"]


@dataclass(frozen=True)
class ButcherTableau:
    """An explicit Runge-Kutta method: ``k_j = f(x + h sum_{l<j} a_jl k_l)``, ``x+ = x + (h / scale) sum_j b_j k_j``.

    Attributes:
        name: the name in `TABLEAUS`.
        a: strictly lower-triangular coefficients, row ``j`` holding ``a_j0..a_j(j-1)``
            (row 0 empty).
        b: weights of the stage derivatives (times ``scale``).
        scale: the common denominator of ``b`` (6 for RK4 with ``b = (1, 2, 2, 1)``).
    """

    name: str
    a: tuple[tuple[float, ...], ...]
    b: tuple[float, ...]
    scale: float = 1.0

    def __post_init__(self) -> None:
        if len(self.a) != len(self.b) or any(len(row) != j for j, row in enumerate(self.a)):
            raise ValueError(f"A tableau needs one row of a per stage, row j with j entries, and one b per stage; "
                             f"got a={self.a}, b={self.b}.")

    @property
    def stages(self) -> int:
        """Number of stage derivatives (evaluations of ``f_c`` per step)."""
        return len(self.b)

    @property
    def nodes(self) -> tuple[float, ...]:
        """``c_j = sum_l a_jl``: the fraction of the step at which stage ``j`` evaluates ``f_c`` (where an
        input that varies over the sample is read, `mhe.models.hold`)."""
        return tuple(float(sum(row)) for row in self.a)

    def stage_state(self, x: Any, ks: Sequence[Any], j: int, h: float) -> Any:
        """The state ``x + h sum_{l<j} a_jl k_l`` at which stage ``j`` evaluates ``f_c``.

        Args:
            x: states, a tensor (B, n_x) or a CasADi column/matrix.
            ks: the stage derivatives ``k_0..k_{j-1}`` (at least), each shaped like ``x``.
            j: the stage.
            h: the step in seconds.
        """
        out = x
        for coef, k in zip(self.a[j], ks):
            if coef != 0.0:
                out = out + (coef * h) * k
        return out

    def combine(self, x: Any, ks: Sequence[Any], h: float) -> Any:
        """``x + (h / scale) sum_j b_j k_j``, the state one step later, shaped like ``x``."""
        total = None
        for weight, k in zip(self.b, ks):
            if weight != 0.0:
                term = k if weight == 1.0 else weight * k
                total = term if total is None else total + term
        return x + (h / self.scale) * total

    def step(self, field: Callable[[Any], Any], x: Any, h: float) -> Any:
        """One step of ``x' = field(x)`` over ``h`` seconds, for torch tensors or CasADi symbols."""
        return self.step_timed(lambda s, _c: field(s), x, h)

    def step_timed(self, field: Callable[[Any, float], Any], x: Any, h: float) -> Any:
        """One step of ``x' = field(x, c)`` over ``h`` seconds, ``c`` the stage's `nodes` entry (the time in
        the step as a fraction of ``h``): a field whose input varies over the sample (`mhe.models.hold`)."""
        ks: list[Any] = []
        for j, c in enumerate(self.nodes):
            ks.append(field(self.stage_state(x, ks, j, h), c))
        return self.combine(x, ks, h)


EULER = ButcherTableau("euler", ((),), (1.0,))
"""Explicit Euler."""

RK4 = ButcherTableau("rk4", ((), (0.5,), (0.0, 0.5), (0.0, 0.0, 1.0)), (1.0, 2.0, 2.0, 1.0), 6.0)
"""The classical fourth-order Runge-Kutta method."""

RKF45 = ButcherTableau(
    "rkf45",
    ((), (1 / 4,), (3 / 32, 9 / 32), (1932 / 2197, -7200 / 2197, 7296 / 2197),
     (439 / 216, -8.0, 3680 / 513, -845 / 4104), (-8 / 27, 2.0, -3544 / 2565, 1859 / 4104, -11 / 40)),
    (16 / 135, 0.0, 6656 / 12825, 28561 / 56430, -9 / 50, 2 / 55))
"""Runge-Kutta-Fehlberg 4(5), one step with the fifth-order weights (no error control)."""

TABLEAUS: dict[str, ButcherTableau] = {t.name: t for t in (EULER, RK4, RKF45)}
"""The discretizations by name."""


def tableau(name: str) -> ButcherTableau:
    """The `ButcherTableau` called ``name``.

    Raises:
        ValueError: for a name that is not in `TABLEAUS`.
    """
    if name not in TABLEAUS:
        raise ValueError(f"discretization must be one of {sorted(TABLEAUS)}; got {name!r}.")
    return TABLEAUS[name]

"""Bounded physical parameters as smooth maps of unconstrained ones (Section 4, implementation).

Each physical parameter ``p_j`` is stored as an unconstrained ``rho_j`` on which Adam
works; the value is ``p_j = lo + (hi - lo) * sigmoid(rho_j)`` for a two-sided bound
(with ``log=True`` and ``0 < lo``: ``p_j = lo * (hi / lo) ** sigmoid(rho_j)``, so that a
step in ``rho`` is a relative change of similar size for every such parameter),
``lo + softplus(rho_j)`` or ``hi - softplus(rho_j)`` for a one-sided bound, and
``rho_j`` itself when unbounded. Parameters not being identified are kept as fixed
buffers so that the physics sees one dictionary of values either way.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as tf
from torch import Tensor, nn

__all__ = ["Bound", "BoundedParameters", "clip_inside", "inverse_softplus"]


@dataclass(frozen=True)
class Bound:
    """Bounds of one physical parameter; ``None`` leaves that side open.

    Attributes:
        lower: lower bound, or None.
        upper: upper bound, or None.
        log: apply the sigmoid to ``log p`` (two-sided bounds with ``lower > 0`` only).
    """

    lower: float | None = None
    upper: float | None = None
    log: bool = False

    def __post_init__(self) -> None:
        if self.lower is not None and self.upper is not None and not self.lower < self.upper:
            raise ValueError(f"A bound needs lower < upper; got lower={self.lower}, upper={self.upper}.")
        if self.log and (self.lower is None or self.upper is None or self.lower <= 0):
            raise ValueError(f"log=True needs two bounds with 0 < lower; got lower={self.lower}, upper={self.upper}.")

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies strictly inside the bounds."""
        return (self.lower is None or value > self.lower) and (self.upper is None or value < self.upper)

    def clip(self, value: float, pad: float = 1e-6) -> float:
        """``value`` moved inside the bounds, ``pad`` of the range (two-sided) or ``pad`` (one-sided) from a bound.

        For a value of another data set's box that must become a start inside this bound (`to_raw`
        needs it strictly inside).
        """
        lo, hi = self.lower, self.upper
        margin = pad * (hi - lo) if lo is not None and hi is not None else pad
        if lo is not None:
            value = max(value, lo + margin)
        if hi is not None:
            value = min(value, hi - margin)
        return value

    def to_raw(self, value: float) -> float:
        """The unconstrained ``rho`` with ``from_raw(rho) == value`` (inverse sigmoid/softplus)."""
        lo, hi = self.lower, self.upper
        if self.log:
            lo, hi, value = math.log(lo), math.log(hi), math.log(value)
        if lo is not None and hi is not None:
            s = (value - lo) / (hi - lo)
            return math.log(s / (1.0 - s))
        if lo is not None:
            return inverse_softplus(value - lo)
        if hi is not None:
            return inverse_softplus(hi - value)
        return value

    def from_raw(self, raw: Tensor) -> Tensor:
        """The bounded value of an unconstrained ``rho`` (any shape)."""
        lo, hi = self.lower, self.upper
        if self.log:
            return torch.exp(math.log(lo) + math.log(hi / lo) * torch.sigmoid(raw))
        if lo is not None and hi is not None:
            return lo + (hi - lo) * torch.sigmoid(raw)
        if lo is not None:
            return lo + tf.softplus(raw)
        if hi is not None:
            return hi - tf.softplus(raw)
        return raw


def clip_inside(values: Mapping[str, float], bounds: Mapping[str, Bound], pad: float = 1e-6) -> dict[str, float]:
    """``values`` with each bounded one moved inside its bound (`Bound.clip`: ``pad`` of a two-sided range, ``pad``
    from a one-sided bound), so that a model can be built from them (`Bound.to_raw` needs them strictly inside).

    Args:
        values: parameter values by name (physical units); every name of ``bounds`` among them.
        bounds: the bounds by name (e.g. ``physics.params.bounds``, the identified parameters').
        pad: the share of a two-sided range kept between a value and its bound (0.01 to start 1 % inside).

    Returns:
        A new dict; names without a bound keep their values.
    """
    out = dict(values)
    for n, b in bounds.items():
        out[n] = b.clip(out[n], pad)
    return out


def inverse_softplus(v: float) -> float:
    """The ``rho`` with ``softplus(rho) == v`` for ``v > 0``, computed without overflow."""
    return v + math.log(-math.expm1(-v))


class BoundedParameters(nn.Module):
    """Named physical parameters, some identified (unconstrained ``raw``), others fixed.

    Args:
        values: initial values of all parameters, by name (physical units).
        bounds: bounds of the identified parameters, by name; a name missing here is
            unbounded.
        identify: names of the parameters to identify; the others stay at ``values``.
            None identifies all.

    Raises:
        ValueError: if a name in ``identify`` or ``bounds`` is unknown, or an initial
            value of an identified parameter lies on or outside its bounds.
    """

    def __init__(self, values: Mapping[str, float], bounds: Mapping[str, Bound] | None = None,
                 identify: Sequence[str] | None = None) -> None:
        super().__init__()
        bounds = dict(bounds or {})
        names = tuple(values)
        free = tuple(names if identify is None else identify)
        for label, given in (("identify", free), ("bounds", tuple(bounds))):
            unknown = [n for n in given if n not in values]
            if unknown:
                raise ValueError(f"{label} names unknown parameters {unknown}; the known ones are {list(names)}.")
        self.names = names
        self.free_names = tuple(n for n in names if n in free)
        self.fixed_names = tuple(n for n in names if n not in free)
        self.bounds = {n: bounds.get(n, Bound()) for n in self.free_names}
        for n in self.free_names:
            if not self.bounds[n].contains(float(values[n])):
                raise ValueError(f"The initial value of {n}, {values[n]}, must lie strictly inside its bounds "
                                 f"{self.bounds[n]}; move it inside or widen the bounds.")
        raw = [self.bounds[n].to_raw(float(values[n])) for n in self.free_names]
        self.raw = nn.Parameter(torch.tensor(raw, dtype=torch.float64))
        self.register_buffer("fixed", torch.tensor([float(values[n]) for n in self.fixed_names], dtype=torch.float64))

    def free_values(self) -> Tensor:
        """Values of the identified parameters in ``free_names`` order, shape (n_free,)."""
        return torch.stack([self.bounds[n].from_raw(self.raw[i]) for i, n in enumerate(self.free_names)]) \
            if self.free_names else self.raw

    def forward(self) -> dict[str, Tensor]:
        """All parameter values by name, each a 0-d tensor (physical units)."""
        out = dict(zip(self.free_names, self.free_values().unbind(0)))
        out.update(zip(self.fixed_names, self.fixed.unbind(0)))
        return {n: out[n] for n in self.names}

    def assign(self, values: Mapping[str, float]) -> None:
        """Set identified parameters to the given physical values (e.g. a perturbed start).

        Raises:
            ValueError: for an unknown or fixed name, or a value outside its bounds.
        """
        with torch.no_grad():
            for n, v in values.items():
                if n not in self.bounds:
                    raise ValueError(f"{n} is not an identified parameter; the identified ones are "
                                     f"{list(self.free_names)}.")
                if not self.bounds[n].contains(float(v)):
                    raise ValueError(f"{n}={v} lies outside its bounds {self.bounds[n]}.")
                self.raw[self.free_names.index(n)] = self.bounds[n].to_raw(float(v))

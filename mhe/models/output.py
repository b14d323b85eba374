"""Output maps ``y = h(x, u; p_y)`` of a `mhe.models.model.StateSpaceModel`: offsets, gains, saturation, any smooth map.

By default a model measures states directly, ``y = C x`` (Eq. 2, ``C`` selecting the ``measured``
states). A real sensor often does not: a level sensor reads volts with an offset and a gain
and clips at its range, a position is measured through a linkage. An `OutputMap` replaces
``C x`` by ``h(x, u; p_y)``, written once on components through an ``ops`` namespace like a
`mhe.models.model.PhysicsField` (torch for the KKT system and hypergradients, CasADi for the NLPs), with
named, bounded parameters ``p_y`` that the outer loop identifies beside ``theta``.

Where ``h`` enters (the MHE of Eq. 4 and the PEM objective of Eq. 5):

* the measurement constraints become ``y~_k - h(x_k, u_k; p_y) - F eta_k = 0`` (k = 1..N-1);
* the prediction residual becomes ``r = h(x^_N, u~_N; p_y) - y~_N`` (Eq. 9), so ``J`` depends on
  ``p_y`` both through the MHE's solution and directly: the hypergradient gains the term
  ``sum_i (dh/dp_y)^T r_i`` (`mhe.estimator.kkt`), and the Gauss-Newton residual Jacobian ``dr/dp_y``
  (`mhe.outer.gauss_newton`);
* ``u`` is the input at the sample (``u~_k``, the first ``n_u`` columns of a step's input row);
  a map that does not read it (``feedthrough = False``, the default) works on any windows.

Each output still names the state it observes (``measured``): the MHE's first guess puts that
state at `OutputMap.state_guess` of the output (the inverse of an invertible map), and the
arrival box of a measured state is the range of those guesses (`mhe.estimator.arrival`).

`SensorOutput` is the common case: per output ``y_j = sat_j(g_j x_{m_j} + o_j)``, a trainable
or fixed offset and gain, and an optional saturation smoothed over ``width``
(`mhe.models.smooth.saturate`), so the KKT system stays well posed where the sensor clips.
"""
from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from types import SimpleNamespace

import torch
from torch import Tensor, nn

from .bounds import Bound, BoundedParameters
from .checks import require
from .ops import TORCH_OPS
from .smooth import saturate

__all__ = ["OutputMap", "SensorOutput"]


class OutputMap(nn.Module, abc.ABC):
    """A smooth output ``y = h(x, u; p_y)`` with named, bounded parameters.

    Subclasses implement `output` and, for a first guess better than the output itself, `state_guess`.

    Args:
        measured: the state each output observes, one distinct index per output.
        parameters: the map's parameters, identified and fixed (None: none).

    Attributes:
        feedthrough: whether ``h`` reads the input (class attribute; False: ``y = h(x; p_y)``).

    Raises:
        ValueError: for an empty or repeated ``measured``.
    """

    feedthrough: bool = False

    def __init__(self, measured: Sequence[int], parameters: BoundedParameters | None = None) -> None:
        super().__init__()
        measured = tuple(int(i) for i in measured)
        if not measured or len(set(measured)) != len(measured) or min(measured) < 0:
            raise ValueError(f"measured must list one distinct state index (>= 0) per output; got {list(measured)}.")
        self.measured = measured
        self.params = parameters if parameters is not None else BoundedParameters({})

    @property
    def n_y(self) -> int:
        """Number of outputs."""
        return len(self.measured)

    @abc.abstractmethod
    def output(self, x: Sequence, u: Sequence, p: Mapping[str, object], ops: SimpleNamespace) -> list:
        """``h`` on components, backend-neutral.

        Args:
            x: state components, tensors of shape (B,) or CasADi scalars.
            u: input components at the sample, alike (empty unless ``feedthrough``).
            p: the map's parameter values by name.
            ops: `mhe.models.ops.TORCH_OPS` or ``mhe.models.casadi_model.CASADI_OPS``.

        Returns:
            The ``n_y`` output components.
        """

    def forward(self, x: Tensor, u: Tensor | None = None) -> Tensor:
        """``h(x, u)`` for batches, (..., n_x), (..., n_u) or None -> (..., n_y)."""
        if self.feedthrough and u is None:
            raise ValueError(f"{type(self).__name__} reads the input (feedthrough), so its output needs u; got None.")
        us = [] if u is None or not self.feedthrough else list(u.unbind(-1))
        out = self.output(list(x.unbind(-1)), us, self.params(), TORCH_OPS)
        return torch.stack(torch.broadcast_tensors(*out), dim=-1)

    def state_guess(self, y: Tensor) -> Tensor:
        """Values of the ``measured`` states that give (about) the outputs ``y``, (..., n_y) -> (..., n_y): the
        MHE's first guess and the range of the arrival box. The default is ``y`` itself."""
        return y


class SensorOutput(OutputMap):
    """``y_j = sat_j(g_j x_{m_j} + o_j)``: an offset and a gain per output and an optional smooth saturation.

    The parameters are named ``offset_j`` and ``gain_j`` (j the output's index); each is fixed at its
    start value unless named in ``identify``.

    Args:
        measured: the state ``m_j`` each output reads.
        offset: start values of the offsets, one per output (None: zeros).
        gain: start values of the gains, one per output, nonzero (None: ones).
        identify: the parameters to identify, e.g. ``("offset_0", "gain_0")`` (default: none).
        bounds: bounds of identified parameters by name (a missing one is unbounded).
        limits: per output ``(lo, hi)`` of the sensor's range (either may be None) or None for no
            saturation; None for the whole list: no output saturates.
        width: the width of the saturation's rounded corners (`mhe.models.smooth.saturate`), output units.

    Raises:
        ValueError: for sizes that do not match ``measured``, a zero gain, an empty range, a
            non-positive width, or parameter names, bounds and start values that
            `mhe.models.bounds.BoundedParameters` rejects.
    """

    def __init__(self, measured: Sequence[int], offset: Sequence[float] | None = None,
                 gain: Sequence[float] | None = None, identify: Sequence[str] = (),
                 bounds: Mapping[str, Bound] | None = None,
                 limits: Sequence[Sequence[float | None] | None] | None = None, width: float = 1e-2) -> None:
        n = len(tuple(measured))
        offset = [0.0] * n if offset is None else [float(v) for v in offset]
        gain = [1.0] * n if gain is None else [float(v) for v in gain]
        limits = [None] * n if limits is None else [None if lim is None else tuple(lim) for lim in limits]
        require([(len(offset) == n, f"offset needs one entry per output ({n}); got {offset}."),
                 (len(gain) == n, f"gain needs one entry per output ({n}); got {gain}."),
                 (0.0 not in gain, f"every output gain must be nonzero; got {gain}."),
                 (len(limits) == n, f"limits needs one entry per output ({n}); got {limits}.")])
        for lim in limits:
            if lim is not None and (len(lim) != 2 or (None not in lim and not lim[0] < lim[1])):
                raise ValueError(f"Each output's limits must be (lo, hi) with lo < hi (either may be None); got {lim}.")
        if not width > 0:
            raise ValueError(f"width (of the saturation's corners, output units) must be positive; got {width}.")
        values = {f"offset_{j}": offset[j] for j in range(n)} | {f"gain_{j}": gain[j] for j in range(n)}
        super().__init__(measured, BoundedParameters(values, bounds, tuple(identify)))
        self.limits = tuple(limits)
        self.width = float(width)

    def output(self, x: Sequence, u: Sequence, p: Mapping[str, object], ops: SimpleNamespace) -> list:
        """The outputs on components (see the class docstring)."""
        out = []
        for j, (m, lim) in enumerate(zip(self.measured, self.limits)):
            y = p[f"gain_{j}"] * x[m] + p[f"offset_{j}"]
            out.append(y if lim is None else saturate(y, lim[0], lim[1], self.width, ops))
        return out

    def state_guess(self, y: Tensor) -> Tensor:
        """``(clip(y) - o_j) / g_j``, ``y`` clipped to each output's range (a clipped reading says only that the
        state is beyond the limit)."""
        p = self.params()
        cols = []
        for j, lim in enumerate(self.limits):
            v = y[..., j]
            if lim is not None:
                v = v.clamp(min=lim[0], max=lim[1])
            cols.append((v - p[f"offset_{j}"].detach()) / p[f"gain_{j}"].detach())
        return torch.stack(cols, dim=-1)

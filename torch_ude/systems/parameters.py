"""Trainable physical parameters of a known model: ``f_known(x, u; p)`` with named, bounded ``p``.

A known model whose constants are uncertain (an inertia, a friction gain, a torque offset)
lets the trainers fit them with the residual: the config names the free ones and their
bounds, e.g. for `torch_ude.systems.TorquePendulumModel`::

    known:
      class_path: torch_ude.systems.TorquePendulumModel
      init_args: {inertia: 0.0626, trainable: {inertia: [0.02, 0.2], offset: [-0.5, 0.5]}}

Parametrization: ``p_i = p0_i + s_i theta_i`` with ``p0`` the configured value, ``s_i`` half
the width of its bounds and ``theta`` a trainable vector that starts at zero, so every
parameter moves in units of its own range and one learning rate suits all (the optimizer
sees ``theta``). After each optimizer step `PhysicalParameters.project` clamps ``p`` back
into its bounds (projected gradient).

A model that supports this derives from `PhysicalParameters`, reads every constant through
`PhysicalParameters.value` (a float when fixed, a 0-dim tensor when trainable) and
implements, for the trainable names in order (``(B, n, P)`` each, hand-written):

* ``parameter_jacobian``: ``df/dp``;
* ``parameter_lie_jacobian``: ``d/dp (J_x f v + J_u f udot)`` with ``v``, ``udot`` held
  fixed, the part of the Lie derivative's gradient that the parameters touch directly
  (`torch_ude.field.HybridField.physical_vjp`).

Float64 for verification, float32 where a device would run it, complex128 for complex-step
checks (``theta`` complex).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch
from torch import Tensor, nn

__all__ = ["PhysicalParameters"]


class PhysicalParameters(nn.Module):
    """Named constants of a known model, some of them trainable within bounds (module doc).

    Args (of `init_parameters`):
        values: every constant the model reads by name, with its configured value.
        trainable: the names to train, each with its bounds ``[low, high]`` (low < high,
            finite, holding the configured value); None or empty trains none.

    Attributes:
        trainable_names: the trained names, in the order of ``theta`` and of the Jacobians.
        theta: the trainable vector (a parameter of shape (P,)); absent when nothing is trained.
    """

    def init_parameters(self, values: Mapping[str, float], trainable: Mapping[str, Sequence[float]] | None) -> None:
        """Record the constants and register ``theta`` for the trainable ones.

        Raises:
            ValueError: for an unknown name, bounds that are not two finite numbers with
                low < high, or bounds that exclude the configured value.
        """
        self._values = {k: float(v) for k, v in values.items()}
        trainable = dict(trainable or {})
        unknown = [k for k in trainable if k not in self._values]
        if unknown:
            raise ValueError(f"{type(self).__name__} has no physical parameter {unknown[0]!r} to train; its "
                             f"parameters are {sorted(self._values)}.")
        self.trainable_names = tuple(trainable)
        lows, highs = [], []
        for name, bounds in trainable.items():
            ok = isinstance(bounds, Sequence) and not isinstance(bounds, str) and len(bounds) == 2 and all(
                isinstance(b, (int, float)) and not isinstance(b, bool) and math.isfinite(b) for b in bounds)
            if not ok or not bounds[0] < bounds[1]:
                raise ValueError(f"the bounds of {name} must be two finite numbers [low, high] with low < high; got "
                                 f"{bounds!r}.")
            if not bounds[0] <= self._values[name] <= bounds[1]:
                raise ValueError(f"the bounds [{bounds[0]:g}, {bounds[1]:g}] of {name} exclude its configured value "
                                 f"{self._values[name]:g}; widen them or change the value.")
            lows.append(float(bounds[0]))
            highs.append(float(bounds[1]))
        self._index = {name: i for i, name in enumerate(self.trainable_names)}
        if self.trainable_names:
            p = len(self.trainable_names)
            self.register_buffer("p0", torch.tensor([self._values[k] for k in self.trainable_names],
                                                    dtype=torch.float64))
            self.register_buffer("p_low", torch.tensor(lows, dtype=torch.float64))
            self.register_buffer("p_high", torch.tensor(highs, dtype=torch.float64))
            self.theta = nn.Parameter(torch.zeros(p, dtype=torch.float64))

    @property
    def trainable(self) -> bool:
        """Whether any physical parameter is trained."""
        return bool(self.trainable_names)

    def spans(self) -> Tensor:
        """``s``, half the width of each trainable parameter's bounds, (P,)."""
        return 0.5 * (self.p_high - self.p_low)

    def value(self, name: str) -> float | Tensor:
        """The constant ``name``: its float when fixed, ``p0 + s theta`` (0-dim tensor) when trained."""
        i = self._index.get(name)
        if i is None:
            return self._values[name]
        return self.p0[i] + 0.5 * (self.p_high[i] - self.p_low[i]) * self.theta[i]

    def constants(self) -> dict[str, float | Tensor]:
        """Every constant as `value` gives it, computed at once (one vector operation for the
        trained ones): a model that reads many constants per call reads them from here."""
        if not self.trainable:
            return self._values
        p = self.p0 + self.spans() * self.theta
        return self._values | {name: p[i] for name, i in self._index.items()}

    def values(self) -> dict[str, float]:
        """Every constant's current value, as floats (trained ones included)."""
        out = {}
        for k in self._values:
            v = self.value(k)
            out[k] = float(v.detach().real) if isinstance(v, Tensor) else v
        return out

    def trainable_spec(self) -> dict[str, list[float]] | None:
        """The ``trainable`` argument that rebuilds this model (None when nothing is trained)."""
        if not self.trainable:
            return None
        return {k: [float(lo), float(hi)] for k, lo, hi in zip(self.trainable_names, self.p_low, self.p_high)}

    @torch.no_grad()
    def project(self) -> None:
        """Clamp every trained parameter into its bounds (after an optimizer step)."""
        if self.trainable:
            s = self.spans().to(self.theta.dtype)
            low = (self.p_low.to(self.theta.dtype) - self.p0.to(self.theta.dtype)) / s
            high = (self.p_high.to(self.theta.dtype) - self.p0.to(self.theta.dtype)) / s
            torch.clamp(self.theta, low, high, out=self.theta)

    def scale_jacobian(self, jac: Tensor) -> Tensor:
        """A Jacobian in ``p`` (..., P) turned into one in ``theta``: each column times ``s_i``."""
        return jac * self.spans().to(jac.dtype)

    def acceleration_columns(self, x: Tensor, **terms: Tensor) -> Tensor:
        """A Jacobian in ``theta`` of a mechanical model ``x = (q, q')`` whose trained parameters
        enter only the accelerations (the second half of the rows): ``terms[name]`` (N,) or
        (N, n / 2) per trained name (d/dp of the accelerations), scaled by ``s`` -> (N, n, P)."""
        n = x.shape[1]
        out = x.new_zeros(x.shape[0], n, len(self.trainable_names))
        for i, name in enumerate(self.trainable_names):
            term = terms[name]
            out[:, n // 2:, i] = term if term.ndim == 2 else term.unsqueeze(1)
        return self.scale_jacobian(out)

    def constructor_args(self) -> dict:
        """Every constant's current value, and ``trainable`` when something is trained: the
        arguments that rebuild the model as it stands (the trained model after training)."""
        args = self.values()
        if self.trainable:
            args["trainable"] = self.trainable_spec()
        return args

"""The network's input map ``z = phi(x, u)``: scaled states, angles on the circle, scaled inputs.

The residual network of a `torch_ude.field.HybridField` never reads raw states. Each state
channel ``x_i`` enters as ``x_i / s_in_i`` (``s_in`` the calibrated state RMS), except the
states the plant declares periodic (angles, in rad), which enter as the pair
``(sin x_i, cos x_i)``: ``x_i`` and ``x_i + 2 pi`` then give the same network input, so a
pendulum that has turned over ten times is not extrapolation for the network although its
unwrapped angle is far outside what training saw. States the plant declares invariant (a
cyclic coordinate its dynamics do not depend on, such as the position of a linear axis whose
friction depends on the speed only) are not read at all: a residual that cannot see them
cannot extrapolate in them. Recorded inputs follow as ``u_k / s_u_k``.

Columns of ``z`` (width ``n - q + p + n_u`` for ``p`` periodic and ``q`` invariant states):
``[x_j / s_in_j for the other j in order, sin x_i for the periodic i in order,
cos x_i for the same i, u_k / s_u_k]``. Without periodic or invariant states this is exactly
``[x / s_in, u / s_u]``, computed with the same operations as before they existed, so such
fields give the same bits.

The map is elementwise per source channel, so its Jacobian is known in closed form from
``z`` itself (``d sin x / dx = cos x``, the cos column; ``d cos x / dx = -sin x``): the
forward tangent (`InputMap.tangent`) and the pull-back of a cotangent (`InputMap.pullback`)
need no other cache. Everything works in float64, float32 and complex128 (complex-step
checks).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = ["InputMap", "check_periodic"]


def check_periodic(periodic: object, n_states: int, where: str = "periodic") -> tuple[int, ...]:
    """Validate the indices of periodic (angle) or invariant states.

    Args:
        periodic: a sequence of distinct integer state indices in ``[0, n_states)``.
        n_states: the state dimension ``n``.
        where: the name of the setting, for the message.

    Returns:
        The indices, sorted, as a tuple.

    Raises:
        TypeError: if ``periodic`` is not a sequence of integers.
        ValueError: for an index out of range or repeated.
    """
    if isinstance(periodic, (str, bytes)) or not isinstance(periodic, Sequence):
        raise TypeError(f"{where} must be a list of state indices (the angles, in rad); got {periodic!r}.")
    out = []
    for i in periodic:
        if isinstance(i, bool) or not isinstance(i, int):
            raise TypeError(f"{where} must hold integer state indices; got {i!r} in {list(periodic)}.")
        if not 0 <= i < n_states:
            raise ValueError(f"{where} index {i} is out of range: the plant has {n_states} states (indices 0 to "
                             f"{n_states - 1}); got {list(periodic)}.")
        out.append(int(i))
    if len(set(out)) != len(out):
        raise ValueError(f"{where} names a state twice; got {list(periodic)}.")
    return tuple(sorted(out))


class InputMap:
    """``z = phi(x, u)`` with its tangent and pull-back (module doc).

    Args:
        n_states: ``n``.
        n_inputs: ``n_u`` (0 for an autonomous field).
        periodic: indices of the periodic states (angles in rad), validated by `check_periodic`.
        invariant: indices of the states the residual does not read (module doc).

    Attributes:
        width: columns of ``z``, ``n - q + p + n_u``.
        state_width: the columns that come from the states, ``n - q + p``.
        periodic: the periodic state indices, sorted.
        invariant: the unread state indices, sorted.

    Raises:
        ValueError: for an index out of range, repeated, both periodic and invariant, or
            when no state is left to read.
    """

    def __init__(self, n_states: int, n_inputs: int = 0, periodic: Sequence[int] = (),
                 invariant: Sequence[int] = ()) -> None:
        self.n_states, self.n_inputs = int(n_states), int(n_inputs)
        self.periodic = check_periodic(periodic, self.n_states)
        self.invariant = check_periodic(invariant, self.n_states, "invariant")
        both = sorted(set(self.periodic) & set(self.invariant))
        if both:
            raise ValueError(f"state {both[0]} is declared both periodic and invariant; a state the residual does "
                             f"not read cannot be read as an angle.")
        if len(self.invariant) == self.n_states:
            raise ValueError(f"all {self.n_states} states are declared invariant: the residual would read no state.")
        self.plain = tuple(i for i in range(self.n_states) if i not in self.periodic and i not in self.invariant)
        p = len(self.periodic)
        self.state_width = self.n_states - len(self.invariant) + p
        self.width = self.state_width + self.n_inputs
        self._plain = torch.tensor(self.plain, dtype=torch.long)
        self._per = torch.tensor(self.periodic, dtype=torch.long)
        k = len(self.plain)
        self._sin = slice(k, k + p)
        self._cos = slice(k + p, k + 2 * p)

    def columns(self, state_names: Sequence[str], input_names: Sequence[str] = ()) -> list[str]:
        """Readable names of the columns of ``z``, e.g. ``["qdot/s", "sin(q)", "cos(q)", "tau/s"]``."""
        return ([f"{state_names[i]}/s" for i in self.plain] + [f"sin({state_names[i]})" for i in self.periodic]
                + [f"cos({state_names[i]})" for i in self.periodic] + [f"{name}/s" for name in input_names])

    def __call__(self, x: Tensor, u: Tensor | None, in_scale: Tensor, input_scale: Tensor | None) -> Tensor:
        """``z``, (B, n) states [and (B, n_u) inputs] -> (B, width)."""
        if not (self.periodic or self.invariant):
            return x / in_scale if u is None else torch.cat((x / in_scale, u / input_scale), dim=1)
        angles = x[:, self._per]
        parts = [x[:, self._plain] / in_scale[self._plain], torch.sin(angles), torch.cos(angles)]
        if u is not None:
            parts.append(u / input_scale)
        return torch.cat(parts, dim=1)

    def tangent(self, z: Tensor, v: Tensor, udot: Tensor | None, in_scale: Tensor,
                input_scale: Tensor | None) -> Tensor:
        """``zdot = (dz/dx) v + (dz/du) udot`` at ``z``, (B, width), (B, n) [, (B, n_u)] -> (B, width).

        For a field with inputs, ``udot`` None means inputs held fixed (a state tangent).
        """
        if not (self.periodic or self.invariant):
            if self.n_inputs == 0:
                return v / in_scale
            rate = torch.zeros_like(z[:, self.n_states:]) if udot is None else udot / input_scale
            return torch.cat((v / in_scale, rate), dim=1)
        w = v[:, self._per]
        parts = [v[:, self._plain] / in_scale[self._plain], z[:, self._cos] * w, -z[:, self._sin] * w]
        if self.n_inputs:
            parts.append(torch.zeros_like(z[:, self.state_width:]) if udot is None else udot / input_scale)
        return torch.cat(parts, dim=1)

    def pullback(self, z: Tensor, zbar: Tensor, in_scale: Tensor) -> Tensor:
        """The state cotangent ``(dz/dx)^T zbar`` at ``z``, (B, width), (B, width) -> (B, n).

        The input columns' cotangent is dropped: inputs are data.
        """
        if not (self.periodic or self.invariant):
            return (zbar if self.n_inputs == 0 else zbar[:, : self.n_states]) / in_scale
        xbar = zbar.new_zeros(zbar.shape[0], self.n_states)
        xbar[:, self._plain] = zbar[:, : len(self.plain)] / in_scale[self._plain]
        xbar[:, self._per] = zbar[:, self._sin] * z[:, self._cos] - zbar[:, self._cos] * z[:, self._sin]
        return xbar

"""The trust envelope: where the residual saw data, and a fade to the physics outside it.

A UDE's residual is only trained where the data went. Outside, a tanh network (and above
all its linear term) extrapolates freely, and a hybrid model can do worse than its own
physics. The trust envelope records the region the network's inputs covered during
training and multiplies the residual by a fade ``w(z)`` that is 1 inside that region and
falls smoothly to 0 outside it, so the model falls back to ``f_known`` where no data was:
``N(x, u) = w(z) s_out MLP(z)``, ``z = phi(x, u)`` the network's input
(`torch_ude.input_map`).

Representation: an axis-aligned box ``[low_j, high_j]`` per column of ``z``, widened by a
fade band of width ``margin_j`` on each side. Why a box:

* it is exact and cheap to record from a stream (a running minimum and maximum per
  channel of every jet the sample buffer was offered, `torch_ude.reservoir.SampleBuffer`),
  on the host and in the C trainer alike (``2 (n + n_u)`` numbers), and it needs no
  stored data at evaluation;
* the fade of a box has closed-form derivatives of every order, so the hand-written jets,
  VJPs and parameter gradients, the CasADi export and the C port stay exact;
* it names the extrapolation a user meets first on a real machine: a torque, a speed or
  an angle beyond anything the log held. Its limit: a state whose channels are each in
  range, in a combination never seen (a corner of the box), counts as inside.

In ``z`` the non-periodic columns are channels over their calibrated RMS, so the box and
its margin are in units of that RMS; the periodic columns are ``sin q`` and ``cos q``
(`envelope_from_span` turns an angle interval into their exact ranges).

The fade per column is ``s(t_j)``, ``t_j`` the distance past the box edge over the margin,
``s(t) = 1 - (10 t^3 - 15 t^4 + 6 t^5)`` on ``[0, 1]`` (1 before, 0 after): ``s`` and its
first two derivatives are continuous everywhere, so the field is C^2 and its Lie
derivative C^1. The fade is the product over the columns. Float64, float32 and complex128
(complex-step checks: the branch is chosen on the real part).
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from .input_map import InputMap

__all__ = ["fade", "fade_weight", "outside", "envelope_from_span", "describe_envelope", "install_span",
           "DEFAULT_MARGIN", "MIN_MARGIN"]

#: The fade band on each side of the box, as a fraction of the box's width per column. Half the
#: width: a smooth residual's extrapolation just past the data is usually still right (friction
#: keeps its form a little beyond the fastest speed seen), and the residual is gone at 1.5 times
#: the range. Measured on the extrapolating splits of the DFKI rigs and on a simulated friction
#: pendulum against 0.1, 0.25, 1 and 2 (RESULTS.md, "Trust outside the data").
DEFAULT_MARGIN = 0.5
#: The narrowest fade band, in ``z`` units (an RMS of the channel, or a unit of sin / cos).
MIN_MARGIN = 0.05


def _real(t: Tensor) -> Tensor:
    return t.real if t.is_complex() else t


def _column_fades(z: Tensor, low: Tensor, high: Tensor, margin: Tensor) -> tuple[Tensor, ...]:
    """Per column: the distance ``t`` into the band (clipped at 1), its fade ``s = 1 - smoothstep(t)``
    and the masks above / below the box and at or past the band's end, (B, d) each."""
    low, high, margin = _real(low), _real(high), _real(margin)
    zr = _real(z)
    above, below = zr > high, zr < low
    t = torch.where(above, (z - high) / margin, torch.where(below, (low - z) / margin, torch.zeros_like(z)))
    far = _real(t) >= 1.0
    t = torch.where(far, torch.ones_like(t), t)
    t2 = t * t
    return t, 1.0 - t2 * t * (10.0 - 15.0 * t + 6.0 * t2), above, below, far


def fade_weight(z: Tensor, low: Tensor, high: Tensor, margin: Tensor) -> Tensor:
    """The fade ``w(z)`` alone, (B, 1): bit for bit `fade`'s first output without its gradient
    (a rollout or a score needs only the value). Arguments as `fade`'s."""
    s = _column_fades(z, low, high, margin)[1]
    return _products_before(s)[:, -1:] * s[:, -1:]


def _products_before(s: Tensor) -> Tensor:
    """``prod_{k < j} s_k`` per column ``j``, (B, d) (torch's cumprod; the same order in `fade` and
    `fade_weight`, so that their ``w`` agree bit for bit)."""
    return torch.cumprod(torch.cat((torch.ones_like(s[:, :1]), s[:, :-1]), dim=1), dim=1)


def fade(z: Tensor, low: Tensor, high: Tensor, margin: Tensor) -> tuple[Tensor, Tensor]:
    """The fade ``w(z)`` and its gradient (module doc).

    Args:
        z: network inputs, (B, d).
        low, high: the box, (d,) each, ``low <= high``.
        margin: the fade band per column, (d,), > 0.

    Returns:
        ``(w, dw)``: ``w`` (B, 1) in [0, 1] and ``dw = dw/dz`` (B, d).
    """
    t, s, above, below, far = _column_fades(z, low, high, margin)
    low, high, margin = _real(low), _real(high), _real(margin)
    dt = torch.where(above, 1.0 / margin, torch.where(below, -1.0 / margin, torch.zeros_like(margin))).to(z.dtype)
    t2 = t * t
    ds = torch.where(far, torch.zeros_like(t), -30.0 * t2 * (1.0 - t) * (1.0 - t))
    before = _products_before(s)
    after = torch.flip(torch.cumprod(torch.flip(torch.cat((s[:, 1:], torch.ones_like(s[:, :1])), dim=1), [1]),
                                     dim=1), [1])
    w = before[:, -1:] * s[:, -1:]
    return w, before * after * ds * dt


def outside(z: Tensor, low: Tensor, high: Tensor) -> Tensor:
    """Which rows of ``z`` (B, d) lie outside the box ``[low, high]`` on any column, (B,) bool."""
    zr = _real(z)
    return ((zr < _real(low)) | (zr > _real(high))).any(dim=1)


def _sin_cos_range(a: float, b: float) -> tuple[float, float, float, float]:
    """The exact ranges ``(sin_lo, sin_hi, cos_lo, cos_hi)`` of sin and cos over the angles ``[a, b]``."""
    if b - a >= 2.0 * math.pi:
        return -1.0, 1.0, -1.0, 1.0
    points = [a, b] + [k * math.pi / 2 for k in range(math.ceil(a / (math.pi / 2)), math.floor(b / (math.pi / 2)) + 1)]
    sines, cosines = [math.sin(p) for p in points], [math.cos(p) for p in points]
    return min(sines), max(sines), min(cosines), max(cosines)


def envelope_from_span(low: Tensor, high: Tensor, input_map: InputMap, in_scale: Tensor,
                       input_scale: Tensor | None, fraction: float = DEFAULT_MARGIN) -> tuple[Tensor, Tensor, Tensor]:
    """The box and fade band in ``z`` from the raw channel ranges training saw.

    Args:
        low, high: the smallest and largest value of each channel in the jets training used,
            states then inputs, in the plant's units, (n + n_u,) each.
        input_map: the field's input map.
        in_scale: ``s_in`` (n,); input_scale: ``s_u`` (n_u,) or None.
        fraction: the fade band as a fraction of the box's width per column (> 0); never
            narrower than `MIN_MARGIN`.

    Returns:
        ``(low_z, high_z, margin_z)``, each (width,), in the dtype of ``in_scale``.

    Raises:
        ValueError: for non-finite ranges (no jet was seen), ``low > high``, wrong sizes, or
            a fraction that is not positive.
    """
    n, n_u = input_map.n_states, input_map.n_inputs
    low, high = torch.as_tensor(low, dtype=torch.float64), torch.as_tensor(high, dtype=torch.float64)
    if low.shape != (n + n_u,) or high.shape != (n + n_u,):
        raise ValueError(f"the envelope needs the range of each of the {n + n_u} channels; got shapes "
                         f"{tuple(low.shape)} and {tuple(high.shape)}.")
    if not (bool(torch.isfinite(low).all()) and bool(torch.isfinite(high).all())):
        raise ValueError("the envelope's channel ranges are not finite: training saw no jet (a run with no updates "
                         "has no envelope); train first, or turn the envelope off.")
    if bool((low > high).any()):
        raise ValueError(f"the envelope's ranges must have low <= high per channel; got {low.tolist()} and "
                         f"{high.tolist()}.")
    if not (isinstance(fraction, (int, float)) and math.isfinite(fraction) and fraction > 0):
        raise ValueError(f"the envelope's margin must be a positive fraction of its width; got {fraction!r}.")
    s = torch.as_tensor(in_scale, dtype=torch.float64)
    lo = [float(low[i] / s[i]) for i in input_map.plain]
    hi = [float(high[i] / s[i]) for i in input_map.plain]
    ranges = [_sin_cos_range(float(low[i]), float(high[i])) for i in input_map.periodic]
    lo += [r[0] for r in ranges] + [r[2] for r in ranges]
    hi += [r[1] for r in ranges] + [r[3] for r in ranges]
    if n_u:
        su = torch.as_tensor(input_scale, dtype=torch.float64)
        lo += (low[n:] / su).tolist()
        hi += (high[n:] / su).tolist()
    lo_t, hi_t = torch.tensor(lo, dtype=torch.float64), torch.tensor(hi, dtype=torch.float64)
    margin = torch.clamp(fraction * (hi_t - lo_t), min=MIN_MARGIN)
    dtype = torch.as_tensor(in_scale).dtype
    return lo_t.to(dtype), hi_t.to(dtype), margin.to(dtype)


def describe_envelope(field, system, span: tuple[Tensor, Tensor]) -> dict:
    """The envelope of ``field`` for a run's records (``metrics.json``, ``field.json``).

    Args:
        field: a `torch_ude.field.HybridField` with an envelope.
        system: its plant (for the channel names: ``state_names``, ``input_names``).
        span: the raw channel ranges it was built from, (n + n_u,) each.

    Returns:
        ``{"columns", "low", "high", "margin"}`` in the network's input coordinates, and
        ``"span"``: ``{"channels", "low", "high"}`` in the plant's units.
    """
    low, high, margin = field.envelope
    inputs = tuple(getattr(system, "input_names", ()))
    channels = list(system.state_names) + list(inputs)
    return {"columns": field.input_map.columns(system.state_names, inputs), "low": low.tolist(),
            "high": high.tolist(), "margin": margin.tolist(),
            "span": {"channels": channels, "low": span[0].tolist(), "high": span[1].tolist()}}


def install_span(fields: list, system, span: tuple[Tensor, Tensor], fraction: float = DEFAULT_MARGIN) -> dict:
    """Give ``fields`` the envelope of the channel ranges ``span`` training saw (`envelope_from_span` with the
    first field's input map and scales, then `HybridField.set_envelope` on each) and describe it.

    Args:
        fields: `torch_ude.field.HybridField` s of one input map and scales (e.g. the raw and the averaged field).
        system: their plant (channel names).
        span: ``(low, high)``, (n + n_u,) each, states then inputs in the plant's units
            (`torch_ude.reservoir.SampleBuffer.span`, or the C trainer's ``tu_trainer_span``).
        fraction: the fade band as a fraction of the box's width per column.

    Returns:
        `describe_envelope` of the first field.

    Raises:
        ValueError: as `envelope_from_span` (no jet seen, bad ranges or fraction).
    """
    field = fields[0]
    low, high, margin = envelope_from_span(*span, field.input_map, field.in_scale,
                                           field.input_scale if field.n_inputs else None, fraction)
    for f in {id(f): f for f in fields}.values():
        f.set_envelope(low, high, margin)
    return describe_envelope(field, system, span)

"""A two-tank process with an unmeasured upper tank, overflow and a clipped level sensor (issue 33's worked example).

A pump fills the upper tank, which drains through an orifice into the lower tank, which drains
out; only the lower tank's level is measured, by a sensor that reads volts and clips at the
ends of its range. Levels ``h1`` (upper, unmeasured) and ``h2`` (lower), in volts of the level
sensor's scale (0-10 V over the tank's height); the pump input ``u`` in volts, held over each
sample by the controller (zero-order hold):

``h1' = k u - a1 sqrt(h1) - c pos(h1 - rim)``,
``h2' = a1 sqrt(h1) - a2 sqrt(h2)``,

Torricelli outflows ``a sqrt(h)`` (``sqrt`` of the smooth positive part, `mhe.models.smooth.positive_part`,
so an empty tank stays well posed) and an overflow at the upper tank's rim that spills out of the
process at the rate ``c pos(h1 - rim)`` (a steep linear spill, smoothed over ``width``). The
sensor reads ``y = clip(h2 + offset + e, 0, 10)`` with Gaussian noise ``e`` added before the
clip, as an analogue sensor does; the model's output map is `mhe.models.output.SensorOutput` with a
smooth saturation at the same limits.

`TwoTankSimulation` is the plant, written for the tests and the benchmark (not any benchmark's
data): the same equations with a sharp kink (``width`` 1e-3 V) integrated with ``substeps`` RK4
steps per sample, a random staircase input that drives the upper tank over its rim and the
lower tank's level over the sensor's range, no process noise.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import SimpleNamespace

import torch

from ..models.bounds import Bound, BoundedParameters
from ..models.checks import require
from ..models.model import PhysicsField
from ..models.smooth import positive_part
from ..data.recording import RecordingSource
from ..data.recording import Recording

__all__ = ["TwoTanks", "TwoTankSimulation", "staircase"]

TRUTH = {"k": 0.06, "a1": 0.16, "a2": 0.15, "c": 0.5, "rim": 10.0}
"""The plant's parameters: pump gain (V/s per V), orifice coefficients (sqrt(V)/s), spill rate (1/s), rim (V)."""


class TwoTanks(PhysicsField):
    """The two tanks of the module docstring, ``x = (h1, h2)`` in V, ``u`` the pump voltage.

    Args:
        k, a1, a2, c, rim: start (or fixed) values of the parameters (see `TRUTH` for units).
        identify: the parameters to identify.
        bounds: their bounds by name (default: every parameter positive).
        width: the width of the smooth positive parts in V, > 0.

    Raises:
        ValueError: for a non-positive ``width`` or what `mhe.models.bounds.BoundedParameters` rejects.
    """

    state_names = ("h1", "h2")
    input_names = ("u",)

    def __init__(self, k: float = TRUTH["k"], a1: float = TRUTH["a1"], a2: float = TRUTH["a2"],
                 c: float = TRUTH["c"], rim: float = TRUTH["rim"], identify: Sequence[str] = (),
                 bounds: Mapping[str, Bound] | None = None, width: float = 0.05) -> None:
        if not width > 0:
            raise ValueError(f"width (of the smooth positive parts, V) must be positive; got {width}.")
        values = {"k": k, "a1": a1, "a2": a2, "c": c, "rim": rim}
        chosen = {n: (bounds or {}).get(n, Bound(0.0)) for n in identify if n in values}
        super().__init__(BoundedParameters(values, chosen, tuple(identify)))
        self.width = float(width)

    def vector_field(self, x: Sequence, u: Sequence, p: Mapping[str, object], ops: SimpleNamespace) -> list:
        """The tanks on components (see the module docstring)."""
        h1, h2 = x
        q1 = p["a1"] * ops.sqrt(positive_part(h1, self.width, ops))
        q2 = p["a2"] * ops.sqrt(positive_part(h2, self.width, ops))
        spill = p["c"] * positive_part(h1 - p["rim"], self.width, ops)
        return [p["k"] * u[0] - q1 - spill, q1 - q2]


def staircase(steps: int, hold: int, low: float, high: float, seed: int) -> torch.Tensor:
    """A random staircase: levels uniform in ``[low, high]``, each held for ``hold`` samples, shape (steps, 1)."""
    gen = torch.Generator().manual_seed(seed)
    levels = low + (high - low) * torch.rand(steps // hold + 1, generator=gen, dtype=torch.float64)
    return levels.repeat_interleave(hold)[:steps, None]


class TwoTankSimulation(RecordingSource):
    """The plant: `TwoTanks` at `TRUTH` with sharp kinks, a staircase pump input, a noisy sensor clipped to 0-10 V.

    Args:
        steps: samples T.
        dt: sample time in s.
        noise: standard deviation of the sensor noise in V (added before the clip).
        offset: the sensor's offset in V.
        hold: samples per level of the staircase input.
        u_range: the pump voltages' range in V.
        seed: seed of the input and the noise.
        substeps: RK4 steps per sample.

    Raises:
        ValueError: for ``steps < 2``, a negative noise, ``hold < 1`` or ``substeps < 1``.
    """

    def __init__(self, steps: int = 800, dt: float = 2.0, noise: float = 0.05, offset: float = 0.3,
                 hold: int = 40, u_range: tuple[float, float] = (1.5, 10.0), seed: int = 0, substeps: int = 10) -> None:
        require([(steps >= 2, f"steps must be >= 2; got {steps}."), (noise >= 0, f"noise must be >= 0; got {noise}."),
                 (hold >= 1, f"hold must be >= 1; got {hold}."), (substeps >= 1, f"substeps must be >= 1; got {substeps}.")])
        self.steps, self.dt, self.noise, self.offset, self.hold = steps, dt, noise, offset, hold
        self.u_range, self.seed, self.substeps = tuple(u_range), seed, substeps

    @property
    def truth(self) -> Mapping[str, float]:
        """The true physical parameters and the sensor's offset (``offset_0``)."""
        return {**TRUTH, "offset_0": self.offset}

    def record(self) -> Recording:
        """Simulate from empty tanks; ``states`` are the true levels (T, 2), ``outputs`` the sensor's volts (T, 1)."""
        plant = TwoTanks(width=1e-3)
        u = staircase(self.steps, self.hold, *self.u_range, self.seed)
        x = torch.tensor([[0.5, 0.5]], dtype=torch.float64)
        h = self.dt / self.substeps
        states = [x[0]]
        with torch.no_grad():
            for t in range(self.steps - 1):
                ut = u[t:t + 1]
                for _ in range(self.substeps):
                    k1 = plant(x, ut)
                    k2 = plant(x + 0.5 * h * k1, ut)
                    k3 = plant(x + 0.5 * h * k2, ut)
                    k4 = plant(x + h * k3, ut)
                    x = x + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
                states.append(x[0])
        xs = torch.stack(states)
        gen = torch.Generator().manual_seed(self.seed + 1)
        e = self.noise * torch.randn(self.steps, 1, generator=gen, dtype=torch.float64)
        return Recording(xs, u, (xs[:, 1:] + self.offset + e).clamp(0.0, 10.0), self.dt)

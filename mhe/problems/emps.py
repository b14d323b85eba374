"""The EMPS positioning axis identified by PEM–MHE from its position alone (issue 35, item 3).

The electro-mechanical positioning system of the nonlinear system-identification benchmark
(Janot, Gautier, Brunot; ../shared/data/emps) logs the motor position ``qm`` (m) and the
controller voltage ``vir`` (V) at 1 kHz; the force on the axis is ``gtau vir`` with
``gtau = 35.15 N/V``. States ``x = (q, qdot)`` (m, m/s), input ``u = (vir,)`` (V), measured
output ``q`` only. The known physics is the benchmark description's model form
(`EMPSAxisPhysics`), written once for torch and CasADi:

``M q'' = gtau vir - Fv q' - Fc tanh(q' / v_c) - offset``,

``sign(q')`` smoothed as `torch_ude.systems.LinearAxisModel` smooths it for jet matching and the
RK4 baseline (``v_c = 1 mm/s``; the DFKI pendulum's ``atan(100 q')`` is the same device in its
lab's form). Physics-only PEM–MHE identifies ``(M, Fv, Fc, offset)`` within bounds, started at
the benchmark's IDIM-LS values (Simulation_EMPS_Validation.m: M = 95.1089 kg, Fv = 203.5034 N s/m,
Fc = 20.3935 N, offset = -3.1648 N; Script_IDIM_LS.m computes them from DATA_EMPS).

`PositionLogsRecording` reads position-only logs the way jet matching does
(`torch_ude.recorded.read_log` at the log's own rate, the velocity a centred Savitzky–Golay
derivative of the position, `torch_ude.position_only`), then takes every ``read_rate / rate``-th
sample for the MHE's grid. The input of each MHE step is the mean of the recorded input over
the step (the zero-order hold that best represents a voltage recorded faster than the grid);
the derived velocity is kept as the recording's states (for inspection; the estimator sees
the position only).

The Coulomb term is stiff near rest: its slope ``Fc / (M v_c)`` (214 /s at the IDIM-LS values)
must stay below 2.78 / h for an RK4 step of h seconds to be stable there, hence the 200 Hz grid
of `configs/mhe_emps.yaml` (1.07 at the start); trial parameters beyond it make window solves
fail, and the outer loop drops and counts them and rejects the trial.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from torch_ude.position_only import VelocityFromPosition, with_velocities
from torch_ude.recorded import read_log
from torch_ude.systems.linear_axis import EMPS_IDIM_LS, LinearAxisModel

from ..models.bounds import Bound, BoundedParameters
from ..models.model import PhysicsField
from ..data.recording import RecordingSource
from ..data.recording import Recording

__all__ = ["EMPS_BOUNDS", "EMPS_IDIM_LS", "EMPS_GAIN", "EMPSAxisPhysics", "PositionLogsRecording"]


EMPS_GAIN = 35.15065188
"""``gtau`` in N/V, as stored in DATA_EMPS.mat."""

EMPS_BOUNDS = {"M": Bound(50.0, 200.0, log=True), "Fv": Bound(0.0, 600.0), "Fc": Bound(0.0, 100.0),
               "offset": Bound(-50.0, 50.0)}
"""Ranges of the identified parameters (kg, N s/m, N, N): those of ``configs/emps.yaml``'s trainable constants,
about 1/2 to 2x M and 3x / 5x / 15x IDIM-LS's Fv, Fc and offset."""


class EMPSAxisPhysics(PhysicsField):
    """``q' = qdot``, ``qdot' = (gtau vir - Fv qdot - Fc tanh(qdot / v_c) - offset) / M``, backend-neutral.

    Args:
        values: start (identified) or fixed values of ``M`` (kg), ``Fv`` (N s/m), ``Fc`` (N), ``offset``
            (N); missing ones default to `EMPS_IDIM_LS`.
        identify: names of the parameters to identify, within `EMPS_BOUNDS`.
        gain: ``gtau`` in N/V (fixed).
        coulomb_velocity: ``v_c`` in m/s (> 0, fixed), the smoothing of ``sign(qdot)``.

    Raises:
        ValueError: for an unknown parameter name, a start value outside its bound, or ``v_c <= 0``.
    """

    state_names = ("q", "qdot")
    input_names = ("vir",)

    def __init__(self, values: Mapping[str, float] | None = None, identify: Sequence[str] = (),
                 gain: float = EMPS_GAIN, coulomb_velocity: float = 1e-3) -> None:
        start = dict(EMPS_IDIM_LS)
        unknown = sorted(set(values or {}) - set(start)) + sorted(set(identify) - set(start))
        if unknown:
            raise ValueError(f"unknown parameter(s) {unknown} of EMPSAxisPhysics; the parameters are {list(start)}.")
        if not coulomb_velocity > 0:
            raise ValueError(f"coulomb_velocity (v_c in m/s, the smoothing of sign(qdot)) must be > 0; got "
                             f"{coulomb_velocity}.")
        start.update({k: float(v) for k, v in (values or {}).items()})
        self.gain, self.coulomb_velocity = float(gain), float(coulomb_velocity)
        super().__init__(BoundedParameters(start, {k: EMPS_BOUNDS[k] for k in identify}, tuple(identify)))

    def torch_model(self) -> LinearAxisModel:
        """The current parameters as `torch_ude.systems.LinearAxisModel` (the same field jet matching trains)."""
        with torch.no_grad():
            p = {k: float(v) for k, v in self.params().items()}
        return LinearAxisModel(mass=p["M"], gain=self.gain, viscous=p["Fv"], coulomb=p["Fc"],
                               coulomb_velocity=self.coulomb_velocity, offset=p["offset"])

    def vector_field(self, x: Sequence, u: Sequence, p: Mapping[str, object], ops: SimpleNamespace) -> list:
        """The axis field on components (see the class docstring)."""
        _, qd = x
        force = (self.gain * u[0] - p["Fv"] * qd - p["Fc"] * ops.tanh(qd / self.coulomb_velocity) - p["offset"])
        return [qd, force / p["M"]]


class PositionLogsRecording(RecordingSource):
    """Position-only logs joined into one recording on the MHE's grid (module doc).

    Args:
        files: the logs (``.csv``, ``.npz``, ``.mat``), read in this order.
        time: the time column (s).
        states: the position columns (one per mechanical degree of freedom); the model's states are
            these positions, then their velocities.
        inputs: the input columns.
        rate: the MHE's sample rate in Hz; ``read_rate / rate`` must be an integer.
        read_rate: the rate in Hz the logs are read and the velocities derived at (the files' own rate,
            as jet matching's ``data.fs``).
        velocity_from_position: the velocity's centred SG window, ``{"half_width": M, "order": P}`` at
            ``read_rate`` (`torch_ude.position_only.VelocityFromPosition`).
        max_gap: the longest step bridged by interpolation, in s (`torch_ude.recorded.read_log`).

    Raises:
        ValueError: for a ``read_rate`` that is not an integer multiple of ``rate``, or bad velocity settings
            (the logs are read on first use, with `torch_ude.recorded.read_log`'s errors).
    """

    def __init__(self, files: Sequence[str | Path], time: str, states: Sequence[str], inputs: Sequence[str],
                 rate: float = 200.0, read_rate: float = 1000.0,
                 velocity_from_position: Mapping[str, int] | None = None, max_gap: float | None = None) -> None:
        factor = float(read_rate) / float(rate) if rate > 0 and read_rate > 0 else 0.0
        if factor < 1 or abs(factor - round(factor)) > 1e-9:
            raise ValueError(f"read_rate / rate must be a positive integer (the MHE's grid takes every k-th sample of "
                             f"the logs); got read_rate={read_rate} Hz, rate={rate} Hz.")
        vfp = dict(velocity_from_position or {"half_width": 5, "order": 2})
        VelocityFromPosition(**vfp).validate()
        self.files, self.time, self.states, self.inputs = [str(f) for f in files], time, tuple(states), tuple(inputs)
        self.rate, self.read_rate, self.velocity_from_position = float(rate), float(read_rate), vfp
        self.max_gap = max_gap
        self.measured = tuple(range(len(self.states)))
        self._segments: list[np.ndarray] | None = None

    @property
    def factor(self) -> int:
        """Samples of the logs per MHE step."""
        return int(round(self.read_rate / self.rate))

    def _read(self) -> list[np.ndarray]:
        """Per segment the rows (T_s, 2 p + n_u) on the MHE's grid: positions, velocities, step-mean inputs."""
        if self._segments is None:
            vfp, k, segments = VelocityFromPosition(**self.velocity_from_position), self.factor, []
            for f in self.files:
                log = with_velocities(read_log(f, self.time, self.states, self.inputs, self.read_rate, self.max_gap),
                                      vfp)
                for seg in log.segments:
                    steps = seg.shape[0] // k
                    if steps < 2:
                        continue
                    body = seg[: steps * k]
                    inputs = body[:, log.n_states:].reshape(steps, k, -1).mean(axis=1)
                    segments.append(np.concatenate((body[::k, :log.n_states], inputs), axis=1))
            self._segments = segments
        return self._segments

    def record(self) -> Recording:
        """The segments one after the other; each segment start after the first is a break."""
        segs = self._read()
        data = np.concatenate(segs)
        n = 2 * len(self.states)
        breaks = tuple(np.cumsum([len(s) for s in segs[:-1]]).tolist())
        return Recording(states=torch.as_tensor(data[:, :n]), inputs=torch.as_tensor(data[:, n:]),
                         outputs=torch.as_tensor(data[:, list(self.measured)]), dt=1.0 / self.rate, breaks=breaks)

    def __repr__(self) -> str:
        return f"PositionLogsRecording({self.files}, rate={self.rate}, read_rate={self.read_rate})"

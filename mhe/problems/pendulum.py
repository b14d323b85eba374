"""The single pendulum of the jet-matching paper (Cases A/B/C) as a PEM–MHE problem.

States ``x = (theta, omega)`` (rad, rad/s), no inputs. The known physics is the
pendulum field of `torch_ude.systems.PendulumField`,
``theta' = omega``, ``omega' = -k sin(theta) - c omega`` with ``k = g_model / L`` (1/s^2)
and damping ``c`` (1/s), written once for torch and CasADi (`mhe.models.pendulum.PendulumPhysics`). Either
``c`` is identified (the physics-only variant: Case A's known model lacks the damping) or
it stays at the case's value and a neural residual learns what is missing (gray-box).

`PendulumStream` is the recording: exactly the stream a jet-matching run of the same
plant, noise and seed sees (`torch_ude.systems.simulate`), decimated to the MHE's rate,
with its re-excitations as the recording's breaks, so that no MHE window straddles one
(`mhe.data.windows.make_windows`). `pendulum_problem` builds the identification problem on it
with the settings below, which the PEM–MHE paper does not give for this plant (chosen
here; measured with ``python -m benchmarks.peers.pendulums ... --name jet_vs_pem``, see RESULTS.md):

* rate 50 Hz, the RK4 baseline's observation rate; RK4 discretization of the field;
* horizon N = 50 samples (1 s, half the pendulum's 2 s period) every 25 samples: with N = 20
  (0.4 s) the physics-only damping came out 4 % high at 1 % noise on seeds 0 and 1 (the free
  initial state of a short window absorbs part of the decay), with N = 50 0.35 % off;
* ``Q^(1/2) = (1e-3 rad/s, 2e-2 rad/s^2)``: the model is exact up to the residual; a 10x
  smaller or 5x larger Q moved the physics-only estimate by under 0.1 %;
* ``R^(1/2)``: the stream's true noise standard deviation per measured channel (floored at
  1e-4): PEM–MHE is told the noise level that jet matching estimates from the stream itself;
* arrival cost mean 0 and standard deviations (1 rad, 3 rad/s), no box.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from torch_ude.systems import SinglePendulum, System
from torch_ude.systems.simulate import simulate as simulate_stream

from ..models.pendulum import known_pendulum
from ..data.recording import Recording, RecordingSource
from ..estimator.estimator import MHESettings
from ..identification import ArrivalCost, IdentificationProblem, ResidualSettings

__all__ = ["PendulumStream", "pendulum_problem"]


class PendulumStream(RecordingSource):
    """The jet-matching stream of a pendulum plant, decimated for PEM–MHE.

    Args:
        system: the plant (`torch_ude.systems.SinglePendulum` or a subclass).
        noise: relative sensor noise of the stream (0.01 is 1 %).
        seed: the run seed (the same stream as ``torch-ude fit --seed_everything seed``).
        duration: stream length in s.
        fs: the stream's sample rate in Hz (the jet-matching configs' 1000).
        rate: the MHE's sample rate in Hz; ``fs / rate`` must be an integer.
        measured: indices of the measured states: ``(0,)`` for theta only, ``(0, 1)`` for both.
        substeps: RK4 substeps per stream sample of the simulator.

    Raises:
        ValueError: for a rate that does not divide ``fs``, or bad measured indices.
    """

    def __init__(self, system: SinglePendulum, noise: float, seed: int, duration: float = 60.0,
                 fs: float = 1000.0, rate: float = 50.0, measured: Sequence[int] = (0,), substeps: int = 1) -> None:
        factor = fs / rate
        if rate <= 0 or abs(factor - round(factor)) > 1e-9 or round(factor) < 1:
            raise ValueError(f"rate must divide the stream rate fs = {fs} Hz; got rate = {rate} Hz.")
        measured = tuple(int(i) for i in measured)
        if not measured or not set(measured) <= {0, 1} or len(set(measured)) != len(measured):
            raise ValueError(f"measured must list distinct indices of (theta, omega), e.g. (0,) or (0, 1); "
                             f"got {measured}.")
        self.plant, self.noise, self.seed, self.duration = system.spec(), float(noise), int(seed), float(duration)
        self.fs, self.rate, self.measured, self.substeps = float(fs), float(rate), measured, int(substeps)
        self._cache = None  # the simulated stream (private: not part of the problem's description)

    @property
    def truth(self) -> Mapping[str, float]:
        """The true (viscous) damping ``c`` (1/s) of the plant."""
        return {"c": float(System.from_spec(self.plant).damping)}

    def _stream(self):
        """The simulated stream at ``fs`` (`torch_ude.systems.simulate.SimulatedStream`), simulated once."""
        if self._cache is None:
            self._cache = simulate_stream(System.from_spec(self.plant), self.duration, fs=self.fs, noise=self.noise,
                                          seed=self.seed, substeps=self.substeps)
        return self._cache

    def noise_std(self, floor: float = 1e-4) -> tuple[float, ...]:
        """The stream's true noise standard deviation per measured channel (rad, rad/s), at least ``floor``."""
        return tuple(max(float(self._stream().sigma[i]), floor) for i in self.measured)

    def record(self) -> Recording:
        """Keep every ``fs / rate``-th sample of the stream, its measured channels and its re-excitations."""
        rec = self._stream()
        keep = slice(None, None, round(self.fs / self.rate))
        y = np.asarray(rec.y[keep][:, list(self.measured)], dtype=np.float64)
        segment = np.asarray(rec.segment[keep])
        breaks = (np.flatnonzero(np.diff(segment)) + 1).tolist()
        return Recording(states=torch.as_tensor(np.asarray(rec.x[keep], dtype=np.float64)),
                         inputs=torch.zeros(y.shape[0], 0, dtype=torch.float64),
                         outputs=torch.as_tensor(y), dt=1.0 / self.rate, breaks=tuple(breaks))

    def __repr__(self) -> str:
        return (f"PendulumStream({self.plant['class_path']}, noise={self.noise}, seed={self.seed}, "
                f"duration={self.duration}, rate={self.rate}, measured={self.measured})")


def pendulum_problem(system: SinglePendulum, case: str, noise: float, seed: int, duration: float = 60.0,
                     fs: float = 1000.0, substeps: int = 1, measured: Sequence[int] = (0,),
                     residual: ResidualSettings | None = None, rate: float = 50.0, horizon: int = 50,
                     stride: int = 25, process_std: tuple[float, float] = (1e-3, 2e-2),
                     arrival_std: tuple[float, float] = (1.0, 3.0), damping_start: float = 0.1
                     ) -> IdentificationProblem:
    """PEM–MHE of a pendulum plant on its jet-matching stream, with the settings of the module docstring.

    Args:
        system: the plant (`torch_ude.systems.SinglePendulum` or `torch_ude.systems.FrictionPendulum`).
        case: the case of the known model.
        noise, seed, duration, fs, substeps: the stream's (as a jet-matching run of them).
        measured: ``(0,)`` theta only or ``(0, 1)``.
        residual: None for physics-only PEM–MHE (the known model with an identified damping,
            started at ``damping_start`` 1/s); else the gray-box residual (the known model's
            damping stays fixed), e.g. ``ResidualSettings(16, start=run_folder)``.
        rate: the MHE's sample rate in Hz.
        horizon: N, samples per window.
        stride: samples between window starts.
        process_std: ``Q^(1/2)`` in rad/s and rad/s^2.
        arrival_std: the arrival cost's initial standard deviations (rad, rad/s).
        damping_start: start of the identified damping (physics-only).
    """
    source = PendulumStream(system, noise, seed, duration, fs=fs, rate=rate, measured=measured, substeps=substeps)
    return IdentificationProblem(
        source, MHESettings(horizon=horizon, process_std=process_std, measurement_std=source.noise_std()),
        ArrivalCost(mean=(0.0, 0.0), std=arrival_std), measured=source.measured,
        physics=known_pendulum(system, case, identify_damping=residual is None, damping_start=damping_start),
        residual=residual, stride=stride)

"""The errors-in-variables oracle: jet matching with the field evaluated at the true state.

Jet matching fits ``F(x_hat) ~ xdot_hat`` and the Lie derivative at ``x_hat`` to ``xddot_hat``,
where ``x_hat``, ``xdot_hat`` and ``xddot_hat`` are Savitzky–Golay estimates from the noisy
stream: the network's input is as noisy as its targets (errors in variables), which biases
the fit at high noise. This oracle measures how much: on a simulated plant, where the clean
states are known, the field and the known model are evaluated at the true state of each
window (its SG-smoothed clean signal, the same taps) while the targets ``xdot_hat, xddot_hat``
stay the noisy ones. Everything else (calibration, tap spacing ``m``, ``lambda2``, gates,
reservoir, optimizer) is the plain trainer's. A diagnostic, not a user setting: no real
machine knows its true state (``benchmarks.jet.noise_decomposition``, variant ``true_x``).

Use the two classes together, e.g. ``--model.class_path torch_ude.training.TrueStateModule
--data.class_path torch_ude.training.TrueStateDataModule``.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import torch

from ..stream import StreamEstimator
from ..systems.simulate import SimulatedStream, Simulator
from ..update import apply_calibration
from .data import StreamDataModule
from .module import JetMatchingModule

__all__ = ["TrueStateDataModule", "TrueStateModule"]


class _NoisyAndTrue:
    """A simulator whose recordings carry the clean states as extra channels after the noisy ones."""

    def __init__(self, simulator: Simulator) -> None:
        self.simulator = simulator

    def read(self, n_ticks: int) -> SimulatedStream:
        rec = self.simulator.read(n_ticks)
        return dataclasses.replace(rec, y=np.concatenate((rec.y, rec.x), axis=1))

    def __getattr__(self, name: str):
        return getattr(self.simulator, name)


class TrueStateDataModule(StreamDataModule):
    """`StreamDataModule` whose chunks hold ``2n`` channels: the ``n`` noisy states, then the ``n``
    clean ones (module doc). The clean channels travel through the estimator like recorded
    inputs, so each jet also carries the SG-smoothed clean state of its window."""

    def _simulator(self) -> _NoisyAndTrue:
        return _NoisyAndTrue(super()._simulator())


class TrueStateModule(JetMatchingModule):
    """`JetMatchingModule` that evaluates the field at the true state and fits the noisy targets.

    With `TrueStateDataModule` the estimator sees the clean states as ``n`` extra channels
    (``n_inputs = n``: they do not set ``m``, ``lambda2`` or ``sigma_rel``, which stay the noisy
    stream's); each minibatch pairs the clean channels' ``x_hat`` with the noisy
    ``xdot_hat, xddot_hat`` (module doc). Everything else is the plain module's.
    """

    def setup(self, stage: str) -> None:
        """Build the plain module, then an estimator with the clean channels as extra channels."""
        fresh = self.field is None
        super().setup(stage)
        if fresh:
            dm = self.trainer.datamodule
            n = dm.system.n_states
            self.stream = StreamEstimator(n, dm.fs, self.stream_settings, seed=dm.seed, n_inputs=n)

    def _on_calibrated(self) -> None:
        """Calibrate on the noisy channels alone; from now on the buffer draws true-state jets."""
        cal, n = self.stream.calibration, self.field.n_states
        states = dataclasses.replace(cal, x_rms=cal.x_rms[:n], s1=cal.s1[:n], s2=cal.s2[:n], sigma=cal.sigma[:n])
        apply_calibration(states, [self.field, self.averaged_field()], self.loss, self.optimizers(),
                          self.weight_decay, self.weight_decay_full_at)
        buffer = self.stream.buffer
        draw = buffer.sample

        def true_state_sample(batch: int, generator: torch.Generator) -> torch.Tensor:
            jets = draw(batch, generator)
            return torch.stack((jets[:, 0, n:], jets[:, 1, :n], jets[:, 2, :n]), dim=1)

        buffer.sample = true_state_sample

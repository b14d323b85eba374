"""The data module that streams a simulated plant to a trainer, chunk by chunk."""
from __future__ import annotations

import math
import os
from collections.abc import Iterator

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset

from ..metrics import evaluate_field, evaluation_states
from ..prediction import prediction_errors
from ..recorded import RecordedLog
from ..systems.base import System
from ..systems.faults import SensorFaults
from ..systems.pendulum import SinglePendulum
from ..systems.simulate import Simulator, check_simulator_settings
from .outputs import residual_figure

__all__ = ["StreamDataModule", "run_seed", "HELD_OUT_SEED"]

#: Added to the stream seed for the held-back stretch, so it never repeats the training stream.
HELD_OUT_SEED = 1_000_003


def run_seed() -> int:
    """The run's seed: the one given to ``seed_everything`` (0 if none was set)."""
    return int(os.environ.get("PL_GLOBAL_SEED", 0))


class _Stream(IterableDataset):
    """Yields the live stream in chunks, then empty ``replay`` chunks forever."""

    def __init__(self, dm: StreamDataModule) -> None:
        self.dm = dm

    def __iter__(self) -> Iterator[dict]:
        dm = self.dm
        n = dm.system.n_states
        while True:
            yield dm.next_chunk() if dm.live else {
                "y": torch.empty(0, n, dtype=torch.float64), "ticks": torch.empty(0, dtype=torch.int64),
                "segment": torch.empty(0, dtype=torch.int64), "replay": True,
            }


class StreamDataModule(L.LightningDataModule):
    """Streams a plant sampled at ``fs`` with sensor noise (and optional faults).

    The training loader yields chunks of ``fs / train_rate`` samples (one training
    tick each) as dicts ``{"y": (k, n) float64, "ticks": (k,) int64, "segment": (k,)
    int64, "replay": False}``; after ``duration`` seconds it yields empty chunks with
    ``replay = True``, on which a trainer continues on its buffer. The validation and
    test loaders yield the evaluation states once: ``{"grid": (G, n), "visited": (V, n)}``.

    Args:
        system: the plant (any `System`; chosen in YAML by ``class_path``).
        case: known-model case of the plant (``"A"``, ``"B"``, ``"C"``, ...).
        duration: stream length in s (> 0).
        fs: sample rate in Hz (> 0).
        noise: sensor noise relative to each channel's RMS (>= 0).
        train_rate: training ticks per second; ``fs / train_rate`` must be an integer.
        substeps: RK4 steps per sample of the simulator (>= 1).
        faults: optional sensor faults (NaN, Inf, drops, spikes).
        seed: stream seed; None uses the run seed (``seed_everything``).
        validation_s: length in s of a held-back stretch of the plant (simulated apart from the
            stream, with its own seed and the same noise) on which a trainer's residual check
            compares the hybrid model with its physics alone by prediction errors
            (`held_out_errors`); 0 turns it off.

    Raises:
        TypeError, ValueError: for any impossible setting, here, before any simulation.
    """

    def __init__(self, system: System | None = None, case: str = "A", duration: float = 60.0, fs: float = 1000.0,
                 noise: float = 0.01, train_rate: float = 25.0, substeps: int = 1,
                 faults: SensorFaults | None = None, seed: int | None = None, validation_s: float = 10.0) -> None:
        super().__init__()
        self.system = system if system is not None else SinglePendulum()
        if not isinstance(self.system, System):
            raise TypeError(f"system must be a torch_ude.systems.System; got {type(self.system).__name__}.")
        self.case = self.system.check_case(case)
        if not (math.isfinite(duration) and duration > 0):
            raise ValueError(f"duration must be positive (seconds); got {duration!r}.")
        check_simulator_settings(fs, noise, substeps, min(duration, 60.0))
        if not (math.isfinite(train_rate) and train_rate > 0):
            raise ValueError(f"train_rate must be positive (Hz); got {train_rate!r}.")
        if faults is not None and not isinstance(faults, SensorFaults):
            raise TypeError(f"faults must be a torch_ude.systems.SensorFaults or null; got {type(faults).__name__}.")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TypeError(f"seed must be an integer or null (the run seed); got {seed!r}.")
        chunk = fs / train_rate
        if abs(chunk - round(chunk)) > 1e-9 or round(chunk) < 1:
            raise ValueError(f"fs / train_rate must be a positive integer; got {fs} / {train_rate} = {chunk}.")
        self.duration, self.fs, self.noise, self.train_rate = float(duration), float(fs), float(noise), float(train_rate)
        self.chunk, self.substeps = int(round(chunk)), int(substeps)
        self.total_ticks = int(round(self.duration * self.fs))
        self.faults = faults if faults is not None else SensorFaults()
        if isinstance(validation_s, bool) or not (isinstance(validation_s, (int, float)) and math.isfinite(validation_s)
                                                  and validation_s >= 0):
            raise ValueError(f"data.validation_s must be a duration >= 0 in s (0: no held-back stretch); got "
                             f"{validation_s!r}.")
        self.validation_s = float(validation_s)
        self._held_out: RecordedLog | None = None
        self._seed = seed
        self._sim: Simulator | None = None
        self._tick = 0
        self._states: dict | None = None

    @property
    def seed(self) -> int:
        """The stream seed (the run seed unless set explicitly)."""
        return run_seed() if self._seed is None else int(self._seed)

    def config(self) -> dict:
        """The data settings of the run (recorded in its output files)."""
        return {"system": self.system, "case": self.case, "duration": self.duration, "fs": self.fs,
                "noise": self.noise, "train_rate": self.train_rate, "substeps": self.substeps,
                "faults": self.faults, "seed": self.seed, "validation_s": self.validation_s}

    @property
    def derived_states(self) -> tuple[int, ...]:
        """The state channels derived from others by a filter: none (every simulated state is measured)."""
        return ()

    @property
    def live(self) -> bool:
        """True while stream samples remain."""
        return self._tick < self.total_ticks

    @property
    def true_sigma(self) -> np.ndarray | None:
        """The simulator's noise standard deviation per channel, once the stream started."""
        return None if self._sim is None else self._sim.sigma

    def _simulator(self) -> Simulator:
        if self._sim is None:
            self._sim = Simulator(self.system, fs=self.fs, noise=self.noise, seed=self.seed,
                                  substeps=self.substeps, rms_horizon=min(self.duration, 60.0))
        return self._sim

    def next_chunk(self) -> dict:
        """The next chunk of the live stream (see class doc)."""
        k = min(self.chunk, self.total_ticks - self._tick)
        rec = self._simulator().read(k)
        ticks = np.arange(self._tick, self._tick + k)
        self._tick += k
        if self.faults.active:
            y, ticks, segment = self.faults.apply(rec, ticks)
        else:
            y, segment = rec.y, rec.segment
        return {"y": torch.as_tensor(y), "ticks": torch.as_tensor(ticks), "segment": torch.as_tensor(segment),
                "replay": False}

    def evaluation_states(self) -> dict[str, torch.Tensor]:
        """The states metrics are computed on (cached), see `torch_ude.metrics.evaluation_states`."""
        if self._states is None:
            self._states = evaluation_states(self.system, duration=self.duration, seed=self.seed, fs=self.fs)
        return self._states

    #: the `evaluate` keys a trainer logs as ``val/...`` and ``eval/...``
    eval_keys = ("e_field", "e_field_visited", "c_hat")
    #: a simulated plant: the trust envelope is off by default (`torch_ude.training.JetMatchingModule`)
    recorded = False

    def held_out_log(self) -> RecordedLog | None:
        """The held-back stretch (``validation_s`` seconds, cached) as a log split at the plant's
        re-excitations, or None when ``validation_s`` is 0."""
        if self.validation_s == 0:
            return None
        if self._held_out is None:
            sim = Simulator(self.system, fs=self.fs, noise=self.noise, seed=self.seed + HELD_OUT_SEED,
                            substeps=self.substeps, rms_horizon=min(self.duration, 60.0))
            rec = sim.read(int(round(self.validation_s * self.fs)))
            cuts = np.flatnonzero(np.diff(rec.segment)) + 1
            self._held_out = RecordedLog(self.fs, tuple(self.system.state_names), self.system.n_states,
                                         segments=np.split(rec.y, cuts))
        return self._held_out

    def held_out_errors(self, field) -> dict | None:
        """One-step and 1 s open-loop prediction errors of ``field`` on the held-back stretch
        (`held_out_log`; `torch_ude.prediction.prediction_errors`), with ``"scored_on"``; None
        without one."""
        log = self.held_out_log()
        if log is None:
            return None
        out = prediction_errors(field, [log], (1.0,), periodic=self.system.periodic)
        out["scored_on"] = f"a held-back simulated stretch of {self.validation_s:g} s"
        return out

    def evaluate(self, field, states: dict[str, torch.Tensor] | None = None) -> dict:
        """Field error and recovered damping of ``field`` (`torch_ude.metrics.evaluate_field`) on
        ``states`` (a validation batch) or the `evaluation_states`."""
        return evaluate_field(field.evaluate, self.system, self.case,
                              states if states is not None else self.evaluation_states())

    def summary(self, metrics: dict) -> str:
        """The metrics part of a run's closing line."""
        return (f"e_field = {metrics['e_field']:.5f} (visited states {metrics['e_field_visited']:.5f}), "
                f"c_hat = {metrics['c_hat']:.4f}")

    def figure(self, field):
        """Parity plot of the learned against the true residual on the visited states (`residual_figure`)."""
        return residual_figure(field, self.system, self.case, self.evaluation_states()["visited"])

    def train_dataloader(self) -> DataLoader:
        """An endless loader: live chunks, then replay chunks (stop with ``trainer.max_steps``)."""
        return DataLoader(_Stream(self), batch_size=None, num_workers=0)

    def val_dataloader(self) -> DataLoader:
        """One batch of evaluation states."""
        return DataLoader([self.evaluation_states()], batch_size=None)

    def test_dataloader(self) -> DataLoader:
        """Same as the validation loader."""
        return self.val_dataloader()

    def state_dict(self) -> dict:
        """Stream position, simulator and fault-generator state (for exact resumption)."""
        return {"tick": self._tick, "sim": None if self._sim is None else self._sim.state_dict(),
                "faults": self.faults.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Restore from `state_dict`."""
        self._tick = int(state["tick"])
        if state["sim"] is not None:
            self._simulator().load_state_dict(state["sim"])
        self.faults.load_state_dict(state["faults"])

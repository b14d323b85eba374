"""Fixed-step RK4 simulation of a plant at the sensor rate, with re-excitation and noise.

The clean trajectory is produced in fixed blocks (independent of how a caller reads
it), so a stream read 40 samples at a time equals one read all at once. Between
re-excitation events the plant follows its true field exactly; each event starts a
new *segment* (the ``segment`` id of every sample), which a streaming estimator
treats like a gap: no derivative window straddles two segments. Because an event
places the plant at a state drawn independently of the past, the segments of a
block are integrated side by side as one batch.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import torch

from ..rk4 import RK4Step
from .base import System

__all__ = ["SimulatedStream", "Simulator", "simulate", "check_simulator_settings"]


@dataclass
class SimulatedStream:
    """A stretch of the sensor stream.

    Attributes:
        t: sample times in s, shape (T,).
        x: clean true states, shape (T, n), float64.
        y: noisy measurements ``x + eta``, shape (T, n), float64.
        segment: re-excitation segment id of each sample, shape (T,), int64.
        sigma: the noise standard deviation of each channel, shape (n,).
        fs: sample rate in Hz.
    """

    t: np.ndarray
    x: np.ndarray
    y: np.ndarray
    segment: np.ndarray
    sigma: np.ndarray
    fs: float

    def __len__(self) -> int:
        return int(self.t.shape[0])


def _numpy(value, dtype: type) -> np.ndarray:
    """A copy of a tensor or array of a saved state as a numpy array of ``dtype``."""
    return torch.as_tensor(value).numpy().astype(dtype, copy=True)


def _plant_step(field: torch.nn.Module, h: float) -> torch.nn.Module:
    """The plant's RK4 step of ``h`` seconds (float64 states (N, n) -> (N, n)): compiled by
    TorchScript when the true field scripts (the same ATen kernels in the same order, so the
    stream is bit-identical to eager mode, about twice as fast; checked by
    tests/torch_ude/systems/test_simulate.py), the eager `RK4Step` when it does not."""
    step = RK4Step(field, h)
    try:
        with warnings.catch_warnings():  # TorchScript's deprecation notice (see torch_ude.export)
            warnings.filterwarnings("ignore", message=".*deprecated", category=DeprecationWarning)
            return torch.jit.script(step)
    except Exception:  # noqa: BLE001 - TorchScript rejects a module with RuntimeError, ValueError, OSError,
        return step     # its FrontendError and more; any of them means: run it eagerly


def check_simulator_settings(fs: float, noise: float, substeps: int, rms_horizon: float = 60.0) -> None:
    """Validate the settings of a `Simulator` without simulating anything.

    Args:
        fs: sample rate in Hz; must be a positive finite number.
        noise: relative noise level; must be a finite number >= 0.
        substeps: RK4 steps per sample; must be an integer >= 1.
        rms_horizon: seconds of trajectory behind the channel RMS; must be positive.

    Raises:
        TypeError: for a non-number (or a non-integer ``substeps``).
        ValueError: for a value out of range; the message names the setting and the fix.
    """
    for name, value in (("fs", fs), ("noise", noise), ("rms_horizon", rms_horizon)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name} must be a number; got {value!r}.")
    if not (math.isfinite(fs) and fs > 0):
        raise ValueError(f"fs (the sample rate in Hz) must be a positive number; got {fs!r}.")
    if not (math.isfinite(noise) and noise >= 0):
        raise ValueError(f"noise (relative to each channel's RMS) must be >= 0; got {noise!r}.")
    if isinstance(substeps, bool) or not isinstance(substeps, int) or substeps < 1:
        raise ValueError(f"substeps (RK4 steps per sample) must be an integer >= 1; got {substeps!r}. "
                         "Use 1, or more for a plant whose dynamics are fast at the sample rate.")
    if not (math.isfinite(rms_horizon) and rms_horizon > 0):
        raise ValueError(f"rms_horizon must be positive (seconds); got {rms_horizon!r}.")


class Simulator:
    """Stream a plant sampled at ``fs`` with Gaussian sensor noise, reproducible from a seed.

    The noise standard deviation of channel i is ``noise * RMS_i``, where ``RMS_i`` is
    the root mean square of the clean channel over the first ``rms_horizon`` seconds
    (one block) of the trajectory.

    Args:
        system: the plant.
        fs: sample rate in Hz (> 0); the paper streams at 1 kHz.
        noise: relative noise level (>= 0), e.g. 0.01 for 1 %.
        seed: seed of both the excitation and the noise generators.
        substeps: RK4 steps per sample (>= 1).
        rms_horizon: seconds of clean trajectory that define the channel RMS (> 0);
            it is also the length of a simulation block.

    Raises:
        TypeError, ValueError: for settings `check_simulator_settings` rejects.
        FloatingPointError: when the trajectory becomes non-finite (here or in `read`);
            the message gives the time and the last finite state.
    """

    def __init__(self, system: System, fs: float = 1000.0, noise: float = 0.01, seed: int = 0,
                 substeps: int = 1, rms_horizon: float = 60.0) -> None:
        check_simulator_settings(fs, noise, substeps, rms_horizon)
        self.system, self.fs, self.noise, self.substeps = system, float(fs), float(noise), int(substeps)
        self.field = system.true_field().double()
        self._step = _plant_step(self.field, 1.0 / (self.fs * self.substeps))
        excite_seq, noise_seq = np.random.SeedSequence(seed).spawn(2)
        self._excite_rng = np.random.default_rng(excite_seq)
        self._noise_rng = np.random.default_rng(noise_seq)
        self._block_ticks = max(1, round(rms_horizon * self.fs))
        self._tick = 0  # ticks already handed out
        self._segment_id = 0
        x0 = system.initial_state()
        if x0.shape != (system.n_states,) or not np.all(np.isfinite(x0)):
            raise ValueError(f"{type(system).__name__}.initial_state() must return {system.n_states} finite numbers.")
        self._open = (x0, self._draw_length())  # (state at its next tick, ticks left)
        self._buffer_x, self._buffer_seg = self._clean_block(0)
        rms = np.sqrt(np.mean(self._buffer_x**2, axis=0))
        self.sigma = self.noise * rms

    def _draw_length(self) -> int:
        interval = self.system.reexcite_interval
        if interval is None:
            return 1 << 62
        return max(1, round(self._excite_rng.uniform(*interval) * self.fs))

    def _clean_block(self, start: int) -> tuple[np.ndarray, np.ndarray]:
        """Integrate the next block of ``_block_ticks`` clean samples (the first at tick
        ``start``), all segments batched."""
        need = self._block_ticks
        pieces = []  # (start state, ticks in this block, segment id)
        state, left = self._open
        while need > 0:
            take = min(left, need)
            pieces.append((state, take, self._segment_id))
            need -= take
            left -= take
            if left == 0:
                self._segment_id += 1
                state, left = self.system.reexcite(self._excite_rng), self._draw_length()
        longest = max(p[1] for p in pieces)
        x = torch.as_tensor(np.stack([p[0] for p in pieces]), dtype=torch.float64)
        traj = np.empty((longest + 1, len(pieces), self.system.n_states))
        traj[0] = x.numpy()
        with torch.inference_mode():
            for k in range(longest):
                for _ in range(self.substeps):
                    x = self._step(x)
                traj[k + 1] = x.numpy()
        _, last_take, last_id = pieces[-1]
        if last_id == self._segment_id:  # the block ended inside a segment: carry its state on
            state = traj[last_take, -1].copy()
        self._open = (state, left)
        xs = np.concatenate([traj[: p[1], j] for j, p in enumerate(pieces)])
        seg = np.concatenate([np.full(p[1], p[2], dtype=np.int64) for p in pieces])
        bad = np.flatnonzero(~np.all(np.isfinite(xs), axis=1))
        if bad.size:
            self._raise_non_finite(start, bad[0], xs, seg)
        return xs, seg

    def _raise_non_finite(self, start: int, k: int, xs: np.ndarray, seg: np.ndarray) -> None:
        """Raise the error for the first non-finite sample ``k`` of the block from tick ``start``."""
        t = (start + k) / self.fs
        if k > 0 and seg[k - 1] == seg[k]:
            where = f"after the state {xs[k - 1].tolist()} at t = {(start + k - 1) / self.fs:g} s"
        else:
            where = "at the start of a segment (the state the plant was placed in is not finite)"
        raise FloatingPointError(
            f"the simulated trajectory of {type(self.system).__name__} became non-finite at t = {t:g} s, {where}. "
            f"Either the plant's true field diverges there (check its parameters and its re-excitation states), "
            f"or the RK4 step 1/(fs*substeps) = {1.0 / (self.fs * self.substeps):g} s is too large for its "
            f"dynamics: raise substeps (now {self.substeps}).")

    def state_dict(self) -> dict:
        """Everything needed to continue the stream exactly (generators, buffers, counters)."""
        return {  # tensors and plain Python values only, so that weights-only checkpoint loading accepts it
            "excite_rng": self._excite_rng.bit_generator.state, "noise_rng": self._noise_rng.bit_generator.state,
            "tick": self._tick, "segment_id": self._segment_id,
            "open_state": torch.tensor(self._open[0]), "open_left": self._open[1],
            "buffer_x": torch.tensor(self._buffer_x), "buffer_seg": torch.tensor(self._buffer_seg),
            "sigma": torch.tensor(self.sigma),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore a `state_dict` taken from a simulator of the same plant and settings."""
        self._excite_rng.bit_generator.state = state["excite_rng"]
        self._noise_rng.bit_generator.state = state["noise_rng"]
        self._tick, self._segment_id = int(state["tick"]), int(state["segment_id"])
        self._open = (_numpy(state["open_state"], np.float64), int(state["open_left"]))
        self._buffer_x = _numpy(state["buffer_x"], np.float64)
        self._buffer_seg = _numpy(state["buffer_seg"], np.int64)
        self.sigma = _numpy(state["sigma"], np.float64)

    def read(self, n_ticks: int) -> SimulatedStream:
        """Return the next ``n_ticks`` samples of the stream.

        Args:
            n_ticks: number of samples (>= 0).

        Returns:
            A `SimulatedStream` whose times continue where the previous read stopped.
        """
        if int(n_ticks) != n_ticks or n_ticks < 0:
            raise ValueError(f"n_ticks must be a non-negative integer; got {n_ticks!r}.")
        xs, segs, have = [], [], 0
        while have < n_ticks:
            if self._buffer_x.shape[0] == 0:
                self._buffer_x, self._buffer_seg = self._clean_block(self._tick + have)
            take = min(n_ticks - have, self._buffer_x.shape[0])
            xs.append(self._buffer_x[:take])
            segs.append(self._buffer_seg[:take])
            self._buffer_x, self._buffer_seg = self._buffer_x[take:], self._buffer_seg[take:]
            have += take
        n = self.system.n_states
        x = np.concatenate(xs) if xs else np.empty((0, n))
        seg = np.concatenate(segs) if segs else np.empty(0, dtype=np.int64)
        y = x + self.sigma * self._noise_rng.standard_normal(x.shape)
        t = (self._tick + np.arange(n_ticks)) / self.fs
        self._tick += n_ticks
        return SimulatedStream(t=t, x=x, y=y, segment=seg, sigma=self.sigma.copy(), fs=self.fs)


def simulate(system: System, duration: float, fs: float = 1000.0, noise: float = 0.01, seed: int = 0,
             substeps: int = 1) -> SimulatedStream:
    """Simulate ``duration`` seconds of the plant's noisy sensor stream.

    The channel RMS that scales the noise is taken over ``min(duration, 60)`` s.

    Args:
        system: the plant.
        duration: stream length in s (> 0).
        fs: sample rate in Hz (> 0).
        noise: relative noise level (>= 0).
        seed: seed of the excitation and noise generators.
        substeps: RK4 steps per sample.

    Returns:
        The `SimulatedStream` of ``round(duration * fs)`` samples.
    """
    if not duration > 0:
        raise ValueError(f"duration must be positive (seconds); got {duration!r}.")
    sim = Simulator(system, fs=fs, noise=noise, seed=seed, substeps=substeps,
                    rms_horizon=min(float(duration), 60.0))
    return sim.read(round(duration * fs))

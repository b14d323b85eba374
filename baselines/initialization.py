"""One baseline run end to end: stream, calibration, shared initial field, windows, Adam, metrics.

The pieces jet matching shares (Section 4.2 of the jet-matching paper) come from
torch_ude unchanged: the simulated stream, the calibration of the first 3 s of
the 1 kHz stream that sets the field's scales, the seeded initial weights
(`HybridField.from_seed`) and the field metrics.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from torch_ude.calibration import calibrate
from torch_ude.field import HybridField
from torch_ude.metrics import evaluate_field, evaluation_states
from torch_ude.systems.base import System
from torch_ude.systems.simulate import Recording, simulate

from .optimize import FitHistory, ShootingAdam
from .shooting import ShootingObjective
from .windows import ShootingWindows, observe, shooting_windows

__all__ = ["CALIBRATION_SECONDS", "BaselineRun", "initial_field", "run_baseline"]

#: Length of the calibration phase jet matching measures its scales on.
CALIBRATION_SECONDS = 3.0


def initial_field(system: System, case: str, rec: Recording, seed: int, hidden: Sequence[int] = (16, 16),
                  dtype: torch.dtype = torch.float64) -> HybridField:
    """The field jet matching starts from for ``seed``: seeded weights, calibrated scales.

    Args:
        system: the plant.
        case: the case of the known model.
        rec: the stream; its first `CALIBRATION_SECONDS` set the scales.
        seed: the run's seed.
        hidden: hidden widths of the tanh MLP.
        dtype: parameter dtype.

    Returns:
        The field, with ``in_scale = x_rms`` and ``out_scale = s1`` of the calibration.
    """
    field = HybridField.from_seed(system.known_field(case), seed, hidden=hidden, dtype=dtype)
    head = round(CALIBRATION_SECONDS * rec.fs)
    cal = calibrate(torch.as_tensor(rec.y[:head]), rec.fs, torch.as_tensor(rec.segment[:head]))
    field.set_scales(cal.x_rms.to(dtype), cal.s1.to(dtype))
    return field


@dataclass
class BaselineRun:
    """The outcome of `run_baseline`.

    Attributes:
        field: the trained field.
        windows: the shooting windows it was trained on.
        history: losses, rejected steps and wall time of the optimization.
        metrics: `torch_ude.metrics.evaluate_field` of the trained field plus
            ``tape_bytes``, ``skipped`` and ``wall_s``.
    """

    field: HybridField
    windows: ShootingWindows
    history: FitHistory
    metrics: dict


def run_baseline(system: System, case: str = "A", noise: float = 0.01, seed: int = 0, duration: float = 60.0,
                 rate: float = 50.0, steps: int = 40, n_windows: int = 128, iterations: int = 1200,
                 lr: float = 1e-2, lr_final: float | None = None, normalize: bool = False,
                 fit_states: bool = False, states_lr: float | None = None) -> BaselineRun:
    """Train the solver baseline on a simulated stream and evaluate it.

    Args:
        system: the plant.
        case: the case of the known model.
        noise: relative sensor noise of the stream.
        seed: seed of the stream and of the initial weights.
        duration: stream length in s (60 single pendulum, 20 double pendulum).
        rate: observation rate in Hz (50 reference, 100 sensitivity).
        steps: ``K``, RK4 steps per window.
        n_windows: ``B``.
        iterations: full-batch Adam iterations.
        lr, lr_final: see `ShootingAdam`.

    Returns:
        The `BaselineRun`.
    """
    rec = simulate(system, duration, fs=1000.0, noise=noise, seed=seed)
    field = initial_field(system, case, rec, seed)
    windows = shooting_windows(observe(rec, rate), steps, n_windows)
    objective = ShootingObjective(field, windows, field.in_scale if normalize else None)
    adam = ShootingAdam(objective, lr=lr, iterations=iterations, lr_final=lr_final, fit_states=fit_states,
                       states_lr=states_lr)
    start = time.perf_counter()
    history = adam.run()
    wall = time.perf_counter() - start
    metrics = evaluate_field(field.evaluate, system, case, evaluation_states(system, duration=duration, seed=seed))
    metrics.update(tape_bytes=objective.tape.nbytes, skipped=history.skipped, wall_s=wall,
                   final_loss=history.loss[-1])
    return BaselineRun(field=field, windows=windows, history=history, metrics=metrics)

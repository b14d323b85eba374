"""Helpers of the microcontroller tests."""
from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np

from tests.torch_ude.helpers import forced_pendulum_log

__all__ = ["recorded_config", "forced_log", "position_log", "LOG_FS"]

REPO = Path(__file__).resolve().parents[2]
#: the rate of `forced_log`, Hz
LOG_FS = 500.0


def recorded_config(folder: Path, columns: dict[str, np.ndarray], inputs: list[str], fs: float, base: str,
                    velocity_half_width: int | None = None) -> Path:
    """A torch-ude config that trains the DFKI pendulum's known model (`TorquePendulumModel`, states
    ``position, velocity``) on a log: ``columns`` (``time`` first, in s; (T,) each) are written to
    ``folder/log.csv``, the model and trainer settings come from the config ``base`` (a path in the
    repository) and a `RecordedDataModule` reads the log at ``fs`` Hz with the input columns ``inputs``;
    with ``velocity_half_width`` M it reads the position alone and derives the velocity
    (``data.velocity_from_position: {half_width: M, order: 2}``).

    Returns:
        The path of the config, ``folder/log.yaml``.
    """
    np.savetxt(folder / "log.csv", np.column_stack(list(columns.values())), delimiter=",", header=",".join(columns),
               comments="")
    text = (REPO / base).read_text()
    config = folder / "log.yaml"
    config.write_text(text[: text.index("\ndata:") + 1] + textwrap.dedent(f"""\
        data:
          class_path: torch_ude.training.RecordedDataModule
          init_args:
            known:
              class_path: torch_ude.systems.TorquePendulumModel
            files: [{folder / 'log.csv'}]
            val_files: [{folder / 'log.csv'}]
            time: time
            states: {'[position]' if velocity_half_width else '[position, velocity]'}
            inputs: [{', '.join(inputs)}]
            fs: {fs}
            train_rate: 25.0
        """) + (f"    velocity_from_position: {{half_width: {velocity_half_width}, order: 2}}\n"
                if velocity_half_width else ""))
    return config


def forced_log(folder: Path, duration: float) -> tuple[Path, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """A config of `TorquePendulumModel` (state (q, qdot), input torque) on a simulated forced-pendulum log
    of ``duration`` s at `LOG_FS` (`recorded_config`, the settings of ``configs/pendulum_case_a.yaml``), and
    that log as the device's stream: ``y`` (k, 3) with the columns q (rad), qdot (rad/s), torque (N m),
    ``ticks`` (k,) and ``segment`` (k,), with three dropped samples (bridged), a dropout of 40 (a new
    segment) and two NaN torques."""
    log = forced_pendulum_log(duration=duration, fs=LOG_FS, noise=1e-3)
    y = np.column_stack([log["position"], log["velocity"], log["torque"]])
    columns = {"time": np.arange(len(y)) / LOG_FS, "position": y[:, 0], "velocity": y[:, 1], "torque": y[:, 2]}
    config = recorded_config(folder, columns, ["torque"], LOG_FS, "configs/pendulum_case_a.yaml")
    ticks = np.arange(len(y))
    y[[2100, 3300], 2] = np.nan
    keep = ~np.isin(ticks, [1500, 1501, 1502, *range(4000, 4040)])
    return config, (y[keep], ticks[keep], np.zeros(int(keep.sum()), dtype=np.int64))


def position_log(folder: Path, duration: float, half_width: int
                 ) -> tuple[Path, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """`forced_log` as an encoder gives it: a config that derives the velocity from the angle
    (``data.velocity_from_position``, half width ``half_width``) and the device's stream ``y`` (k, 2) with the
    columns q (rad), torque (N m), the same dropped samples, dropout and NaN torques, a segment change, a repeated
    tick and a segment too short for a velocity window."""
    config, (y, ticks, segment) = forced_log(folder, duration)
    columns = {"time": np.arange(int(duration * LOG_FS)) / LOG_FS}
    log = forced_pendulum_log(duration=duration, fs=LOG_FS, noise=1e-3)
    columns |= {"position": log["position"], "torque": log["torque"]}
    config = recorded_config(folder, columns, ["torque"], LOG_FS, "configs/pendulum_case_a.yaml", half_width)
    y = y[:, [0, 2]]
    segment = segment.copy()
    segment[ticks >= 5000] = 1                     # a new segment id, ticks going on
    segment[(ticks >= 5100) & (ticks < 5100 + 2 * half_width + 1)] = 2  # a run of 2M + 1: no velocity
    segment[ticks >= 5100 + 2 * half_width + 1] = 3
    repeat = int(np.searchsorted(ticks, 4500))
    keep = np.r_[np.arange(repeat + 1), repeat, np.arange(repeat + 1, len(ticks))]  # tick 4500 twice
    return config, (y[keep], ticks[keep], segment[keep])

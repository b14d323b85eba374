"""Helpers of the microcontroller tests."""
from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np

from tests.torch_ude.helpers import forced_pendulum_log

__all__ = ["recorded_config", "forced_log", "LOG_FS"]

REPO = Path(__file__).resolve().parents[2]
#: the rate of `forced_log`, Hz
LOG_FS = 500.0


def recorded_config(folder: Path, columns: dict[str, np.ndarray], inputs: list[str], fs: float, base: str) -> Path:
    """A torch-ude config that trains the DFKI pendulum's known model (`TorquePendulumModel`, states
    ``position, velocity``) on a log: ``columns`` (``time`` first, in s; (T,) each) are written to
    ``folder/log.csv``, the model and trainer settings come from the config ``base`` (a path in the
    repository) and a `RecordedDataModule` reads the log at ``fs`` Hz with the input columns ``inputs``.

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
            states: [position, velocity]
            inputs: [{', '.join(inputs)}]
            fs: {fs}
            train_rate: 25.0
        """))
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

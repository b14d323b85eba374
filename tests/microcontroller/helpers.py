"""Helpers of the microcontroller tests."""
from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np

__all__ = ["recorded_config"]

REPO = Path(__file__).resolve().parents[2]


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

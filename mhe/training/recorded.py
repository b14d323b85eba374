"""PEM-MHE on a jet-matching config's recorded logs: the same files, columns and known constants.

`pem_identify` runs a PEM-MHE config (``configs/mhe_dfki_pendulum.yaml``: the DFKI lab's model form, its
rate, windows, arrival cost and outer loop) on the training files of a `torch_ude.training.RecordedDataModule`,
with the measured states, the identified parameters and R^(1/2) (the logs' own noise,
`mhe.problems.torque_pendulum.LogsRecording.noise_std`) set as overrides, so that its model is scored
beside jet matching's on the same validation logs (``benchmarks.real.dfki_pem``).
"""
from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

from torch_ude.systems.controlled import TorquePendulumModel
from torch_ude.training import RecordedDataModule

from ..pem import PEMIdentifier
from ..problems.torque_pendulum import LogsRecording
from .config import load_experiment

__all__ = ["pem_identify"]


def pem_identify(dm: RecordedDataModule, measured: Sequence[int], identify: Sequence[str], max_steps: int,
                 build_dir: str | Path, config: str | Path) -> tuple[TorquePendulumModel, dict]:
    """Physics-only PEM-MHE on the data module's training files: ``config`` with the settings below as overrides.

    Args:
        dm: the data (its training files, columns and known `TorquePendulumModel`'s J, m cx and g).
        measured: the measured states, ``(0,)`` the angle only or ``(0, 1)`` angle and rate.
        identify: the identified parameters (of ``J``, ``m_cx``, ``Fv``, ``Fc``, ``offset``); the others are the
            known model's, friction 0.
        max_steps: cap of Gauss-Newton iterations (``trainer.max_steps``).
        build_dir: the window solver's build folder.
        config: the PEM-MHE config (``configs/mhe_dfki_pendulum.yaml``).

    Returns:
        The identified model (float64) and ``parameters``, ``J`` (the PEM cost), ``steps``, ``stop``,
        ``failed_solves``, ``windows``, ``wall_s`` (s, the outer loop).
    """
    known, columns = dm.system.known, dm.columns
    recording = {"files": [str(f) for f in dm.files], "time": columns["time"], "states": list(columns["states"]),
                 "inputs": list(columns["inputs"]), "measured": list(measured)}
    rate = load_experiment(config).problem.source.rate
    noise = LogsRecording(**recording, rate=rate).noise_std()  # R^(1/2) of the measured channels, from the logs
    overrides = {"trainer.max_steps": max_steps, "model.solver.build_dir": str(build_dir),
                 "data.problem.measured": list(measured), "data.problem.mhe.measurement_std": list(noise),
                 "data.problem.physics.init_args.identify": list(identify),
                 "data.problem.physics.init_args.values": {"J": known.inertia, "m_cx": known.mass_com},
                 "data.problem.physics.init_args.gravity": known.gravity}
    overrides |= {f"data.problem.recording.init_args.{k}": v for k, v in recording.items()}
    experiment = load_experiment(config, [a for k, v in overrides.items()
                                          for a in (f"--{k}", v if isinstance(v, str) else json.dumps(v))])
    problem = experiment.problem
    t0 = time.perf_counter()
    with PEMIdentifier(problem, experiment.max_steps, experiment.outer, experiment.solver) as pem:
        result = pem.fit()
        physics = pem.estimator.model.physics
        model = physics.torch_model()
    info = {"parameters": {k: float(v) for k, v in physics.params().items()}, "J": result.loss,
            "steps": result.counters.steps, "stop": result.stop_reason,
            "failed_solves": result.counters.failed + result.counters.failed_trials, "windows": len(problem.windows),
            "wall_s": time.perf_counter() - t0}
    return model, info

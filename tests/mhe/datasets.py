"""Where the mhe tests find the reference data sets (``../shared/data``, never copied into the repository).

``TORCH_UDE_DATA`` overrides the folder; tests that need a file skip with the reason when it
is absent.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("TORCH_UDE_DATA", ROOT.parent / "shared" / "data"))


def data_file(relative: str) -> Path:
    """``DATA / relative``, or skip the calling test with the reason."""
    path = DATA / relative
    if not path.is_file():
        pytest.skip(f"reference data {path} not found (set TORCH_UDE_DATA to the folder of ../shared/data; "
                    "see its README for the source)")
    return path


def bayesrace_file(name: str) -> Path:
    """A BayesRace recording, e.g. ``DYN-PP-ETHZ``."""
    return data_file(f"bayesrace/{name}.npz")


def bayesrace_problem():
    """The problem of ``configs/mhe_bayesrace_physics_gn.yaml`` with its recording read (its paths are relative to the
    repository, so both happen there); skips the calling test without the BayesRace data."""
    from mhe.training import load_experiment

    bayesrace_file("DYN-PP-ETHZ")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        problem = load_experiment("configs/mhe_bayesrace_physics_gn.yaml", ["--trainer.logger", "false"]).problem
        problem.recording  # read while in ROOT
    return problem

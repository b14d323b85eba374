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

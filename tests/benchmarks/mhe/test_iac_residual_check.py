"""The training-side residual check (benchmarks.mhe.iac_residual_check): the fit lowers its error, bad input."""
import json
from pathlib import Path

import pytest

from benchmarks.mhe.iac import GRAY_CONFIG
from benchmarks.mhe.iac_residual_check import held_out_fit, main
from mhe.training import load_experiment
from tests.mhe.datasets import data_file

ROOT = Path(__file__).resolve().parents[3]
DATA = "iac/LVMS_23_01_04_B.csv"
TINY = ["--data.problem.recording.init_args.part", "[0.0, 0.05]", "--trainer.logger", "false"]


def test_the_fit_explains_the_training_rows_and_scores_the_held_out_ones(monkeypatch):
    data_file(DATA)
    monkeypatch.chdir(ROOT)
    problem = load_experiment(GRAY_CONFIG, [*TINY, "--data.problem.residual.outputs", "[0, 1]",
                                            "--data.problem.residual.width", "8"]).problem
    untrained = held_out_fit(problem, seed=0, steps=0)
    fitted = held_out_fit(problem, seed=0, steps=300)
    rows = len(problem.recording.states) - 1
    assert fitted["channels"] == [0, 1] and fitted["fit_rows"] == int(0.7 * rows)
    assert fitted["fit_rows"] + fitted["held_out_rows"] == rows
    # a zero network explains nothing (R^2 <= 0); 300 Adam steps explain part of the training rows
    assert all(r <= 0 for r in untrained["train_r2"])
    assert all(f > max(u, 0.05) for f, u in zip(fitted["train_r2"], untrained["train_r2"]))
    assert fitted != held_out_fit(problem, seed=1, steps=300)  # the seed is the network's


def test_main_writes_one_run_per_seed(tmp_path, monkeypatch):
    data_file(DATA)
    monkeypatch.chdir(ROOT)
    out = tmp_path / "check.json"
    main(["--config", GRAY_CONFIG, "--seeds", "0", "1", "--steps", "5", "--out", str(out), *TINY])
    saved = json.loads(out.read_text())
    assert [r["seed"] for r in saved["runs"]] == [0, 1] and saved["overrides"] == TINY
    assert saved["runs"][0]["channels"] == [0, 1, 2]


def test_problems_the_check_cannot_use_are_rejected(monkeypatch):
    data_file(DATA)
    monkeypatch.chdir(ROOT)
    gray = load_experiment(GRAY_CONFIG, TINY).problem
    with pytest.raises(ValueError, match="needs a gray-box problem"):
        held_out_fit(gray.replace(residual=None), seed=0)
    with pytest.raises(ValueError, match=r"fraction \(the rows that fit\) must lie in \(0, 1\)"):
        held_out_fit(gray, seed=0, fraction=1.0)

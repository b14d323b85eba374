"""PEM-MHE alone vs the output-error refinement on the simulated two tanks (benchmarks.mhe.two_tank): a short run."""
import json
from pathlib import Path

import pytest

from benchmarks.mhe.two_tank import main

ROOT = Path(__file__).resolve().parents[3]
SHORT = ["--data.problem.recording.init_args.steps", "300", "--trainer.max_steps", "2"]


def test_a_short_run_refines_towards_the_noise_floor(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # the config's paths are relative to the repository
    report = main(["--seeds", "0", "--out", str(tmp_path / "out"), "--build", str(tmp_path / "build"), *SHORT])
    assert json.loads((tmp_path / "out" / "results.json").read_text()) == report
    (row,) = report["rows"]
    assert row["samples"] == 300 and report["overrides"] == SHORT
    alone, refined = row["pem_mhe"], row["refined"]
    assert refined["success"] and refined["free_run_rmse"] < alone["free_run_rmse"]
    # the noise's own RMSE is the floor a correct model reaches; the refined model's error is its own
    assert refined["free_run_rmse"] <= 1.1 * row["noise_std"]
    assert refined["free_run_rmse_clean"] < 0.2 * row["noise_std"]
    assert max(refined["rel_errors"].values()) < max(alone["rel_errors"].values())
    assert report["within_10_percent_of_noise_std"] == [True] and report["refined_beats_pem_mhe"] == [True]


def test_the_criterion_is_the_benchmarks_own(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(ValueError, match=r"--model.outer.criterion is set by the benchmark"):
        main(["--seeds", "0", "--out", str(tmp_path), "--model.outer.criterion", "simulation"])

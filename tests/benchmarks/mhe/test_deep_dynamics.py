"""Table 2's EKF->PEM (adaptive) row on the IAC log (benchmarks.mhe.deep_dynamics): a tiny end-to-end run, bad
config."""
import json
from pathlib import Path

import pytest

from benchmarks.mhe.deep_dynamics import ROW, main
from benchmarks.mhe.iac import CONFIG
from mhe.training import load_experiment
from tests.mhe.datasets import data_file

ROOT = Path(__file__).resolve().parents[3]
DATA = "iac/LVMS_23_01_04_B.csv"
TINY = ["--data.problem.recording.init_args.part", "[0.0, 0.05]", "--data.problem.windows", "5",
        "--data.problem.arrival.mean", "[7.0, 0.0, 0.0]", "--trainer.logger", "false",
        "--epochs", "3", "--history", "12", "--gru-width", "4", "--dense-width", "16", "--validation-part", "0.95", "1.0"]


def test_a_tiny_run_writes_the_row_the_constant_rows_and_the_plot(tmp_path, monkeypatch):
    data_file(DATA)
    monkeypatch.chdir(ROOT)  # the config's paths are relative to the repository
    out = tmp_path / "out"
    main([*TINY, "--out", str(out), "--model.solver.build_dir", str(tmp_path / "build")])
    table = json.loads((out / "deep_dynamics.json").read_text())
    rows = table["rows"]
    assert list(rows) == [ROW, "start", "EKF->PEM", "Deep Dynamics mean coefficients"]
    assert table["settings"]["history"] == 12 and len(table["loss"]["train"]) == 3
    train_rows = 502 - 12  # 5 % of the 10046 gated rows; a full history of 12 and one sample ahead
    for row in rows.values():
        assert row["train"]["samples"] == train_rows and row["validation"]["samples"] > 400
        assert row["train"]["mse"] > 0 and len(row["validation"]["hidden_rmse_vs_logged"]) == 1
        # the 5 validation windows' rollout samples 9, 29, ..., 89 less 9, which lacks a history of 12 rows
        assert row["validation"]["multi_step"]["rollouts"] == 4 and row["validation"]["multi_step"]["steps"] == 25
    bounds = load_experiment(CONFIG, ["--trainer.logger", "false"]).problem.physics.params.bounds
    for part in ("train", "validation"):
        for n, c in rows[ROW]["coefficients"][part].items():
            assert bounds[n].lower <= c["min"] <= c["mean"] <= c["max"] <= bounds[n].upper, n
    assert all(bounds[n].contains(v) for n, v in rows["Deep Dynamics mean coefficients"]["values"].items()
               if n in bounds)
    assert rows[ROW]["training_s"] >= rows[ROW]["network_s"] > 0 and 1 <= rows[ROW]["best_epoch"] <= 3
    assert (out / "deep_dynamics.png").stat().st_size > 10_000 and (out / "deep_dynamics.pt").stat().st_size > 0


def test_a_config_on_another_recording_is_an_error(monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(ValueError, match=r"must read an mhe.data.logs.IACRecording; it reads BayesRaceRecording"):
        main(["--config", "configs/mhe_bayesrace_physics_gn.yaml", "--trainer.logger", "false"])

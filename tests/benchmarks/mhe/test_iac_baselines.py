"""Table 2's Joint-MHE and SUBNET rows on the IAC log (benchmarks.mhe.iac_baselines): a tiny run, bad input."""
import json
from pathlib import Path

import pytest

from benchmarks.mhe.iac_baselines import main
from tests.mhe.datasets import data_file

ROOT = Path(__file__).resolve().parents[3]
DATA = "iac/LVMS_23_01_04_B.csv"
TINY = ["--data.problem.windows", "5", "--trainer.logger", "false", "--starts", "1", "--joint-windows", "30",
        "--subnet-iterations", "20", "--subnet-val-freq", "10", "--subnet-batch-size", "64"]


def test_a_tiny_run_writes_both_rows_and_a_later_run_keeps_the_other_row(tmp_path, monkeypatch):
    pytest.importorskip("deepSI", reason="deepsi is not installed (pip install -e '.[peers]')")
    data_file(DATA)
    monkeypatch.chdir(ROOT)  # the config's paths are relative to the repository
    monkeypatch.setenv("HOME", str(tmp_path))  # deepSI.fit writes its checkpoints under ~/.deepSI-checkpoints
    out, build = tmp_path / "out", ["--model.solver.build_dir", str(tmp_path / "build")]
    main([*TINY, *build, "--joint-parameter-std", "0.01", "0.001", "--out", str(out)])
    table = json.loads((out / "baselines.json").read_text())
    joint, subnet = table["rows"]["Joint-MHE"], table["rows"]["SUBNET"]
    assert [r["settings"]["parameter_std"] for r in joint["all"]] == [0.01, 0.001]
    assert joint["train"]["mse"] == min(r["train"]["mse"] for r in joint["all"])  # chosen on the training data
    assert joint["window_solves"] == 30 and joint["train"]["windows"] == 5 and joint["validation"]["windows"] == 5
    assert joint["validation"]["multi_step"]["steps"] == 25 and joint["validation"]["multi_step"]["rollouts"] == 5
    assert subnet["training"]["loss_final"] < subnet["training"]["loss_initial"] and subnet["training_s"] > 0
    # one-step over every sample after the encoder's 10; the open loop at the 5 validation windows' ends
    assert subnet["train"]["one_step"]["samples"] == 7032 - 10
    assert subnet["validation"]["one_step"]["samples"] == 3014 - 10
    assert subnet["validation"]["multi_step"]["rollouts"] == 5 and subnet["validation"]["multi_step"]["steps"] == 25
    assert subnet["validation"]["mse"] == subnet["validation"]["one_step"]["mse"]
    for name in ("joint_mhe", "subnet"):
        assert (out / f"baselines_{name}.png").stat().st_size > 10_000
    main([*TINY, *build, "--methods", "subnet", "--subnet-iterations", "10", "--out", str(out)])
    again = json.loads((out / "baselines.json").read_text())["rows"]
    assert again["Joint-MHE"] == joint and again["SUBNET"]["settings"]["iterations"] == 10


def test_a_config_on_another_recording_is_an_error(monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(ValueError, match=r"must read an mhe.data.logs.IACRecording; it reads BayesRaceRecording"):
        main(["--config", "configs/mhe_bayesrace_physics_gn.yaml", "--trainer.logger", "false"])

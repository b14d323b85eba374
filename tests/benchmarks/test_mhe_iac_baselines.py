"""Table 2's Joint-MHE and SUBNET rows on the IAC log (benchmarks.mhe_iac_baselines): a tiny run, bad input."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from benchmarks.mhe_iac import CONFIG
from benchmarks.mhe_iac_baselines import main, subnet_rollouts
from benchmarks.mhe_subnet import SubnetSettings, predictions, recording_data, train
from mhe.training import load_experiment
from tests.mhe.datasets import data_file

ROOT = Path(__file__).resolve().parents[2]
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


def test_the_subnet_rollouts_predict_the_samples_after_each_window(monkeypatch):
    pytest.importorskip("deepSI", reason="deepsi is not installed (pip install -e '.[peers]')")
    import deepSI as dsi

    data_file(DATA)
    monkeypatch.chdir(ROOT)
    problem = load_experiment(CONFIG, ["--trainer.logger", "false"]).problem.replace(windows=8)
    data = recording_data(problem.recording, "training part")
    nu, ny, norm = dsi.get_nu_ny_and_auto_norm(data)
    model = dsi.SUBNET(nu, ny, norm, nx=3, nb=10, na=10).float()  # the indexing needs no training
    windows = problem.windows
    first, pred, meas = subnet_rollouts(model, data, windows.start + windows.horizon, 25)
    assert first.tolist() == [20 * i + 10 for i in range(8)] and pred.shape == meas.shape == (8, 25, 2)
    y = problem.recording.outputs.numpy().astype("float32")
    for f, m in zip(first.tolist(), meas):
        assert (m == y[f:f + 25]).all()
    one = predictions(model, data, 1)[0][:, 0]  # row i encodes the samples before t = i + 10
    assert abs(pred[:, 0] - one[first.numpy() - 10]).max() < 1e-6
    # a start without 10 samples before it or 25 from it on is left out
    kept, _, _ = subnet_rollouts(model, data, torch.tensor([5, 10, len(y) - 25, len(y) - 24]), 25)
    assert kept.tolist() == [10, len(y) - 25]


def test_subnet_on_a_blocked_recording_trains_on_its_stretches_and_no_prediction_spans_the_gap(tmp_path, monkeypatch):
    pytest.importorskip("deepSI", reason="deepsi is not installed (pip install -e '.[peers]')")
    data_file(DATA)
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("HOME", str(tmp_path))  # deepSI.fit writes its checkpoints under ~/.deepSI-checkpoints
    blocked = ["--trainer.logger", "false", "--data.problem.recording.init_args.part", "[0.0, 0.03, 0.04, 0.07]"]
    rec = load_experiment(CONFIG, blocked).problem.recording
    n, y = len(rec.outputs), rec.outputs.numpy().astype("float32")
    assert rec.breaks == (301,)
    data = recording_data(rec, "blocked")
    assert [len(d) for d in data] == [301, n - 301] and (np.concatenate([d.y for d in data]) == y).all()
    model, info = train(data, SubnetSettings(T=25, iterations=4, val_freq=2, batch_size=32))
    assert info["sub_sections"] == (301 - 10 - 25 + 1) + (n - 301 - 10 - 25 + 1)
    pred, meas, starts = predictions(model, data, 25)
    assert starts.tolist() == list(range(10, 301 - 24)) + list(range(311, n - 24))  # 10 before, 25 from, one stretch
    assert pred.shape == meas.shape == (len(starts), 25, 2)
    assert all((m == y[t:t + 25]).all() for t, m in zip(starts.tolist(), meas))
    alone = predictions(model, recording_data(load_experiment(CONFIG, [
        "--trainer.logger", "false", "--data.problem.recording.init_args.part", "[0.04, 0.07]"]).problem.recording,
        "second block"), 25)[0]
    assert abs(pred[starts >= 311] - alone).max() < 1e-6  # the second stretch is encoded as if read alone
    kept, _, _ = subnet_rollouts(model, data, torch.tensor([100, 280, 305, 311, 400]), 25)
    assert kept.tolist() == [100, 311, 400]  # 280 runs over the gap, 305 lacks 10 samples before it
    with pytest.raises(ValueError, match=r"has stretches of \[301, 302\] samples, fewer than max\(na, nb\) \+ 300"):
        train(data, SubnetSettings(T=300))


def test_a_config_on_another_recording_is_an_error(monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(ValueError, match=r"must read an mhe.data.logs.IACRecording; it reads BayesRaceRecording"):
        main(["--config", "configs/mhe_bayesrace_physics_gn.yaml", "--trainer.logger", "false"])

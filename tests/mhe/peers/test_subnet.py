"""SUBNET through deepSI (`mhe.peers.subnet`): settings checked once, a recording's stretches as records, the
open-loop rollouts at given samples, and no sub-section or prediction across a gap of the IAC log."""
from pathlib import Path

import numpy as np
import pytest
import torch

from mhe.peers.subnet import SubnetSettings, subnet_data, subnet_predictions, subnet_rollouts, train_subnet
from mhe.training import load_experiment
from tests.mhe.datasets import data_file

ROOT = Path(__file__).resolve().parents[3]
CONFIG = "configs/mhe_iac_physics_gn.yaml"
DATA = "iac/LVMS_23_01_04_B.csv"


@pytest.mark.parametrize("field, value", [("nx", 0), ("T", -1), ("horizon", 1), ("batch_size", 2.5)])
def test_bad_settings_are_errors_naming_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        SubnetSettings(**{field: value})


def test_the_rollouts_predict_the_samples_after_each_window(monkeypatch):
    pytest.importorskip("deepSI", reason="deepsi is not installed (pip install -e '.[peers]')")
    import deepSI as dsi

    data_file(DATA)
    monkeypatch.chdir(ROOT)
    problem = load_experiment(CONFIG, ["--trainer.logger", "false"]).problem.replace(windows=8)
    data = subnet_data(problem.recording, "training part")
    nu, ny, norm = dsi.get_nu_ny_and_auto_norm(data)
    model = dsi.SUBNET(nu, ny, norm, nx=3, nb=10, na=10).float()  # the indexing needs no training
    windows = problem.windows
    first, pred, meas = subnet_rollouts(model, data, windows.start + windows.horizon, 25)
    assert first.tolist() == [20 * i + 10 for i in range(8)] and pred.shape == meas.shape == (8, 25, 2)
    y = problem.recording.outputs.numpy().astype("float32")
    for f, m in zip(first.tolist(), meas):
        assert (m == y[f:f + 25]).all()
    one = subnet_predictions(model, data, 1)[0][:, 0]  # row i encodes the samples before t = i + 10
    assert abs(pred[:, 0] - one[first.numpy() - 10]).max() < 1e-6
    # a start without 10 samples before it or 25 from it on is left out
    kept, _, _ = subnet_rollouts(model, data, torch.tensor([5, 10, len(y) - 25, len(y) - 24]), 25)
    assert kept.tolist() == [10, len(y) - 25]


def test_a_blocked_recording_trains_on_its_stretches_and_no_prediction_spans_the_gap(tmp_path, monkeypatch):
    pytest.importorskip("deepSI", reason="deepsi is not installed (pip install -e '.[peers]')")
    data_file(DATA)
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("HOME", str(tmp_path))  # deepSI.fit writes its checkpoints under ~/.deepSI-checkpoints
    blocked = ["--trainer.logger", "false", "--data.problem.recording.init_args.part", "[0.0, 0.03, 0.04, 0.07]"]
    rec = load_experiment(CONFIG, blocked).problem.recording
    n, y = len(rec.outputs), rec.outputs.numpy().astype("float32")
    assert rec.breaks == (301,)
    data = subnet_data(rec, "blocked")
    assert [len(d) for d in data] == [301, n - 301] and (np.concatenate([d.y for d in data]) == y).all()
    model, info = train_subnet(data, SubnetSettings(T=25, iterations=4, val_freq=2, batch_size=32))
    assert info["sub_sections"] == (301 - 10 - 25 + 1) + (n - 301 - 10 - 25 + 1)
    pred, meas, starts = subnet_predictions(model, data, 25)
    assert starts.tolist() == list(range(10, 301 - 24)) + list(range(311, n - 24))  # 10 before, 25 from, one stretch
    assert pred.shape == meas.shape == (len(starts), 25, 2)
    assert all((m == y[t:t + 25]).all() for t, m in zip(starts.tolist(), meas))
    alone = subnet_predictions(model, subnet_data(load_experiment(CONFIG, [
        "--trainer.logger", "false", "--data.problem.recording.init_args.part", "[0.04, 0.07]"]).problem.recording,
        "second block"), 25)[0]
    assert abs(pred[starts >= 311] - alone).max() < 1e-6  # the second stretch is encoded as if read alone
    kept, _, _ = subnet_rollouts(model, data, torch.tensor([100, 280, 305, 311, 400]), 25)
    assert kept.tolist() == [100, 311, 400]  # 280 runs over the gap, 305 lacks 10 samples before it
    with pytest.raises(ValueError, match=r"has stretches of \[301, 302\] samples, fewer than max\(na, nb\) \+ 300"):
        train_subnet(data, SubnetSettings(T=300))

"""Table 1's SUBNET row (benchmarks.mhe.subnet): a tiny deepSI run on the real files, and bad input."""
import json

import pytest

pytest.importorskip("deepSI", reason="deepsi is not installed (pip install -e '.[peers]')")

from benchmarks.mhe.subnet import io_data, main  # noqa: E402
from tests.mhe.datasets import bayesrace_file  # noqa: E402

TINY = ["--iterations", "30", "--val-freq", "10", "--batch-size", "64", "--T", "10", "--horizon", "5"]


def test_a_tiny_run_lowers_the_loss_and_writes_both_rows(tmp_path, monkeypatch):
    train, val = bayesrace_file("DYN-PP-ETHZ"), bayesrace_file("DYN-PP-ETHZMobil")
    monkeypatch.setenv("HOME", str(tmp_path))  # deepSI.fit writes its checkpoints under ~/.deepSI-checkpoints
    out = tmp_path / "out"
    main([*TINY, "--train", str(train), "--validation", str(val), "--out", str(out)])
    table = json.loads((out / "subnet.json").read_text())
    assert table["training"]["loss_final"] < table["training"]["loss_initial"]
    assert table["settings"]["nx"] == 3 and table["training"]["seconds"] > 0
    n = 1001 - 10  # samples after the encoder's past window of max(na, nb) = 10
    for label in ("train", "validation"):
        row = table["rows"][label]
        assert row["one_step"]["samples"] == n and len(row["one_step"]["rmse"]) == 2
        assert row["n_step"]["steps_of_f"] == 4 and len(row["curve"]) == 5
        assert row["simulation"]["samples"] == n
        assert row["curve"][1] == pytest.approx(row["one_f_step"]["mse"])
        assert row["curve"][-1] == pytest.approx(row["n_step"]["mse"])
    assert (out / "subnet.png").stat().st_size > 10_000


def test_a_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="No file at"):
        io_data(tmp_path / "nothing.npz")


def test_a_batch_larger_than_the_training_sub_sections_is_an_error(tmp_path, monkeypatch):
    train = bayesrace_file("DYN-PP-ETHZ")
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(ValueError, match="batch_size must be at most the 942 training sub-sections"):
        main(["--train", str(train), "--validation", str(train), "--batch-size", "5000", "--out", str(tmp_path)])

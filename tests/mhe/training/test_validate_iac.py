"""``torch-ude validate`` of a PEM-MHE run on another IAC recording (issue 35, item 1): the config's starting
arrival cost is not checked against the new file's bounds (the trained one replaces it), and the config's
training ``part`` is not carried over to another file (it is scored whole, and the log says so)."""
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from mhe.data.logs import IACRecording
from mhe.scoring import score_problem, with_values
from mhe.training import load_experiment
from torch_ude.cli import main

ROOT = Path(__file__).resolve().parents[3]
CONFIG = "configs/mhe_iac_physics_gn.yaml"
IAC = ROOT.parent / "shared" / "data" / "iac" / "LVMS_23_01_04_B.csv"
QUIET = ["--trainer.logger", "false", "--trainer.enable_progress_bar", "false"]
pytestmark = pytest.mark.skipif(not IAC.is_file(), reason=f"the IAC log is not at {IAC} (see ../shared/data/README.md)")


@pytest.fixture(scope="module")
def fit(tmp_path_factory):
    """One Gauss-Newton step of the physics-only config on its training part [0, 0.7]; (checkpoint, folder)."""
    folder = tmp_path_factory.mktemp("iac")
    cwd = Path.cwd()
    try:
        os.chdir(ROOT)
        main(["fit", "--config", CONFIG, *QUIET, "--trainer.max_steps", "1", "--trainer.default_root_dir",
              str(folder / "run"), "--model.solver.build_dir", str(folder / "b"), "--model.solver.workers", "1"])
    finally:
        os.chdir(cwd)
    return folder / "run" / "checkpoints" / "last.ckpt", folder


def _validate(fit, name: str, *args: str):
    ckpt, folder = fit
    cli = main(["validate", "--config", CONFIG, *QUIET, "--ckpt_path", str(ckpt), "--trainer.default_root_dir",
                str(folder / name), "--model.solver.build_dir", str(folder / "b"), "--model.solver.workers", "1",
                *args])
    return cli, {k: float(v) for k, v in cli.trainer.callback_metrics.items()}


def _lines(first: int, last: int, path: Path, transform=None) -> Path:
    """The IAC log's header and its data rows ``first .. last - 1`` (``transform`` of the columns) as ``path``."""
    lines = IAC.read_text().splitlines()
    rows = np.array([[float(v) for v in line.split(",")] for line in lines[1 + first:1 + last]])
    if transform is not None:
        transform(rows)
    np.savetxt(path, rows, delimiter=",", header=lines[0].lstrip("# "), fmt="%.10f")
    return path


def _held_out_rows() -> tuple[int, int]:
    """The data rows of the config's validation part [0.7, 1] and the input row after it."""
    rec = IACRecording(str(IAC), part=(0.7, 1.0))
    rec.record()
    return rec.load_report["first_row"], rec.load_report["last_row"] + 2


def test_another_file_is_scored_whole_not_with_the_config_training_part(fit, tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(ROOT)
    first, last = _held_out_rows()
    other = _lines(first, last, tmp_path / "other_track.csv")
    with caplog.at_level("INFO"):
        cli, metrics = _validate(fit, "val_other", "--data.problem.recording.init_args.path", str(other))
    assert tuple(cli.datamodule.problem.source.part) == (0.0, 1.0)
    assert any("Scoring the whole of" in r.getMessage() for r in caplog.records)
    # the same rows as the training file's held-out part [0.7, 1] given explicitly: the same windows and score
    _, held_out = _validate(fit, "val_part", "--data.problem.recording.init_args.part", "[0.7, 1.0]")
    assert metrics["val/windows"] == held_out["val/windows"] > 100
    assert metrics["val/one_step_mse"] == pytest.approx(held_out["val/one_step_mse"], rel=1e-9)


def test_a_file_outside_the_config_starting_arrival_box_is_scored_with_the_trained_arrival_cost(fit, tmp_path,
                                                                                                monkeypatch):
    monkeypatch.chdir(ROOT)
    first, last = _held_out_rows()

    def faster(rows: np.ndarray) -> None:  # vx (column 3) 20 m/s higher: the config's start 17 m/s is outside
        rows[:, 3] += 20.0

    other = _lines(first, last, tmp_path / "fast_track.csv", faster)
    cli, metrics = _validate(fit, "val_fast", "--data.problem.recording.init_args.path", str(other))
    est = cli.model.estimator
    assert not est.arrival_mean_bounds[0].contains(17.0) and metrics["val/windows"] > 100
    saved = torch.load(fit[0], weights_only=False)["arrival"]
    for now, value, bound in zip(est.arrival_mean.tolist(), saved["mean"], est.arrival_mean_bounds):
        assert now == pytest.approx(bound.clip(value), rel=1e-12, abs=1e-12)
    assert np.isfinite(metrics["val/one_step_mse"])


def test_validate_gives_the_benchmark_number_on_the_same_weights(fit, monkeypatch):
    monkeypatch.chdir(ROOT)
    ckpt, folder = fit
    part = ["--data.problem.recording.init_args.part", "[0.7, 1.0]"]
    _, metrics = _validate(fit, "val_bench", *part)
    # benchmarks.mhe.iac's validation row at the run's parameters and trained arrival cost (3 cold starts)
    values = json.loads((folder / "run" / "field.json").read_text())["parameters"]
    saved = torch.load(ckpt, weights_only=False)["arrival"]
    problem = load_experiment(CONFIG).problem
    val = with_values(problem, problem.source.with_part((0.7, 1.0)), values, (saved["mean"], saved["std"]))
    expected, _ = score_problem(val, folder / "b" / "bench", 3)
    assert metrics["val/one_step_mse"] == pytest.approx(expected["mse"], rel=1e-6)

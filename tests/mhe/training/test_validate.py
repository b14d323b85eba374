"""``torch-ude validate`` of a PEM-MHE run on another recording given by path (tiny runs on BayesRace's files)."""
import json
from pathlib import Path

import pytest
import torch

from mhe import WindowSolver
from mhe.data.logs import BayesRaceRecording
from mhe.scoring import one_step_error, with_values
from mhe.training import PEMModule, load_experiment
from tests.mhe.datasets import bayesrace_file
from torch_ude.cli import main

ROOT = Path(__file__).resolve().parents[3]
CONFIG = "configs/mhe_bayesrace_physics_gn.yaml"
TINY = ["--data.problem.windows", "4", "--trainer.logger", "false"]


def _fit(tmp_path: Path) -> tuple[Path, object]:
    """A two-step fit on ETHZ that saves a checkpoint; its path and the CLI."""
    cli = main(["fit", "--config", CONFIG, *TINY, "--trainer.max_steps", "2", "--trainer.enable_checkpointing", "true",
                "--trainer.default_root_dir", str(tmp_path / "run"), "--model.solver.build_dir", str(tmp_path / "b")])
    return next((tmp_path / "run").rglob("*.ckpt")), cli


def test_validate_scores_the_trained_run_on_another_recording_as_the_benchmark_does(tmp_path, monkeypatch):
    bayesrace_file("DYN-PP-ETHZ")
    other = bayesrace_file("DYN-PP-ETHZMobil")
    monkeypatch.chdir(ROOT)
    ckpt, fit = _fit(tmp_path)
    assert not any(k.startswith("val/") for k in fit.trainer.callback_metrics)  # a fit does not validate
    whole = [*TINY, "--data.problem.windows", "1000"]  # all 100 windows of ETHZMobil: its box is not the fit's
    cli = main(["validate", "--config", CONFIG, *whole, "--ckpt_path", str(ckpt), "--data.problem.recording.init_args.path",
                str(other), "--trainer.default_root_dir", str(tmp_path / "val"),
                "--model.solver.build_dir", str(tmp_path / "b")])
    metrics = {k: float(v) for k, v in cli.trainer.callback_metrics.items()}
    assert cli.datamodule.problem.source.path == str(other)
    assert metrics["val/windows"] == 100 and metrics["val/failed"] == 0
    # the arrival cost is the checkpoint's physical one, clipped into ETHZMobil's box (not its raw values, which
    # mean other numbers in that box than in the fit's)
    saved, est = torch.load(ckpt, weights_only=False)["arrival"], cli.model.estimator
    assert est.arrival_mean_bounds != fit.model.estimator.arrival_mean_bounds
    for now, value, bound in zip(est.arrival_mean.tolist(), saved["mean"], est.arrival_mean_bounds):
        assert now == pytest.approx(bound.clip(value), rel=1e-12, abs=1e-12)
    for now, value, bound in zip(est.arrival_std().tolist(), saved["std"], est.arrival_std_bounds):
        assert now == pytest.approx(bound.clip(value), rel=1e-12)
    # the same number as benchmarks.mhe.bayesrace's validation at the run's parameters (3 cold starts per window,
    # 3 passes of propagated starts)
    values = json.loads((tmp_path / "run" / "field.json").read_text())["parameters"]
    problem = load_experiment(CONFIG, whole).problem
    src = problem.source
    val = with_values(problem, BayesRaceRecording(str(other), src.trajectory, src.first, src.dt, src.dt_rtol), values,
                      (est.arrival_mean.tolist(), est.arrival_std().tolist()))
    with WindowSolver(val.estimator(), tmp_path / "b" / "check") as solver:
        expected = one_step_error(solver, val.windows, 3, passes=3)
    assert metrics["val/one_step_mse"] == pytest.approx(expected["mse"], rel=1e-6)
    # on the training recording the same checkpoint scores another number
    train = main(["validate", "--config", CONFIG, *TINY, "--ckpt_path", str(ckpt), "--trainer.default_root_dir",
                  str(tmp_path / "val_train"), "--model.solver.build_dir", str(tmp_path / "b")])
    assert float(train.trainer.callback_metrics["val/one_step_mse"]) != pytest.approx(metrics["val/one_step_mse"])


def test_a_wrong_recording_path_is_a_clear_error(tmp_path, monkeypatch):
    bayesrace_file("DYN-PP-ETHZ")
    monkeypatch.chdir(ROOT)
    ckpt, _ = _fit(tmp_path)
    with pytest.raises(ValueError, match=r"No file at .*nothing\.npz"):
        main(["validate", "--config", CONFIG, *TINY, "--ckpt_path", str(ckpt), "--data.problem.recording.init_args.path",
              str(tmp_path / "nothing.npz"), "--trainer.default_root_dir", str(tmp_path / "val")])


def test_validation_starts_below_one_or_negative_passes_are_an_error():
    with pytest.raises(ValueError, match="validation_starts must be >= 1"):
        PEMModule(validation_starts=0)
    with pytest.raises(ValueError, match="validation_passes >= 0"):
        PEMModule(validation_passes=-1)

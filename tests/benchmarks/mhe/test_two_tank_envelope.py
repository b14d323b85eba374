"""benchmarks.mhe.two_tank_envelope --runs: run folders scored by free run on the benchmark's two recordings."""
import json

import pytest

from benchmarks.mhe import two_tank_envelope as bench
from torch_ude.cli import main as cli


def test_runs_are_scored_as_exported_and_a_refined_run_scores_what_it_reported(tmp_path):
    run = tmp_path / "run"
    cli(["fit", "--config", "configs/mhe_two_tank_gn.yaml", "--trainer.max_steps", "2",
         "--data.problem.recording.init_args.steps", "200", "--trainer.default_root_dir", str(run),
         "--trainer.enable_progress_bar", "false", "--model.solver.build_dir", str(tmp_path / "build")])
    metrics = json.loads((run / "metrics.json").read_text())
    report = bench.main(["--runs", str(run), "--train-range", "1.5", "10", "--out", str(tmp_path / "out"),
                         "--data.problem.recording.init_args.steps", "200"])
    row = report["runs"][str(run)]
    # the run's own free-run RMSE after its output-error refinement, on the same training recording
    assert row["train_free_run_rmse"] == pytest.approx(metrics["criteria"]["free_run_rmse_refined"], rel=1e-4)
    assert 0.0 < row["val_free_run_rmse"] < 1.0 and row["status"] == "finished"
    assert json.loads((tmp_path / "out" / "runs.json").read_text())["runs"][str(run)] == row

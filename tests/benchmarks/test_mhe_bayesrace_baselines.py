"""EKF->PEM of benchmarks.mhe_bayesrace_baselines on BayesRace's data: exact from the truth, its bookkeeping."""
from pathlib import Path

import pytest

from benchmarks.mhe_bayesrace_baselines import ekf_pem, ekf_settings
from mhe.training import load_experiment
from mhe.vehicle import BAYESRACE_TRUTH
from tests.mhe.data import bayesrace_file


ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def problem():
    bayesrace_file("DYN-PP-ETHZ")
    with pytest.MonkeyPatch.context() as mp:  # the config's paths are relative to the repository
        mp.chdir(ROOT)
        prob = load_experiment("configs/mhe_bayesrace_physics_gn.yaml", ["--trainer.logger", "false"]).problem
        prob.recording  # read while in ROOT
    return prob


def test_from_the_truth_the_ekf_and_the_fit_stay_at_the_truth(problem, tmp_path):
    start = {n: float(v.detach()) for n, v in problem.physics.params().items()}
    truth = {**start, **{n: BAYESRACE_TRUTH[n] for n in problem.physics.params.free_names}}
    row = ekf_pem(problem, truth, [truth], tmp_path)
    assert row["initial_mean_rel_error"] == 0.0 and row["ekf_hidden_rmse"] < 1e-9  # noise-free: vy to rounding
    assert row["mean_rel_error"] < 1e-8 and row["at_bounds"] == []
    assert row["training_s"] >= row["ekf_s"] + row["fit_s"] > 0


def test_from_the_67_percent_start_the_ekf_loses_vy(problem, tmp_path):
    start = {n: float(v.detach()) for n, v in problem.physics.params().items()}
    row = ekf_pem(problem, start, [start], tmp_path)
    assert row["initial_mean_rel_error"] == pytest.approx(0.6795)
    assert row["ekf_hidden_rmse"] > 0.05
    assert ekf_settings(problem).process_std == problem.mhe.process_std

"""benchmarks.mhe_bayesrace's one-step error on BayesRace's data: propagated starts reach the MHE minimum
that cold starts miss where the car's speed crosses zero (ETHZMobil's spin-out)."""
from pathlib import Path

import pytest

from benchmarks.mhe_bayesrace import one_step_error, with_values
from mhe import WindowSolver
from mhe.data.logs import BayesRaceRecording
from mhe.models.vehicle import BAYESRACE_TRUTH
from mhe.training import load_experiment
from tests.mhe.datasets import bayesrace_file

ROOT = Path(__file__).resolve().parents[2]


def test_propagated_starts_find_the_truth_in_the_spin_out(tmp_path):
    mobil = bayesrace_file("DYN-PP-ETHZMobil")
    bayesrace_file("DYN-PP-ETHZ")
    with pytest.MonkeyPatch.context() as mp:  # the config's paths are relative to the repository
        mp.chdir(ROOT)
        problem = load_experiment("configs/mhe_bayesrace_physics_gn.yaml", ["--trainer.logger", "false"]).problem
    src = problem.source
    val = with_values(problem, BayesRaceRecording(str(mobil), src.trajectory, src.first, src.dt, src.dt_rtol),
                      BAYESRACE_TRUTH, None)
    sub = val.replace(windows=41)  # the first 41 windows: in windows 37 and 38 vx crosses 0
    est = sub.estimator()
    with WindowSolver(est, tmp_path) as solver:
        cold = one_step_error(est, sub, solver, 3)
        propagated = one_step_error(est, sub, solver, 3, passes=3)
    assert cold["mse"] > 1e-5  # a local minimum of the MHE in windows 37 and 38
    assert propagated["mse"] < 1e-10 and propagated["failed"] == 0  # the truth, to rounding

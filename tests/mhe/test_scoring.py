"""The one scorer (`mhe.scoring`): the one-step error of Eq. (9) as ``torch-ude validate`` and the benchmarks take
it, values scored on another recording, the open-loop rollouts from the MHE estimates."""
from pathlib import Path

import pytest
import torch

from mhe import ArrivalCost, WindowSolver
from mhe.data.logs import BayesRaceRecording
from mhe.models.vehicle import BAYESRACE_TRUTH
from mhe.outer.residual_check import window_errors
from mhe.scoring import (logged_after, on_windows_of, one_step_error, open_loop_error, score_problem, with_residual,
                          with_values)
from mhe.training import load_experiment
from tests.mhe.datasets import bayesrace_file, data_file
from tests.mhe.helpers import leak_problem

ROOT = Path(__file__).resolve().parents[2]
IAC = "iac/LVMS_23_01_04_B.csv"
IAC_CONFIG = "configs/mhe_iac_physics_gn.yaml"
IAC_TINY = ["--data.problem.recording.init_args.part", "[0.0, 0.05]", "--data.problem.windows", "5",
            "--data.problem.arrival.mean", "[7.0, 0.0, 0.0]", "--trainer.logger", "false"]


def test_the_one_step_error_is_the_mean_square_of_the_solved_windows_residuals(tmp_path):
    problem = leak_problem(inflow=0.2, noise=0.01, a=0.5)
    windows = problem.windows
    with WindowSolver(problem.estimator(), tmp_path) as solver:
        error = one_step_error(solver, windows, 2)
        r, ok = window_errors(solver, windows, 2)
    assert error["windows"] == len(windows) and error["failed"] == int((~ok).sum()) == 0
    assert error["mse"] == pytest.approx(float((r ** 2).mean()), rel=1e-12)
    assert error["max_abs"] == pytest.approx(float(r.abs().max()), rel=1e-12)
    # score_problem solves as one_step_error does, with passes of propagated starts too
    with WindowSolver(problem.estimator(), tmp_path / "propagated") as solver:
        propagated = one_step_error(solver, windows, 2, passes=1)
    assert score_problem(problem, tmp_path / "score", 2, passes=1)[0] == propagated


def test_with_values_keeps_the_problem_and_sets_its_physics(tmp_path):
    problem = leak_problem(inflow=0.0, noise=0.0, a=0.5)
    other = with_values(problem, problem.source, {"a": 0.7, "c": 0.0}, None)
    assert other.start_values() == {"a": 0.7, "c": 0.0} and problem.start_values()["a"] == 0.5
    assert other.physics.params.free_names == problem.physics.params.free_names
    assert torch.equal(other.windows.y, problem.windows.y) and other.arrival == problem.arrival
    trained = with_values(problem, problem.source, {"a": 0.5, "c": 0.0}, ([2.0], [0.5])).arrival
    assert (trained.mean, trained.std, trained.box) == ((2.0,), (0.5,), None)  # no box: nothing to clip into
    # a trained arrival cost far outside the data's box is clipped into it
    boxed = problem.replace(arrival=ArrivalCost((1.0,), (1.0,), box=(None,)))
    clipped = with_values(boxed, boxed.source, {"a": 0.5, "c": 0.0}, ([1e6], [1e6])).arrival
    y = boxed.recording.outputs
    assert float(y.min()) - 1.0 < clipped.mean[0] < float(y.max()) + 1.0 and clipped.std[0] < 1e6


def test_the_open_loop_error_averages_rollouts_steps_and_outputs():
    meas = torch.zeros(4, 3, 2)
    pred = meas.clone()
    pred[:, -1, 1] = 2.0
    out = open_loop_error(pred, meas)
    assert out == {"mse": pytest.approx(4.0 / 6), "steps": 3, "rollouts": 4, "rmse_end": [0.0, 2.0]}
    y = torch.arange(20.0)[:, None].repeat(1, 2)
    after = logged_after(y, torch.tensor([0, 5]), 3)
    assert after.shape == (2, 3, 2) and after[:, :, 0].tolist() == [[1.0, 2.0, 3.0], [6.0, 7.0, 8.0]]


def test_a_problem_trained_at_another_stride_is_scored_on_the_reference_windows_with_their_warm_starts():
    problem = leak_problem(inflow=0.0, noise=0.0, a=0.5)
    reference = problem.replace(stride=6, windows=5)  # starts 0, 6, ..., 24
    trained = problem.replace(stride=3, windows=7)  # starts 0, 3, ..., 18
    warm = [f"start of window {i}" for i in range(7)]
    scored, kept = on_windows_of(trained, reference, warm)
    assert scored.stride == 6 and torch.equal(scored.windows.start, reference.windows.start)
    assert torch.equal(scored.windows.y, reference.windows.y)
    assert kept == ["start of window 0", "start of window 2", "start of window 4", "start of window 6", None]


def test_propagated_starts_find_the_truth_in_the_spin_out(tmp_path, monkeypatch):
    mobil = bayesrace_file("DYN-PP-ETHZMobil")
    bayesrace_file("DYN-PP-ETHZ")
    monkeypatch.chdir(ROOT)  # the config's paths are relative to the repository
    problem = load_experiment("configs/mhe_bayesrace_physics_gn.yaml", ["--trainer.logger", "false"]).problem
    src = problem.source
    val = with_values(problem, BayesRaceRecording(str(mobil), src.trajectory, src.first, src.dt, src.dt_rtol),
                      BAYESRACE_TRUTH, None)
    sub = val.replace(windows=41)  # the first 41 windows: in windows 37 and 38 vx crosses 0
    with WindowSolver(sub.estimator(), tmp_path) as solver:
        cold = one_step_error(solver, sub.windows, 3)
        propagated = one_step_error(solver, sub.windows, 3, passes=3)
    assert cold["mse"] > 1e-5  # a local minimum of the MHE in windows 37 and 38
    assert propagated["mse"] < 1e-10 and propagated["failed"] == 0  # the truth, to rounding


def _iac_problem(monkeypatch, tmp_path, *more: str):
    data_file(IAC)
    monkeypatch.chdir(ROOT)
    problem = load_experiment(IAC_CONFIG, [*IAC_TINY, *more, "--model.solver.build_dir", str(tmp_path)]).problem
    problem.recording  # read while in ROOT
    return problem


def test_the_first_rollout_step_is_the_one_step_prediction(tmp_path, monkeypatch):
    problem = _iac_problem(monkeypatch, tmp_path)
    one, curve = score_problem(problem, tmp_path / "score", 1, rollout_steps=1)
    assert one["failed"] == 0 and one["multi_step"]["rollouts"] == 5
    assert one["multi_step"]["mse"] == pytest.approx(one["mse"], rel=1e-6)
    first = problem.windows.start + problem.windows.horizon  # the sample of y~_N
    assert torch.equal(curve["first"], first)


def test_no_rollout_runs_over_a_gap_in_the_log(tmp_path, monkeypatch):
    problem = _iac_problem(monkeypatch, tmp_path, "--data.problem.recording.init_args.part", "[0.0, 0.03, 0.04, 0.07]",
                           "--data.problem.windows", "15")
    gap = problem.recording.breaks[0]
    assert problem.recording.breaks == (301,) and problem.windows.start[-1] == 280  # 280 + 9 + 25 > 301
    one, curve = score_problem(problem, tmp_path / "score", 1, rollout_steps=25)
    assert one["failed"] == 0 and one["multi_step"]["rollouts"] == 14 and int(curve["first"].max()) < gap - 25


def test_residual_weights_for_a_model_without_a_residual_are_an_error():
    problem = leak_problem(inflow=0.0, noise=0.0, a=0.5).replace(residual=None)
    with pytest.raises(ValueError, match="problem without a neural residual"):
        with_residual(problem.model(), {})

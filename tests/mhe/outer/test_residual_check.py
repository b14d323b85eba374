"""The residual check of a gray-box run (`mhe.outer.residual_check`): a residual that can only hurt is removed,
one that learns a missing term is kept, the check scores the physics alone as a physics-only model scores."""
import logging

import pytest
import torch
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from mhe import MovingHorizonEstimator, OuterSettings, PEMIdentifier, SolverSettings, WindowSolver
from mhe.outer import residual_check
from mhe.outer.residual_check import CHECK_PASSES, check_residual, free_run_error, without_residual
from mhe.scoring import one_step_error
from tests.mhe.helpers import leak_problem


def _fit(problem, tmp_path, optimizer, steps):
    with PEMIdentifier(problem, steps, OuterSettings(optimizer=optimizer, lr=0.05, lr_min=0.005),
                       SolverSettings(build_dir=str(tmp_path))) as pem:
        return pem.fit(), pem.estimator


def _physics_alone_error(est: MovingHorizonEstimator, windows, build) -> float:
    """The one-step error of a physics-only model (no residual, no L4CasADi) at ``est``'s parameters."""
    alone = MovingHorizonEstimator(without_residual(est.model), est.settings, est.arrival_mean.tolist(),
                                   est.arrival_std().tolist(), est.arrival_mean_bounds, est.arrival_std_bounds)
    with WindowSolver(alone, build) as solver:
        return one_step_error(solver, windows, 1, CHECK_PASSES)["mse"]


def test_a_residual_that_can_only_hurt_is_rejected_and_the_run_keeps_its_physics_alone(tmp_path, caplog):
    problem = leak_problem(inflow=0.0, noise=0.0, a=0.5)  # exact physics at its true value, noise-free data
    with caplog.at_level(logging.WARNING, "mhe.outer.residual_check"):
        result, est = _fit(problem, tmp_path / "fit", "adam", 2)  # Adam's first steps move the residual off zero
    check = result.residual_check
    assert check["rejected"] and not check["kept"] and result.residual_rejected
    assert check["hybrid"] > 5 * check["start_physics"] and check["windows"] == check["held_out"] == 5
    assert "residual rejected" in caplog.text and "residual.keep_rejected: true" in caplog.text
    assert "residual check rejected" in result.summary()
    x, u = torch.linspace(0.0, 3.0, 7)[:, None], torch.linspace(-1.0, 2.0, 7)[:, None]
    with torch.no_grad():
        assert torch.equal(est.model.residual(x, u), torch.zeros_like(x))  # the run's model is its physics alone
        assert torch.equal(est.model.field(x, u, 0 * x), est.model.physics(x, u))
    held = problem.held_out_windows
    assert check["model"] == "start_physics"  # Adam moved the physics too; the run started at the exact one
    assert check["start_physics"] == pytest.approx(_physics_alone_error(est, held, tmp_path / "alone"), rel=1e-6)
    assert result.parameters["a"] == pytest.approx(0.5)  # the run reports the model it exports


def test_a_residual_that_learns_a_missing_term_is_kept(tmp_path):
    problem = leak_problem(inflow=0.3, noise=0.01, a=0.6)  # the physics lacks the inflow c = 0.3
    result, est = _fit(problem, tmp_path, "gauss_newton", 2)
    check = result.residual_check
    assert not check["rejected"] and check["kept"] and not result.residual_rejected
    assert check["hybrid"] < 0.1 * check["physics"]
    assert float(est.model.residual.mlp.layers[-1][0].detach().abs().max()) > 0.0


def test_keep_rejected_keeps_a_rejected_residual_and_warns(tmp_path, caplog):
    problem = leak_problem(inflow=0.0, noise=0.0, a=0.5)
    est = problem.estimator()
    weight = est.model.residual.mlp.layers[-1][0]
    with torch.no_grad():
        weight.normal_(0.0, 0.5, generator=torch.Generator().manual_seed(1))  # a residual that can only hurt
    before = weight.detach().clone()
    with WindowSolver(est, tmp_path) as solver, caplog.at_level(logging.WARNING, "mhe.outer.residual_check"):
        kept = check_residual(solver, problem.held_out_windows, keep_rejected=True, on="the tail")
        assert kept["rejected"] and kept["kept"] and torch.equal(weight, before)
        assert "on the tail" in caplog.text and "the residual is kept (residual.keep_rejected)" in caplog.text
        removed = check_residual(solver, problem.held_out_windows)
    assert removed["rejected"] and not removed["kept"] and not bool(weight.any())
    assert removed["hybrid"] == pytest.approx(kept["hybrid"]) and removed["physics"] == pytest.approx(kept["physics"])


def test_with_the_check_off_a_run_trains_on_the_whole_recording_and_checks_nothing(tmp_path):
    problem = leak_problem(inflow=0.0, noise=0.0, a=0.5, check=False)
    assert problem.held_out_windows is None and len(problem.windows) == 32
    result, est = _fit(problem, tmp_path, "adam", 1)
    assert result.residual_check is None and not result.residual_rejected
    assert float(est.model.residual.mlp.layers[-1][0].detach().abs().max()) > 0.0


def test_the_check_needs_a_residual(tmp_path):
    problem = leak_problem(inflow=0.0, noise=0.0, a=0.5)
    est = problem.replace(residual=None).estimator()
    with pytest.raises(ValueError, match="has no neural residual"):
        check_residual(WindowSolver(est, tmp_path), problem.held_out_windows)


def test_a_residual_beside_drifted_physics_falls_back_to_the_physics_the_run_started_from(tmp_path, caplog):
    problem = leak_problem(inflow=0.0, noise=0.0, a=0.5)  # the run starts at the exact physics
    est = problem.estimator()
    start = parameters_to_vector(est.parameters()).detach().clone()
    drifted = parameters_to_vector(leak_problem(inflow=0.0, noise=0.0, a=0.8).estimator().parameters()).detach()
    with torch.no_grad():
        vector_to_parameters(drifted, est.parameters())  # the physics moved off its start during the fit ...
        est.model.residual.mlp.layers[-1][0].normal_(0.0, 0.5, generator=torch.Generator().manual_seed(1))  # ... and
    assert est.parameter_values()["a"] == pytest.approx(0.8)  # the residual learned something to make up for it
    with WindowSolver(est, tmp_path) as solver, caplog.at_level(logging.WARNING, "mhe.outer.residual_check"):
        check = check_residual(solver, problem.held_out_windows, start=start)
    assert check["rejected"] and not check["kept"] and check["model"] == "start_physics"
    assert check["start_physics"] < check["physics"] and check["start_physics"] < check["hybrid"]
    assert "the physics it started from" in caplog.text
    assert est.parameter_values()["a"] == pytest.approx(0.5) and not bool(est.model.residual.mlp.layers[-1][0].any())


def test_a_start_of_another_estimator_is_refused(tmp_path):
    problem = leak_problem(inflow=0.0, noise=0.0, a=0.5)
    est = problem.estimator()
    with pytest.raises(ValueError, match="start has 3 parameters"):
        check_residual(WindowSolver(est, tmp_path), problem.held_out_windows, start=torch.zeros(3))


def test_the_check_scores_each_candidate_by_free_run_on_the_tail_too(tmp_path):
    problem = leak_problem(inflow=0.3, noise=0.01, a=0.6)  # the physics lacks the inflow c = 0.3
    result, est = _fit(problem, tmp_path, "gauss_newton", 2)
    free = result.residual_check["free_run"]
    assert free["metric"] == "free_run_mse" and result.residual_check["kept"]
    assert free["hybrid"] < 0.1 * free["physics"]  # the residual carries the inflow in free run too
    tail = problem.held_out_recording
    assert free["hybrid"] == pytest.approx(free_run_error(est, tail), rel=1e-6)
    alone = MovingHorizonEstimator(without_residual(est.model), est.settings, est.arrival_mean.tolist(),
                                   est.arrival_std().tolist(), est.arrival_mean_bounds, est.arrival_std_bounds)
    assert free["physics"] == pytest.approx(free_run_error(alone, tail), rel=1e-6)
    off = leak_problem(inflow=0.3, noise=0.01, a=0.6, check_free_run=False)
    assert _fit(off, tmp_path / "off", "gauss_newton", 2)[0].residual_check["free_run"] is None


def test_a_residual_better_by_one_step_but_worse_in_free_run_is_rejected(tmp_path, caplog, monkeypatch):
    problem = leak_problem(inflow=0.3, noise=0.01, a=0.6)
    result, est = _fit(problem, tmp_path, "gauss_newton", 2)
    assert not result.residual_check["rejected"]  # one step and free run both prefer the residual here ...
    scores = iter([0.5, 0.2, 0.3])  # ... now let the free run of the hybrid, its physics, its start score so
    monkeypatch.setattr(residual_check, "free_run_error", lambda estimator, recording: next(scores))
    start = parameters_to_vector(problem.estimator().parameters()).detach()
    with WindowSolver(est, tmp_path / "again") as solver, caplog.at_level(logging.WARNING, "mhe.outer.residual_check"):
        check = check_residual(solver, problem.held_out_windows, start=start, tail=problem.held_out_recording)
    assert check["hybrid"] < check["physics"] and check["hybrid"] < check["start_physics"]  # better by one step
    assert check["rejected"] and not check["kept"] and check["model"] == "physics"  # the better free run of the two
    assert check["free_run"] == {"metric": "free_run_mse", "hybrid": 0.5, "physics": 0.2, "start_physics": 0.3}
    assert "free-run error 0.5 against 0.2" in caplog.text
    assert not bool(est.model.residual.mlp.layers[-1][0].any())

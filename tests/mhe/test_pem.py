"""The in-process identifier: the problem's estimator, the loop over all windows, the result of a run; PEM-MHE against
its output-error refinement."""
import pytest

from mhe import IdentificationProblem, OuterSettings, PEMIdentifier, PEMLoop, SolverSettings, WindowSolver
from mhe.pem import compare_refinement
from mhe.problems.oscillator import oscillator_problem
from tests.mhe.helpers import racing_problem


@pytest.mark.parametrize("optimizer", ["adam", "gauss_newton"])
def test_identifier_runs_the_loop_over_all_windows_of_the_problem(optimizer, tmp_path):
    problem: IdentificationProblem = racing_problem()
    outer = OuterSettings(optimizer=optimizer, lr=0.02)
    with PEMIdentifier(problem, 3, outer, SolverSettings(build_dir=str(tmp_path / "a"))) as pem:
        seen = []
        result = pem.fit(lambda i, step: seen.append((i, step.n_used)))
    assert seen == [(i, len(problem.windows)) for i in range(3)] and result.counters.steps == 3
    est = problem.estimator()
    loop = PEMLoop(est, WindowSolver(est, tmp_path / "b"), outer, 3)
    for _ in range(3):
        loop.step(range(len(problem.windows)), problem.windows)
    assert [h.loss for h in loop.history] == [h.loss for h in pem.loop.history]
    assert est.parameter_values() == result.parameters
    assert set(result.rel_errors) == set(est.model.physics.params.free_names)
    assert result.mean_rel_error == pytest.approx(sum(result.rel_errors.values()) / 16)
    assert "mean relative parameter error" in result.summary()


def test_the_problem_is_not_changed_by_a_run(tmp_path):
    problem = racing_problem()
    start = problem.estimator().parameter_values()
    with PEMIdentifier(problem, 2, OuterSettings(lr=0.05), SolverSettings(build_dir=str(tmp_path))) as pem:
        result = pem.fit()
    assert result.parameters != start and problem.estimator().parameter_values() == start


def test_compare_refinement_scores_pem_mhe_and_the_refined_model_by_free_run(tmp_path):
    problem = oscillator_problem("foh", steps=200, noise=0.01, seed=0)
    clean = problem.logged.states[:, :1]
    with PEMIdentifier(problem, 2, OuterSettings(optimizer="gauss_newton"),
                       SolverSettings(build_dir=str(tmp_path))) as pem:
        report = compare_refinement(pem, clean, lambda p: {"omega": p.estimator.parameter_values()["omega"]})
    alone, refined = report["pem_mhe"], report["refined"]
    assert list(alone) == ["free_run_rmse", "free_run_rmse_clean", "omega", "rel_errors", "steps", "stop", "wall_s"]
    assert list(refined)[-3:] == ["success", "ipopt_iterations", "wall_s"] and alone["steps"] == 2
    assert refined["free_run_rmse"] <= alone["free_run_rmse"] + 1e-12  # it starts at the PEM model
    assert set(alone["rel_errors"]) == {"omega", "zeta", "gain"} and alone["omega"] != refined["omega"]
    with PEMIdentifier(problem, 1, OuterSettings(criterion="simulation"),
                       SolverSettings(build_dir=str(tmp_path / "b"))) as pem:
        with pytest.raises(ValueError, match="outer.criterion must be 'prediction', got 'simulation'"):
            compare_refinement(pem, clean)

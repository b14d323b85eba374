"""The in-process identifier: the problem's estimator, the loop over all windows, the result of a run."""
import pytest

from mhe import IdentificationProblem, OuterSettings, PEMIdentifier, PEMLoop, SolverSettings, WindowSolver
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

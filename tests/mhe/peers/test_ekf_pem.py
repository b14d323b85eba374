"""EKF->PEM as one pipeline (`mhe.peers.ekf_pem`) on BayesRace's noise-free data: from the truth it stays there,
from the config's 67.95 % start the filter loses the unmeasured vy; identified values end inside their bounds."""
import pytest

from mhe.models.vehicle import BAYESRACE_TRUTH
from mhe.peers.ekf_pem import ekf_one_step_error, ekf_pem, ekf_settings, run_ekf
from mhe.scoring import with_values
from tests.mhe.datasets import bayesrace_problem


@pytest.fixture(scope="module")
def problem():
    return bayesrace_problem()


def test_from_the_truth_the_ekf_and_the_fit_stay_at_the_truth(problem, tmp_path):
    truth = {**problem.start_values(), **{n: BAYESRACE_TRUTH[n] for n in problem.physics.params.free_names}}
    res = ekf_pem(with_values(problem, problem.source, truth, None), tmp_path, [truth])
    assert res.hidden_rmse < 1e-9  # noise-free: vy to rounding
    assert max(abs(v - truth[n]) / abs(truth[n]) for n, v in res.fit.values.items()) < 1e-7
    assert res.fit.at_bounds == () and set(res.values) == set(truth)
    assert res.wall_s >= res.ekf.wall_s + res.fit.wall_s > 0


def test_from_the_67_percent_start_the_ekf_loses_vy_and_the_values_stay_inside_the_bounds(problem, tmp_path):
    res = ekf_pem(problem, tmp_path)  # the start values: the filter's model and the fit's one start
    assert res.hidden_rmse > 0.05
    assert len(res.fit.starts) == 1
    bounds = problem.physics.params.bounds
    assert all(b.lower < res.values[n] < b.upper for n, b in bounds.items())
    assert ekf_settings(problem).process_std == problem.mhe.process_std
    assert ekf_settings(problem).initial_mean == problem.arrival.mean


def test_a_filter_run_before_is_reused_and_its_time_counted(problem, tmp_path):
    filtered = run_ekf(problem, tmp_path / "ekf")
    res = ekf_pem(problem, tmp_path / "unused", filtered=filtered)
    assert res.ekf is filtered and res.wall_s >= filtered.wall_s + res.fit.wall_s
    again = ekf_pem(problem, tmp_path / "again")
    assert again.values == pytest.approx(res.values, rel=1e-9)
    # the filter's own one-step error: its squared innovations after the prior's first
    assert ekf_one_step_error(problem, tmp_path / "ekf") == pytest.approx(
        float((filtered.innovations[1:] ** 2).mean()), rel=1e-12)

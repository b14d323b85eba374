"""The starts report of a run's end (mhe.outer.report.starts_report): J from warm and cold starts side by side."""
import pytest

from mhe import WindowSolver
from mhe.outer.report import starts_report
from tests.mhe.helpers import estimator, vehicle_windows


def test_warm_starts_at_the_cold_solutions_report_the_same_minima(tmp_path):
    est, windows = estimator("physics", 6), vehicle_windows(6, 3)
    with WindowSolver(est, tmp_path) as solver:
        warm = solver.solve(windows).starts
        cold_only = starts_report(solver, windows)
        report = starts_report(solver, windows, warm)
    assert set(cold_only) == {"J_cold_start", "n_failed_cold_start", "J_cold_multistart", "report_starts",
                              "n_failed_multistart"}
    assert cold_only["J_cold_multistart"] == cold_only["J_cold_start"] > 0 and cold_only["report_starts"] == 1
    assert report["J_warm"] == pytest.approx(report["J_cold_start"], rel=1e-9) and report["n_failed_warm"] == 0
    assert report["windows_J_differ_warm_cold"] == report["windows_J_differ_warm_multistart"] == 0
    assert report["windows_cold_lower_cost"] == 0 and report["J_lower_cost"] == report["J_warm"]

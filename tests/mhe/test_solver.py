"""Window solver: failed windows are dropped with a warning and a count; the pool equals in-process."""
import logging

import numpy as np
import torch

from mhe import WindowSolver
from tests.mhe.helpers import estimator, vehicle_windows


def test_a_failed_window_is_dropped_with_a_warning_and_counted(tmp_path, caplog):
    est, windows = estimator("physics", 6), vehicle_windows(6, 3)
    solver = WindowSolver(est, tmp_path)
    good = solver.solve(windows)
    assert bool(good.ok.all()) and good.n_failed == 0
    starts = list(good.starts)
    starts[1] = (np.full_like(starts[1][0], np.nan), starts[1][1])
    with caplog.at_level(logging.WARNING, logger="mhe.solver"):
        bad = solver.solve(windows, starts)
    assert bad.ok.tolist() == [True, False, True] and bad.n_failed == 1
    assert "1 of 3 MHE windows failed" in caplog.text
    assert bad.starts[1] is None and bad.starts[0] is not None
    assert torch.allclose(bad.point[[0, 2]].x, good.point[[0, 2]].x, atol=1e-10)


def test_ipopt_iteration_limit_counts_as_failure(tmp_path):
    est, windows = estimator("physics", 6, max_iter=1), vehicle_windows(6, 2)
    sol = WindowSolver(est, tmp_path).solve(windows)
    assert sol.n_failed == 2 and set(sol.status) == {"Maximum_Iterations_Exceeded"}


def test_process_pool_gives_the_in_process_solutions(tmp_path):
    est, windows = estimator("physics", 6), vehicle_windows(6, 5)
    local = WindowSolver(est, tmp_path).solve(windows)
    with WindowSolver(est, tmp_path, workers=2) as pool:
        par = pool.solve(windows)
    assert bool(par.ok.all())
    assert torch.allclose(par.point.stages(), local.point.stages(), rtol=1e-9, atol=1e-11)

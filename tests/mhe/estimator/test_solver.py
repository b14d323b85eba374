"""Window solver: failed windows are dropped with a warning and a count; the pool equals in-process;
several cold starts find lower-cost solutions than one; propagated starts carry a window's estimate
into the next."""
import dataclasses
import logging

import numpy as np
import pytest
import torch

from mhe import MovingHorizonEstimator, WindowSolver
from mhe.estimator.arrival import arrival_bounds
from mhe.estimator.kkt import prediction_loss
from mhe.estimator.solver import (cold_guesses, cold_solve, lower_cost, lowest_cost_solve, propagated_guess,
                                 propagated_solve, solved_loss)
from tests.mhe.helpers import ARRIVAL_MEAN, ARRIVAL_STD, estimator, vehicle_windows


def test_a_failed_window_is_dropped_with_a_warning_and_counted(tmp_path, caplog):
    est, windows = estimator("physics", 6), vehicle_windows(6, 3)
    solver = WindowSolver(est, tmp_path)
    good = solver.solve(windows)
    assert bool(good.ok.all()) and good.n_failed == 0
    starts = list(good.starts)
    starts[1] = (np.full_like(starts[1][0], np.nan), starts[1][1])
    with caplog.at_level(logging.WARNING, logger="mhe.estimator.solver"):
        bad = solver.solve(windows, starts)
    assert bad.ok.tolist() == [True, False, True] and bad.n_failed == 1
    assert "1 of 3 MHE windows failed" in caplog.text
    assert bad.starts[1] is None and bad.starts[0] is not None
    assert torch.allclose(bad.point[[0, 2]].x, good.point[[0, 2]].x, atol=1e-10)
    # J leaves the failed window out: the same number as J of the windows that solved, taken alone
    alone = prediction_loss(est, bad.point[bad.ok].stages(), windows[bad.ok])[0].sum()
    assert solved_loss(est, windows, bad) == float(alone) < solved_loss(est, windows, good)


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


def test_cold_solve_keeps_the_lowest_mhe_cost_of_several_starts(tmp_path):
    est0, windows = estimator("physics", 8, perturb=1.0), vehicle_windows(8, 6)
    mean_b, std_b = arrival_bounds(windows, est0.model, {1: (-1.0, 1.0)})
    est = MovingHorizonEstimator(est0.model, est0.settings, ARRIVAL_MEAN, ARRIVAL_STD, mean_b, std_b)
    solver = WindowSolver(est, tmp_path)
    guesses = cold_guesses(est, windows, 5)
    assert [float(g.x[0, 3, 1]) for g in guesses] == pytest.approx([0.0, -0.9, -0.3, 0.3, 0.9])
    assert all(torch.equal(g.x[..., [0, 2]], guesses[0].x[..., [0, 2]]) for g in guesses)
    sols = [solver.solve(windows, guess=g) for g in guesses]
    assert all(bool(s.ok.all()) for s in sols)
    costs = torch.stack([est.objective(s.point.stages(), windows) for s in sols])
    multi, which = cold_solve(solver, windows, 5)
    kept = costs.gather(0, which[None])[0]
    assert torch.allclose(est.objective(multi.point.stages(), windows), kept, rtol=1e-12)
    assert bool((kept <= costs.min(0).values * (1 + 1e-9)).all())
    assert bool((which > 0).any())  # the start at s_bar ends in a worse local minimum in some window
    best, took = lower_cost(est, windows, sols[0], multi)
    assert torch.equal(took, which > 0)
    assert all((best.starts[i] is multi.starts[i]) == t for i, t in enumerate(took.tolist()))
    assert not bool(lower_cost(est, windows, multi, sols[0])[1].any())  # ties and higher costs keep the first
    failed = dataclasses.replace(sols[0], ok=torch.tensor([False] + [True] * 5))
    best, took = lower_cost(est, windows, failed, sols[0])
    assert took.tolist() == [True] + [False] * 5 and bool(best.ok.all())
    with pytest.raises(ValueError, match="two-sided s_bar bounds"):
        cold_guesses(est0, windows, 2)


def test_propagated_guess_carries_the_estimate_through_the_model(tmp_path):
    est, n = estimator("physics", 6), 6
    windows = vehicle_windows(n, 5, stride=n)  # back to back: window i starts where i - 1 ends
    windows = windows[[0, 1, 2, 4, 3]]  # any order; window 4 (at index 3) follows window 3 (index 4)
    sol = WindowSolver(est, tmp_path).solve(windows)
    assert bool(sol.ok.all())
    sol = dataclasses.replace(sol, ok=torch.tensor([True, True, False, True, True]))  # window 2 "failed"
    guess, first = propagated_guess(est, windows, sol), est.initial_point(windows)
    assert torch.equal(guess.x[..., [0, 2]], first.x[..., [0, 2]])  # measured states: the data
    for i, j in ((0, 1), (4, 3)):  # no predecessor (window 0) or a failed one (window 2): the successor's estimate
        assert torch.equal(guess.x[i, :, 1], sol.point.x[j, 0, 1].expand(n + 1))  # stride N: its first state
    for i, j in ((1, 0), (2, 1), (3, 4)):  # (index, predecessor's index)
        assert float(guess.x[i, 0, 1]) == float(sol.point.x[j, n, 1])
        path = guess.x[i, :1].clone()
        for k in range(n):
            path = torch.cat([path, est.model.step(path[-1:], windows.u[i, k][None], torch.zeros(1, 3))])
        assert torch.allclose(guess.x[i, :, 1], path[:, 1], rtol=0, atol=1e-14)
    assert guess.w.abs().max() == 0 and guess.mu_w.abs().max() == 0
    lap = vehicle_windows(n, 2, stride=3)  # overlapping windows: the estimates at the shared instants
    lap_sol = WindowSolver(est, tmp_path).solve(lap)
    lap_guess = propagated_guess(est, lap, lap_sol)
    assert float(lap_guess.x[1, 0, 1]) == float(lap_sol.point.x[0, 3, 1])
    assert torch.equal(lap_guess.x[0, 3:, 1], lap_sol.point.x[1, :4, 1])
    assert torch.equal(lap_guess.x[0, :3, 1], lap_sol.point.x[1, 0, 1].expand(3))
    gap = vehicle_windows(n, 3, stride=n + 2)  # a gap between windows: no neighbour, the cold guess
    assert torch.equal(propagated_guess(est, gap, WindowSolver(est, tmp_path).solve(gap)).x, est.initial_point(gap).x)


def test_propagated_solve_never_raises_a_cost_and_repairs_a_failed_window(tmp_path):
    est, n = estimator("physics", 6), 6
    windows = vehicle_windows(n, 4, stride=n)
    solver = WindowSolver(est, tmp_path)
    sol = solver.solve(windows)
    failed = dataclasses.replace(sol, ok=torch.tensor([True, False, True, True]))
    best, taken = propagated_solve(solver, windows, failed, passes=3)
    assert bool(best.ok.all()) and taken >= 1
    before, after = (est.objective(s.point.stages(), windows) for s in (sol, best))
    assert bool((after <= before * (1 + 1e-9)).all())
    with pytest.raises(ValueError, match="passes must be >= 1"):
        propagated_solve(solver, windows, sol, passes=0)


def test_lowest_cost_solve_composes_cold_warm_and_propagated_starts(tmp_path):
    est, n = estimator("physics", 6), 6
    windows = vehicle_windows(n, 4, stride=n)
    solver = WindowSolver(est, tmp_path)
    cold = cold_solve(solver, windows, 1)[0]
    assert torch.equal(lowest_cost_solve(solver, windows, 1).point.x, cold.point.x)
    warm = [None, *cold.starts[1:]]
    expected = propagated_solve(solver, windows, lower_cost(est, windows, solver.solve(windows, warm), cold)[0], 2)[0]
    got = lowest_cost_solve(solver, windows, 1, warm, passes=2)
    assert torch.allclose(got.point.x, expected.point.x, rtol=0, atol=1e-12) and bool(got.ok.all())

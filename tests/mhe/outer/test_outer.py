"""The outer loop: Adam, L-BFGS and Gauss-Newton steps lower J; a non-finite step is never applied; failed
windows are dropped and counted; Gauss-Newton stops; the loop's state survives a checkpoint."""
import dataclasses
import logging
import math
from collections.abc import Mapping, Sequence
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from mhe import (BoundedParameters, GaussNewtonStopping, MHESettings, MovingHorizonEstimator, OuterSettings, PEMLoop,
                 PhysicsField, StateSpaceModel, WindowSolver, make_windows)
from mhe.estimator.kkt import prediction_loss
from mhe.outer.report import PEMCounters, PEMResult
from tests.mhe.helpers import estimator, vehicle_windows


class _SqrtDecay(PhysicsField):
    """x' = -sqrt(a) x + u: at a = 0 the field is fine but d/da is infinite."""

    state_names = ("x",)
    input_names = ("u",)

    def __init__(self, a: float) -> None:
        super().__init__(BoundedParameters({"a": a}))

    def vector_field(self, x: Sequence, u: Sequence, p: Mapping[str, object], ops: SimpleNamespace) -> list:
        return [-ops.sqrt(p["a"]) * x[0] + u[0]]


class _CountingSolver(WindowSolver):
    """Counts solves; from solve number ``fail_from`` on, every window is reported failed."""

    def __init__(self, *args, fail_from: int | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.calls, self.fail_from = 0, fail_from

    def solve(self, windows, starts=None, guess=None):
        sol = super().solve(windows, starts, guess)
        self.calls += 1
        if self.fail_from is not None and self.calls >= self.fail_from:
            sol = dataclasses.replace(sol, ok=torch.zeros_like(sol.ok))
        return sol


def _loop(est, solver, steps=10, **settings):
    return PEMLoop(est, solver, OuterSettings(**settings), steps)


def _fit(loop, windows, steps):
    return [loop.step(range(len(windows)), windows) for _ in range(steps)]


@pytest.mark.parametrize("optimizer", ["adam", "lbfgs"])
def test_gradient_steps_lower_the_prediction_error(optimizer, tmp_path):
    est, windows = estimator("physics", 8, perturb=1.15), vehicle_windows(8, 6)
    loop = _loop(est, WindowSolver(est, tmp_path), optimizer=optimizer, lr=0.02, lr_min=0.02)
    hist = _fit(loop, windows, 6)
    assert all(h.applied and h.n_failed == 0 and not h.skipped for h in hist)
    assert hist[-1].loss < 0.5 * hist[0].loss
    assert loop.counters == PEMCounters(steps=6, updates=6)


def test_adam_follows_the_cosine_schedule_over_max_steps(tmp_path):
    est, windows = estimator("physics", 6), vehicle_windows(6, 2)
    loop = _loop(est, WindowSolver(est, tmp_path), steps=4, lr=0.04, lr_min=0.01)
    _fit(loop, windows, 2)
    assert loop.optimizer.param_groups[0]["lr"] == pytest.approx(0.01 + 0.5 * 0.03 * (1 + math.cos(math.pi / 2)))
    with pytest.raises(ValueError, match="max_steps must be >= 1"):
        _loop(est, WindowSolver(est, tmp_path), steps=-1)


class _FailingWarmSolver(_CountingSolver):
    """Reports every window of a warm-started solve (some start given) failed; cold solves are kept."""

    def solve(self, windows, starts=None, guess=None):
        sol = super().solve(windows, starts, guess)
        if starts is not None and any(s is not None for s in starts):
            sol = dataclasses.replace(sol, ok=torch.zeros_like(sol.ok))
        return sol


def test_adam_cold_every_takes_the_cold_started_solutions_where_they_are_better(tmp_path):
    est, windows = estimator("physics", 8, perturb=1.15), vehicle_windows(8, 4)
    solver = _FailingWarmSolver(est, tmp_path)
    hist = _fit(_loop(est, solver, lr=0.02, lr_min=0.02, cold_every=2), windows, 4)
    # iteration 1 solves cold (no warm starts yet); every warm-started solve fails; iterations 2 and 4 also solve
    # from a cold start and take it in every window, iteration 3 has no window left
    assert [h.n_used for h in hist] == [4, 4, 0, 4] and [h.switched for h in hist] == [0, 4, 0, 4]
    assert [h.evaluations for h in hist] == [1, 2, 1, 2] and solver.calls == 6
    assert [h.applied for h in hist] == [True, True, False, True] and hist[3].loss < hist[0].loss


def test_gauss_newton_steps_lower_the_prediction_error_and_reuse_the_accepted_solve(tmp_path):
    est, windows = estimator("physics", 8, perturb=1.15), vehicle_windows(8, 6)
    solver = _CountingSolver(est, tmp_path)
    hist = _fit(_loop(est, solver, optimizer="gauss_newton"), windows, 4)
    assert all(h.applied and h.n_failed == 0 and h.trial_failed == 0 for h in hist)
    assert all(b.loss < a.loss for a, b in zip(hist, hist[1:]))
    assert hist[-1].loss < 0.1 * hist[0].loss
    assert hist[0].evaluations >= 2 and solver.calls == sum(h.evaluations for h in hist)


@pytest.mark.parametrize("optimizer", ["adam", "lbfgs", "gauss_newton"])
def test_a_non_finite_hypergradient_is_never_applied(optimizer, tmp_path, caplog):
    model = StateSpaceModel(_SqrtDecay(0.0), dt=0.1, measured=(0,))
    t = torch.arange(30, dtype=torch.float64)
    windows = make_windows(torch.sin(0.3 * t)[:, None], torch.cos(0.2 * t)[:, None], horizon=5, stride=5)
    est = MovingHorizonEstimator(model, MHESettings(5, (0.1,), (0.1,)), (0.0,), (1.0,))
    before = {n: p.detach().clone() for n, p in est.named_parameters()}
    loop = _loop(est, WindowSolver(est, tmp_path), optimizer=optimizer, lr=0.1)
    (step,) = _fit(loop, windows, 1)
    assert step.n_failed == 0 and not step.applied and step.skipped and loop.counters.skipped == 1
    assert "Non-finite" in caplog.text
    assert all(torch.equal(p.detach(), before[n]) for n, p in est.named_parameters())


def test_gauss_newton_drops_and_counts_a_failed_window(tmp_path, caplog):
    est, windows = estimator("physics", 8, perturb=1.15), vehicle_windows(8, 4)
    loop = _loop(est, WindowSolver(est, tmp_path), optimizer="gauss_newton")
    good = WindowSolver(est, tmp_path / "ref").solve(windows)
    loop.starts = dict(enumerate(good.starts))
    loop.starts[1] = (np.full_like(good.starts[1][0], np.nan), good.starts[1][1])
    with caplog.at_level(logging.WARNING, logger="mhe.estimator.solver"):
        (step,) = _fit(loop, windows, 1)
    assert "1 of 4 MHE windows failed" in caplog.text
    assert step.n_failed == 1 and step.n_used == 3 and step.applied and loop.counters.failed == 1
    keep = torch.tensor([True, False, True, True])
    assert step.loss == pytest.approx(float(prediction_loss(est, good.point.stages(), windows)[0][keep].sum()),
                                      rel=1e-8)
    assert _fit(loop, windows, 1)[0].n_failed == 0


def test_gauss_newton_rejects_trials_whose_windows_all_fail_and_keeps_alpha(tmp_path):
    est, windows = estimator("physics", 8, perturb=1.15), vehicle_windows(8, 3)
    before = {n: p.detach().clone() for n, p in est.named_parameters()}
    loop = _loop(est, _CountingSolver(est, tmp_path, fail_from=2), optimizer="gauss_newton", max_trials=2)
    (step,) = _fit(loop, windows, 1)
    assert not step.applied and step.evaluations == 3 and not step.skipped and step.n_failed == 0
    assert step.trial_failed == 2 * 3 == loop.counters.failed_trials  # both trials, all 3 windows
    assert loop.lm.nu == 8.0  # two rejections: mu grew by 2, then by 4
    assert all(torch.equal(p.detach(), before[n]) for n, p in est.named_parameters())


def test_gauss_newton_stops_when_a_test_fires_and_records_it(tmp_path):
    est, windows = estimator("physics", 8, perturb=1.15), vehicle_windows(8, 6)
    stopping = GaussNewtonStopping(ftol=0.5, patience=1, xtol=0.0, max_damping=0.0)
    loop = _loop(est, WindowSolver(est, tmp_path), optimizer="gauss_newton", stopping=stopping)
    hist = []
    while not loop.stop_reason and len(hist) < 30:
        hist += _fit(loop, windows, 1)
    assert loop.stop_reason == "ftol" and hist[-1].stop == "ftol" and len(hist) < 30
    assert all(h.applied and not h.stop for h in hist[:-1]) and hist[-1].applied
    losses = [h.loss for h in hist] + [float(prediction_loss(est, loop._solved[2].point.stages(), windows)[0].sum())]
    assert losses[-2] - losses[-1] <= 0.5 * losses[-1]
    assert all(a - b > 0.5 * b for a, b in zip(losses[:-2], losses[1:-1]))


def test_rows_are_padded_for_the_gathers(tmp_path):
    """A process with fewer windows than rows (the sampler's padding) takes the step of the unpadded loop."""
    est, windows = estimator("physics", 8, perturb=1.15), vehicle_windows(8, 4)
    padded = estimator("physics", 8, perturb=1.15)
    plain_loop = _loop(est, WindowSolver(est, tmp_path), optimizer="gauss_newton")
    padded_loop = _loop(padded, WindowSolver(padded, tmp_path / "p"), optimizer="gauss_newton")
    for _ in range(2):
        a = plain_loop.step(range(4), windows)
        b = padded_loop.step(range(4), windows, rows=6)
        assert a.loss == pytest.approx(b.loss, rel=1e-12) and a.n_used == b.n_used == 4
    assert torch.allclose(torch.cat([p.detach().reshape(-1) for p in est.parameters()]),
                          torch.cat([p.detach().reshape(-1) for p in padded.parameters()]), rtol=1e-10, atol=0.0)
    with pytest.raises(ValueError, match="rows >= len\\(index\\)"):
        plain_loop.step(range(4), windows, rows=3)


@pytest.mark.parametrize("optimizer", ["adam", "gauss_newton"])
def test_state_dict_restores_optimizer_damping_and_counters(optimizer, tmp_path):
    est, windows = estimator("physics", 6), vehicle_windows(6, 2)
    loop = _loop(est, WindowSolver(est, tmp_path), optimizer=optimizer)
    _fit(loop, windows, 2)
    resumed = _loop(est, WindowSolver(est, tmp_path), optimizer=optimizer)
    resumed.load_state_dict(loop.state_dict())
    assert resumed.counters == loop.counters and resumed.losses == loop.losses
    assert (resumed.lm.mu, resumed.lm.nu, resumed.lm.scale) == (loop.lm.mu, loop.lm.nu, loop.lm.scale)
    if optimizer == "adam":
        assert resumed.schedule.last_epoch == 2 and resumed.optimizer.param_groups[0]["lr"] == \
            loop.optimizer.param_groups[0]["lr"]
        for p in est.parameters():
            assert torch.equal(resumed.optimizer.state[p]["exp_avg"], loop.optimizer.state[p]["exp_avg"])


def test_settings_are_validated_and_the_summary_is_one_line():
    with pytest.raises(ValueError, match="optimizer must be one of"):
        OuterSettings(optimizer="sgd")
    with pytest.raises(ValueError, match="method must be one of"):
        OuterSettings(method="finite_differences")
    with pytest.raises(ValueError, match="lr_min must lie in"):
        OuterSettings(lr=0.01, lr_min=0.1)
    with pytest.raises(ValueError, match="cold_every must be >= 0"):
        OuterSettings(cold_every=-1)
    with pytest.raises(ValueError, match="cold_every is an option of Adam"):
        OuterSettings(optimizer="gauss_newton", cold_every=5)
    result = PEMResult(6.88e-4, "ftol", PEMCounters(71, 70, 0, 0, 1), 254.0, {"Bf": 1.0}, {"Bf": 0.066, "Cf": 0.01})
    line = result.summary("runs/x")
    assert "\n" not in line and "3.80 %" in line and "J = 6.8800e-04" in line and "stop: ftol" in line
    assert "71 steps" in line and "+1 in trials" in line and line.endswith("outputs in runs/x")
    assert "no true parameters" in dataclasses.replace(result, rel_errors={}).summary()


def test_adam_weight_decay_shrinks_only_the_residual_weights(gray_solver, tmp_path):
    """AdamW's decoupled decay: with a zero gradient the residual's weights shrink by lr * weight_decay, the
    physical parameters and the arrival cost stay; a model without a residual rejects it."""
    est, solver, _ = gray_solver
    saved = {k: v.clone() for k, v in est.state_dict().items()}
    try:
        loop = _loop(est, solver, lr=0.1, lr_min=0.1, weight_decay=0.5)
        net = {id(p) for p in est.model.residual.parameters()}
        before = [p.detach().clone() for p in est.parameters()]
        for p in est.parameters():
            p.grad = torch.zeros_like(p)
        loop.optimizer.step()
        for p, b in zip(est.parameters(), before):
            expected = b * (1 - 0.1 * 0.5) if id(p) in net else b
            assert torch.allclose(p.detach(), expected, rtol=1e-14, atol=0.0)
        assert any(float(b.abs().max()) > 0 for p, b in zip(est.parameters(), before) if id(p) in net)
    finally:
        est.load_state_dict(saved)
        for p in est.parameters():
            p.grad = None
    physics = estimator("physics", 6)
    with pytest.raises(ValueError, match="act on the neural residual"):
        _loop(physics, WindowSolver(physics, tmp_path), weight_decay=0.1)
    with pytest.raises(ValueError, match="weight_decay must be >= 0 and is an option of Adam"):
        OuterSettings(optimizer="gauss_newton", weight_decay=0.1)
    with pytest.raises(ValueError, match="weight_decay must be >= 0"):
        OuterSettings(weight_decay=-1.0)

"""Outer PEM loop: Adam and Gauss-Newton steps lower J; a non-finite step is never applied; failed windows;
Gauss-Newton stopping."""
import dataclasses
import logging
from collections.abc import Mapping, Sequence
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from mhe import (BoundedParameters, GaussNewtonStopping, MHESettings, MovingHorizonEstimator, PEMIdentifier,
                 PhysicsField, StateSpaceModel, WindowSolver, make_windows, prediction_loss)
from tests.mhe.helpers import estimator, vehicle_windows


class _SqrtDecay(PhysicsField):
    """x' = -sqrt(a) x + u: at a = 0 the field is fine but d/da is infinite."""

    state_names = ("x",)
    input_names = ("u",)

    def __init__(self, a: float) -> None:
        super().__init__(BoundedParameters({"a": a}))

    def vector_field(self, x: Sequence, u: Sequence, p: Mapping[str, object], ops: SimpleNamespace) -> list:
        return [-ops.sqrt(p["a"]) * x[0] + u[0]]


def test_pem_steps_lower_the_prediction_error(tmp_path):
    est, windows = estimator("physics", 8, perturb=1.15), vehicle_windows(8, 6)
    pem = PEMIdentifier(est, windows, WindowSolver(est, tmp_path), lr=0.02)
    hist = pem.fit(6)
    assert all(h.applied and h.n_failed == 0 for h in hist)
    assert hist[-1].loss < 0.5 * hist[0].loss


class _CountingSolver(WindowSolver):
    """Counts solves; from solve number ``fail_from`` on, every window is reported failed."""

    def __init__(self, *args, fail_from: int | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.calls, self.fail_from = 0, fail_from

    def solve(self, windows, starts=None):
        sol = super().solve(windows, starts)
        self.calls += 1
        if self.fail_from is not None and self.calls >= self.fail_from:
            sol = dataclasses.replace(sol, ok=torch.zeros_like(sol.ok))
        return sol


def test_gauss_newton_steps_lower_the_prediction_error_and_reuse_the_accepted_solve(tmp_path):
    est, windows = estimator("physics", 8, perturb=1.15), vehicle_windows(8, 6)
    solver = _CountingSolver(est, tmp_path)
    pem = PEMIdentifier(est, windows, solver, optimizer_name="gauss_newton")
    hist = pem.fit(4)
    assert all(h.applied and h.n_failed == 0 and h.trial_failed == 0 for h in hist)
    assert all(b.loss < a.loss for a, b in zip(hist, hist[1:]))
    assert hist[-1].loss < 0.1 * hist[0].loss
    assert hist[0].evaluations >= 2 and solver.calls == sum(h.evaluations for h in hist)


@pytest.mark.parametrize("optimizer", ["adam", "gauss_newton"])
def test_a_non_finite_hypergradient_is_never_applied(optimizer, tmp_path, caplog):
    model = StateSpaceModel(_SqrtDecay(0.0), dt=0.1, measured=(0,))
    t = torch.arange(30, dtype=torch.float64)
    windows = make_windows(torch.sin(0.3 * t)[:, None], torch.cos(0.2 * t)[:, None], horizon=5, stride=5)
    est = MovingHorizonEstimator(model, MHESettings(5, (0.1,), (0.1,)), (0.0,), (1.0,))
    before = {n: p.detach().clone() for n, p in est.named_parameters()}
    pem = PEMIdentifier(est, windows, WindowSolver(est, tmp_path), lr=0.1, optimizer_name=optimizer)
    step = pem.step()
    assert step.n_failed == 0 and not step.applied and pem.skipped == 1
    assert "Non-finite" in caplog.text
    assert all(torch.equal(p.detach(), before[n]) for n, p in est.named_parameters())


def test_gauss_newton_drops_and_counts_a_failed_window(tmp_path, caplog):
    est, windows = estimator("physics", 8, perturb=1.15), vehicle_windows(8, 4)
    pem = PEMIdentifier(est, windows, WindowSolver(est, tmp_path), optimizer_name="gauss_newton")
    good = WindowSolver(est, tmp_path / "ref").solve(windows)
    pem.starts = list(good.starts)
    pem.starts[1] = (np.full_like(good.starts[1][0], np.nan), good.starts[1][1])
    with caplog.at_level(logging.WARNING, logger="mhe.solver"):
        step = pem.step()
    assert "1 of 4 MHE windows failed" in caplog.text
    assert step.n_failed == 1 and step.n_used == 3 and step.applied
    keep = torch.tensor([True, False, True, True])
    assert step.loss == pytest.approx(float(prediction_loss(est, good.point.stages(), windows)[0][keep].sum()),
                                      rel=1e-8)
    assert pem.step().n_failed == 0


def test_gauss_newton_rejects_trials_whose_windows_all_fail_and_keeps_alpha(tmp_path):
    est, windows = estimator("physics", 8, perturb=1.15), vehicle_windows(8, 3)
    before = {n: p.detach().clone() for n, p in est.named_parameters()}
    pem = PEMIdentifier(est, windows, _CountingSolver(est, tmp_path, fail_from=2), optimizer_name="gauss_newton",
                        max_trials=2)
    step = pem.step()
    assert not step.applied and step.evaluations == 3 and pem.skipped == 0 and step.n_failed == 0
    assert step.trial_failed == 2 * 3  # both trials, all 3 windows
    assert pem.lm.nu == 8.0  # two rejections: mu grew by 2, then by 4
    assert all(torch.equal(p.detach(), before[n]) for n, p in est.named_parameters())


def test_gauss_newton_stops_when_a_test_fires_and_records_it(tmp_path):
    est, windows = estimator("physics", 8, perturb=1.15), vehicle_windows(8, 6)
    pem = PEMIdentifier(est, windows, WindowSolver(est, tmp_path), optimizer_name="gauss_newton",
                        stopping=GaussNewtonStopping(ftol=0.5, patience=1, xtol=0.0, max_damping=0.0))
    hist = pem.fit(30)
    assert pem.stop_reason == "ftol" and hist[-1].stop == "ftol" and len(hist) < 30
    assert all(h.applied and not h.stop for h in hist[:-1]) and hist[-1].applied
    losses = [h.loss for h in hist] + [float(prediction_loss(est, pem._solved[1].point.stages(), windows)[0].sum())]
    assert losses[-2] - losses[-1] <= 0.5 * losses[-1]
    assert all(a - b > 0.5 * b for a, b in zip(losses[:-2], losses[1:-1]))

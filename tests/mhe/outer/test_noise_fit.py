"""The two-stage start: the residual fitted to the MHE's process noise lowers the process-noise cost on held-out
windows, keeps the estimated states feasible (Euler), leaves the physics alone, and rejects what it cannot fit."""
import dataclasses
import math

import pytest
import torch

from mhe import (MHESettings, MovingHorizonEstimator, NeuralResidual, NoiseFitSettings, OuterSettings, PEMLoop,
                 SingleTrackVehicle, StateSpaceModel, Windows)
from mhe.outer.noise_fit import fit_to_process_noise
from tests.mhe.helpers import ARRIVAL_MEAN, ARRIVAL_STD, IN_SCALE, MEASUREMENT_STD, OUT_SCALE, PROCESS_STD
from tests.mhe.helpers import estimator, residual

M, N = 40, 5


def _gray(discretization: str = "euler") -> MovingHorizonEstimator:
    """The vehicle with a zero-last-layer residual, as a gray-box run starts."""
    net = NeuralResidual(3, 2, width=16, in_scale=IN_SCALE, out_scale=OUT_SCALE, seed=0)
    model = StateSpaceModel(SingleTrackVehicle(), net, dt=0.02, measured=(0, 2), discretization=discretization)
    return MovingHorizonEstimator(model, MHESettings(N, PROCESS_STD, MEASUREMENT_STD), ARRIVAL_MEAN, ARRIVAL_STD)


def _estimates(est: MovingHorizonEstimator, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, Windows]:
    """States in the residual's range, process noise = a smooth function of them (another network) plus noise."""
    gen = torch.Generator().manual_seed(seed)
    scale = torch.tensor(IN_SCALE, dtype=torch.float64)
    z = (torch.rand(M, N + 1, 5, generator=gen, dtype=torch.float64) * 2 - 1) * scale
    z[..., 0] += 2.0  # vx > 0
    x, u = z[..., :3], z[:, :N, 3:]
    teacher = residual(width=8, seed=7, last_std=1.0)
    with torch.no_grad():
        w = teacher(x[:, :N].reshape(M * N, 3), u.reshape(M * N, 2)).reshape(M, N, 3)
    w = w + 0.01 * torch.randn(w.shape, generator=gen, dtype=torch.float64) * torch.tensor(OUT_SCALE)
    return x, w, Windows(u, torch.zeros(M, N, 2, dtype=torch.float64), torch.arange(M) * 7)


def test_the_fit_lowers_the_held_out_process_noise_cost_and_leaves_the_physics():
    est = _gray()
    physics = {k: v.clone() for k, v in est.model.physics.state_dict().items()}
    arrival = est.arrival_mean.detach().clone()
    x, w, windows = _estimates(est)
    report = fit_to_process_noise(est, x, w, windows, NoiseFitSettings(steps=400, lr=0.01, check_every=20))
    assert (report.windows, report.held_out) == (M, 8)
    assert report.fit_after < 0.2 * report.fit_before and report.held_out_after < 0.5 * report.held_out_before
    assert report.best_step > 0 and report.best_step % 20 == 0 and report.wall_s > 0
    assert all(torch.equal(v, est.model.physics.state_dict()[k]) for k, v in physics.items())
    assert torch.equal(est.arrival_mean.detach(), arrival)
    assert all(p.grad is None for p in est.parameters())


def test_the_weights_of_the_lowest_held_out_cost_are_kept():
    """The held-out windows are the chronologically last; the kept weights score the reported held-out cost."""
    x, w, windows = _estimates(_gray(), seed=1)
    order = torch.randperm(M, generator=torch.Generator().manual_seed(3))  # storage order is not time order
    x, w, windows = x[order], w[order], windows[order]
    est = _gray()
    report = fit_to_process_noise(est, x, w, windows, NoiseFitSettings(steps=300, lr=0.05, check_every=10))
    last = torch.argsort(windows.start)[-report.held_out:]
    with torch.no_grad():
        pred = est.model.residual(x[last, :N].reshape(-1, 3), windows.u[last].reshape(-1, 2)).reshape(len(last), N, 3)
    held = float(((w[last] - pred) ** 2 * est.q_inv).sum() / len(last))  # the start's residual is zero
    assert held == pytest.approx(report.held_out_after, rel=1e-12)
    assert report.held_out_after <= report.held_out_before
    plain = _gray()
    no_hold = fit_to_process_noise(plain, x, w, windows, NoiseFitSettings(steps=300, lr=0.05, held_out=0.0))
    assert (no_hold.held_out, no_hold.best_step) == (0, 300) and math.isnan(no_hold.held_out_after)


def test_with_euler_the_fitted_residual_takes_over_the_noise_at_the_estimated_states():
    """The cost is that of w' = w + N - N', which keeps x_{k+1} = f_d(x_k, u_k, w') exactly under Euler."""
    est = _gray("euler")
    x, w, windows = _estimates(est, seed=2)
    model = est.model
    with torch.no_grad():  # make the states a trajectory of the start model with noise w
        for k in range(N):
            x[:, k + 1] = model.step(x[:, k], windows.u[:, k], w[:, k])
        before = model.residual(x[:, :N].reshape(-1, 3), windows.u.reshape(-1, 2)).reshape(M, N, 3)
    report = fit_to_process_noise(est, x, w, windows, NoiseFitSettings(steps=100, lr=0.01, held_out=0.0))
    with torch.no_grad():
        after = model.residual(x[:, :N].reshape(-1, 3), windows.u.reshape(-1, 2)).reshape(M, N, 3)
        w_new = w + before - after
        for k in range(N):
            assert torch.allclose(model.step(x[:, k], windows.u[:, k], w_new[:, k]), x[:, k + 1], rtol=0, atol=1e-12)
        cost = float((w_new ** 2 * est.q_inv).sum() / M)
    assert cost == pytest.approx(report.fit_after, rel=1e-12) and report.fit_after < report.fit_before


def test_bad_settings_and_inputs_are_rejected():
    for bad, match in (({"steps": -1}, "steps must be >= 0"), ({"check_every": 0}, "check_every must be >= 1"),
                       ({"lr": 0.0}, "lr must be > 0"), ({"lr": 1e-3, "lr_min": 1e-2}, "lr_min must lie in"),
                       ({"weight_decay": -1.0}, "weight_decay must be >= 0"), ({"held_out": 1.0}, "held_out must lie")):
        with pytest.raises(ValueError, match=match):
            NoiseFitSettings(**bad)
    est = _gray()
    x, w, windows = _estimates(est)
    with pytest.raises(ValueError, match="states of shape"):
        fit_to_process_noise(est, x[:, :N], w, windows, NoiseFitSettings(steps=1))
    with pytest.raises(ValueError, match="at least one window"):
        fit_to_process_noise(est, x[:0], w[:0], windows[:0], NoiseFitSettings(steps=1))
    physics = estimator("physics", N)
    with pytest.raises(ValueError, match="has none"):
        fit_to_process_noise(physics, x, w, windows, NoiseFitSettings(steps=1))


def test_the_loop_refuses_a_two_stage_start_without_a_residual(tmp_path):
    from mhe import WindowSolver
    est = estimator("physics", 6)
    with pytest.raises(ValueError, match="act on the neural residual"):
        PEMLoop(est, WindowSolver(est, tmp_path), OuterSettings(noise_fit=NoiseFitSettings(steps=10)), 5)


def test_the_loop_fits_once_before_its_first_iteration(gray_solver):
    """On the solved windows of all processes (padded rows dropped); a later or resumed step does not refit."""
    est, solver, windows = gray_solver
    saved = {k: v.clone() for k, v in est.state_dict().items()}
    try:
        settings = OuterSettings(lr=1e-4, lr_min=1e-4, noise_fit=NoiseFitSettings(steps=50, lr=0.01, held_out=0.0))
        loop = PEMLoop(est, solver, settings, 3)
        last = est.model.residual.mlp.ordered_parameters()[-2].detach().clone()
        first = loop.step(range(2), windows, rows=3)
        report = loop.noise_fit_report
        assert report is not None and (report.windows, report.held_out, report.best_step) == (2, 0, 50)
        assert report.fit_after < report.fit_before and first.n_used == 2 and loop.counters.steps == 1
        assert not torch.equal(est.model.residual.mlp.ordered_parameters()[-2].detach(), last)
        loop.step(range(2), windows, rows=3)
        assert loop.noise_fit_report is report
        resumed = PEMLoop(est, solver, settings, 3)
        resumed.load_state_dict(loop.state_dict())
        resumed.step(range(2), windows)
        assert resumed.noise_fit_report is None and resumed.counters.steps == 3
        assert dataclasses.asdict(OuterSettings())["noise_fit"] == dataclasses.asdict(NoiseFitSettings())
    finally:
        est.load_state_dict(saved)

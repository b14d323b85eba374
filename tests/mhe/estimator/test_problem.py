"""The CasADi side: expressions generated from torch, IPOPT solutions against the torch KKT system."""
import numpy as np
import torch

from mhe import WindowSolver
from mhe.estimator.kkt import kkt_residual
from mhe.estimator.point import KKTPoint
from mhe.estimator.problem import MHEProblem, OuterValues
from mhe.models.casadi_model import CasadiDynamics
from tests.mhe.helpers import estimator, vehicle_windows


def _states_inputs(n, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.stack([1.0 + 2 * torch.rand(n, generator=gen), 0.2 * torch.randn(n, generator=gen),
                     2 * torch.randn(n, generator=gen)], dim=1)
    u = torch.stack([0.3 * torch.randn(n, generator=gen), torch.rand(n, generator=gen)], dim=1)
    w = 0.1 * torch.randn(n, 3, generator=gen)
    return x, u, w


def test_casadi_step_is_the_torch_step_for_physics(tmp_path):
    model = estimator("physics", 4).model
    dyn = CasadiDynamics(model, tmp_path)
    x, u, w = _states_inputs(6)
    p = CasadiDynamics.parameter_values(model)
    ours = np.stack([np.asarray(dyn.step(x[i].numpy(), u[i].numpy(), w[i].numpy(), p)).ravel() for i in range(6)])
    with torch.no_grad():
        ref = model.step(x, u, w).numpy()
    assert np.allclose(ours, ref, rtol=1e-13, atol=1e-13)


def test_casadi_step_is_the_torch_step_for_gray_box_through_l4casadi(gray_solver):
    est, solver, windows = gray_solver
    solver.solve(windows)  # pushes the estimator's current weights into the compiled network
    dyn = solver._local.dynamics
    x, u, w = _states_inputs(6, seed=1)
    p = CasadiDynamics.parameter_values(est.model)
    ours = np.stack([np.asarray(dyn.step(x[i].numpy(), u[i].numpy(), w[i].numpy(), p)).ravel() for i in range(6)])
    with torch.no_grad():
        ref = est.model.step(x, u, w).numpy()
    assert np.allclose(ours, ref, rtol=1e-6, atol=1e-6)  # L4CasADi evaluates the network in float32


def test_ipopt_solution_is_a_kkt_point_of_the_torch_lagrangian_and_warm_starts(tmp_path):
    est, windows = estimator("physics", 8), vehicle_windows(8, 2)
    prob = MHEProblem(est, CasadiDynamics(est.model, tmp_path))
    prob.set_outer(OuterValues.of(est, 0))
    guess = est.initial_point(windows)
    u, y = windows.u.numpy(), windows.y.numpy()
    sols = [prob.solve(u[i:i + 1], y[i:i + 1], [prob.start_from(u[i], guess.primal()[i].numpy(),
                                                                 guess.dual()[i].numpy())])[0] for i in range(2)]
    assert all(s.success for s in sols)
    point = KKTPoint.from_flat(torch.tensor(np.stack([s.v for s in sols])), torch.tensor(np.stack([s.mu for s in sols])),
                               est.layout)
    res = kkt_residual(est, point.stages(), windows).abs().amax()
    assert float(res) < 1e-7
    (again,) = prob.solve(u[:1], y[:1], [sols[0].start])
    assert again.success and again.iterations <= 1


def test_one_batched_nlp_gives_the_per_window_solutions(tmp_path):
    est, windows = estimator("physics", 6), vehicle_windows(6, 3)
    single = WindowSolver(est, tmp_path).solve(windows)
    batched = WindowSolver(est, tmp_path, batch=3).solve(windows)
    assert bool(batched.ok.all()) and len(set(batched.iterations.tolist())) == 1
    assert torch.allclose(batched.point.stages(), single.point.stages(), rtol=1e-9, atol=1e-11)

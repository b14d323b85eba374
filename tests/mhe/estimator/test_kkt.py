"""KKT blocks, explicit vs adjoint-VJP hypergradients, and central differences through re-solved MHEs."""
import pytest
import torch
from torch.func import jacfwd

from mhe import WindowSolver, hypergradient_adjoint, hypergradient_explicit
from mhe.estimator.blocktri import block_tridiagonal_dense
from mhe.estimator.kkt import kkt_blocks, kkt_residual, prediction_loss
from tests.mhe.helpers import estimator, ipopt_kkt_point, kkt_point, torch_kkt_point, vehicle_windows


def _flat(grads):
    return torch.cat([g.reshape(-1) for g in grads.values()])


@pytest.mark.parametrize("kind", ["physics", "neural"])
def test_kkt_blocks_are_the_jacobian_of_the_kkt_residual(kind, tmp_path):
    est, windows = estimator(kind, 5), vehicle_windows(5, 2)
    z = ipopt_kkt_point(est, windows, tmp_path) if kind == "physics" else torch_kkt_point(est, windows)
    d, e = kkt_blocks(est, z, windows)
    mask = est.layout.mask().flatten()
    n = z[0].numel()
    for i in range(len(windows)):
        ref = jacfwd(lambda zz: kkt_residual(est, zz, windows[i:i + 1]))(z[i:i + 1]).reshape(n, n)
        ours = block_tridiagonal_dense(d, e)[i]
        assert torch.allclose(ours[mask][:, mask], ref[mask][:, mask], rtol=1e-12, atol=1e-9)
        assert mask.sum() == est.layout.n_z


@pytest.mark.parametrize("kind", ["physics", "neural", "gray"])
def test_explicit_and_adjoint_hypergradients_agree(kind, tmp_path, gray_solver):
    est, windows, z = kkt_point(kind, tmp_path, gray_solver)
    adj, exp = hypergradient_adjoint(est, z, windows), hypergradient_explicit(est, z, windows, chunk_size=16)
    assert torch.equal(adj.loss, exp.loss)
    ga, ge = _flat(adj.grads), _flat(exp.grads)
    assert float(ga.norm()) > 0
    assert float((ga - ge).norm() / ge.norm()) <= 1e-8


def _central_differences(est, solver, windows, directions, eps):
    params = dict(est.named_parameters())
    out = []
    for d in directions:
        vals = []
        for sign in (1.0, -1.0):
            with torch.no_grad():
                for n, p in params.items():
                    p.add_(sign * eps * d[n])
            sol = solver.solve(windows)
            assert bool(sol.ok.all())
            vals.append(float(prediction_loss(est, sol.point.stages(), windows)[0].sum()))
            with torch.no_grad():
                for n, p in params.items():
                    p.sub_(sign * eps * d[n])
        out.append((vals[0] - vals[1]) / (2 * eps))
    return torch.tensor(out)


def test_physics_hypergradient_matches_central_differences(tmp_path):
    est, windows = estimator("physics", 6, perturb=1.2), vehicle_windows(6, 3)
    solver = WindowSolver(est, tmp_path)
    sol = solver.solve(windows)
    grads = hypergradient_adjoint(est, sol.point.stages(), windows).grads
    basis = []
    for n, p in est.named_parameters():
        for j in range(p.numel()):
            d = {m: torch.zeros_like(q) for m, q in est.named_parameters()}
            d[n].view(-1)[j] = 1.0
            basis.append(d)
    fd = _central_differences(est, solver, windows, basis, eps=1e-5)
    g = _flat(grads)
    assert float((fd - g).norm() / g.norm()) <= 1e-5


def test_gray_box_hypergradient_matches_central_differences_through_l4casadi(gray_solver):
    est, solver, windows = gray_solver
    sol = solver.solve(windows)
    hg = hypergradient_adjoint(est, sol.point.stages(), windows)
    gen = torch.Generator().manual_seed(7)
    dirs = [{n: torch.randn(p.shape, generator=gen, dtype=p.dtype) for n, p in est.named_parameters()}
            for _ in range(2)]
    fd = _central_differences(est, solver, windows, dirs, eps=1e-5)
    ad = torch.tensor([float(sum((hg.grads[n] * d[n]).sum() for n in d)) for d in dirs])
    assert float((fd - ad).abs().max() / ad.abs().max()) <= 1e-5

"""The trust envelope of mhe's residual (issue 33, item 5): one box and fade with torch_ude.envelope, the CasADi
side equal to the torch side with exact derivatives, exact KKT blocks and hypergradients with the fade active,
the record of a run's windows, and one-line errors for an envelope from no data and bad margins."""
import copy

import casadi as cs
import numpy as np
import pytest
import torch
from torch.func import jacfwd, jacrev

from mhe import (ArrivalCost, IdentificationProblem, MHESettings, MovingHorizonEstimator, ResidualSettings,
                 StateSpaceModel, WindowSolver, hypergradient_adjoint, hypergradient_explicit)
from mhe.data.recording import Recording
from mhe.estimator.blocktri import block_tridiagonal_dense
from mhe.estimator.kkt import kkt_blocks, kkt_residual, prediction_loss
from mhe.models.casadi_model import CasadiDynamics
from mhe.models.envelope import record_envelope, residual_span
from mhe.outer.free_run import estimate_initial_states, simulate_free_run
from mhe.pem import envelope_of_windows
from mhe.problems.two_tank import TwoTanks, TwoTankSimulation
from torch_ude.envelope import envelope_from_span, fade
from torch_ude.input_map import InputMap
from tests.mhe.helpers import estimator, residual, torch_kkt_point, vehicle_windows


def _flat(grads):
    return torch.cat([g.reshape(-1) for g in grads.values()])


def _banded(est, states, inputs, band=0.5):
    """Give ``est``'s residual a box around the middle of ``states`` / ``inputs`` with a band wide enough that part of
    them falls inside the fade band (0 < w < 1), part inside the box and part beyond; returns the fade values."""
    net = est.model.residual
    if states.ndim == 3:  # (M, N + 1, n_x) stages with (M, N, n_u) inputs: the states the inputs drive
        states = states[:, :inputs.shape[1]]
    z = torch.cat([states.reshape(-1, net.n_x), inputs.reshape(-1, net.n_u)], dim=1) / net.in_scale
    lo, hi = torch.quantile(z, 0.35, dim=0), torch.quantile(z, 0.65, dim=0)
    net.set_envelope(lo, hi, band * (torch.quantile(z, 0.95, dim=0) - torch.quantile(z, 0.05, dim=0)))
    return net.fade(z)[0]


def test_the_box_and_fade_are_torch_udes_of_the_residual_inputs():
    net = residual()
    x = torch.randn(40, 3, dtype=torch.float64) * torch.tensor([2.0, 0.3, 3.0])
    u = torch.randn(40, 2, dtype=torch.float64)
    record = record_envelope(net, x, u, 0.25, (["vx", "vy", "omega"], ["delta", "pedal"]))
    low, high = torch.cat([x.min(0).values, u.min(0).values]), torch.cat([x.max(0).values, u.max(0).values])
    box = envelope_from_span(low, high, InputMap(3, 2), net.in_scale[:3], net.in_scale[3:], 0.25)
    assert all(torch.equal(a, b) for a, b in zip(net.envelope, box))
    assert record["columns"] == ["vx/s", "vy/s", "omega/s", "delta/s", "pedal/s"]
    assert record["span"]["low"] == low.tolist() and record["in_scale"] == [2.0, 0.3, 3.0]
    z = torch.cat([4 * x, 4 * u], dim=1) / net.in_scale
    bare = net.network(torch.cat([4 * x, 4 * u], dim=1))
    assert torch.equal(net(4 * x, 4 * u), fade(z, *box)[0] * bare)
    assert torch.equal(net(x, u), net.network(torch.cat([x, u], dim=1)))  # the data it saw: unchanged
    assert not bool(net.outside(x, u).any()) and bool(net.outside(4 * x, 4 * u).any())
    far = torch.cat([x[:1], u[:1]], dim=1) * 0 + 100.0
    assert torch.equal(net.rows(far), torch.zeros(1, 3, dtype=torch.float64))


def test_a_paired_holds_step_inputs_give_both_ends_and_the_state_dict_carries_the_envelope():
    low, high = residual_span(torch.zeros(2, 3, 2), torch.tensor([[[1.0, 5.0]], [[2.0, -1.0]]]), 1)
    assert low.tolist() == [0.0, 0.0, -1.0] and high.tolist() == [0.0, 0.0, 5.0]
    net = residual()
    record_envelope(net, torch.randn(10, 3), torch.randn(10, 2))
    other = residual()
    other.load_state_dict(net.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(other.envelope, net.envelope))
    assert residual().envelope is None


@pytest.mark.parametrize("call, message", [
    (lambda net: record_envelope(net, torch.zeros(0, 3), torch.zeros(0, 2)), "at least one solved training window"),
    (lambda net: record_envelope(net, torch.full((2, 3), float("nan")), torch.zeros(2, 2)), "non-finite"),
    (lambda net: record_envelope(net, torch.zeros(2, 3), torch.zeros(2, 3)), "must have 2 columns"),
    (lambda net: record_envelope(net, torch.zeros(2, 3), torch.zeros(2, 2), 0.0), "margin must be a positive"),
    (lambda net: record_envelope(net, torch.zeros(2, 3), torch.zeros(2, 2), -1.0), "margin must be a positive"),
    (lambda net: record_envelope(net, torch.zeros(2, 3), torch.zeros(2, 2), float("nan")), "margin must be a positive"),
    (lambda net: record_envelope(net, torch.zeros(2, 3), torch.zeros(2, 2), True), "margin must be a positive"),
    (lambda net: net.set_envelope(torch.zeros(4), torch.ones(4), torch.ones(4)), "must be 5 finite numbers"),
    (lambda net: net.set_envelope(torch.ones(5), torch.zeros(5), torch.ones(5)), "low <= high and a positive margin"),
    (lambda net: net.set_envelope(torch.zeros(5), torch.ones(5), torch.zeros(5)), "low <= high and a positive margin"),
    (lambda net: ResidualSettings(8, envelope_margin=0.0), "residual.envelope_margin"),
    (lambda net: ResidualSettings(8, envelope_margin=float("inf")), "residual.envelope_margin"),
    (lambda net: ResidualSettings(8, envelope="yes"), "residual.envelope must be true, false or null"),
])
def test_an_envelope_from_no_data_or_a_bad_margin_is_a_one_line_error(call, message):
    with pytest.raises(ValueError, match=message) as err:
        call(residual())
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("residual_kind", ["sx", "l4casadi"])
def test_the_casadi_field_is_the_torch_field_with_its_fade(residual_kind, tmp_path):
    est = estimator("gray", 5)
    model = est.model
    xs = torch.tensor([1.5, 0.0, 0.0]) + 0.5 * torch.randn(30, 3, generator=torch.Generator().manual_seed(0),
                                                         dtype=torch.float64)
    us = 0.5 * torch.randn(30, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    w = _banded(est, xs, us)
    assert bool(((w > 0) & (w < 1)).any()) and bool((w == 0).any())
    dyn = CasadiDynamics(model, tmp_path, name="env", residual=residual_kind)
    p = cs.DM(CasadiDynamics.parameter_values(model))
    zero = torch.zeros(30, 3, dtype=torch.float64)
    ref = model.field(xs, us, zero).detach().numpy()
    ours = np.array(dyn.field(cs.DM(xs.numpy().T), cs.DM(us.numpy().T), cs.DM(zero.numpy().T), p)).T
    tol = 1e-12 if residual_kind == "sx" else 1e-6  # L4CasADi evaluates the network in float32
    assert np.abs(ours - ref).max() <= tol * np.abs(ref).max()
    if residual_kind == "sx":  # exact derivatives: CasADi's Jacobian of the faded field is torch's
        x, u = cs.SX.sym("x", 3), cs.SX.sym("u", 2)
        jac = cs.Function("J", [x, u], [cs.jacobian(dyn.field(x, u, cs.DM.zeros(3), p), cs.vertcat(x, u))])
        for i in range(30):
            ref_j = jacrev(lambda v: model.field(v[None, :3], v[None, 3:], zero[:1])[0])(torch.cat([xs[i], us[i]]))
            ours_j = np.array(jac(xs[i].numpy(), us[i].numpy()))
            assert np.allclose(ours_j, ref_j.detach().numpy(), rtol=1e-10, atol=1e-10)


def test_kkt_blocks_and_both_hypergradients_stay_exact_with_the_fade_active():
    est, windows = estimator("neural", 6), vehicle_windows(6, 3)
    z0 = torch_kkt_point(est, windows)
    lay = est.layout
    w = _banded(est, z0[:, :, lay.slices["x"]], windows.u)
    assert bool(((w > 0) & (w < 1)).any())
    z = torch_kkt_point(est, windows)
    d, e = kkt_blocks(est, z, windows)
    mask = lay.mask().flatten()
    n = z[0].numel()
    for i in range(len(windows)):
        ref = jacfwd(lambda zz: kkt_residual(est, zz, windows[i:i + 1]))(z[i:i + 1]).reshape(n, n)
        assert torch.allclose(block_tridiagonal_dense(d, e)[i][mask][:, mask], ref[mask][:, mask], rtol=1e-12,
                              atol=1e-9)
    adj, exp = hypergradient_adjoint(est, z, windows), hypergradient_explicit(est, z, windows, chunk_size=16)
    ga, ge = _flat(adj.grads), _flat(exp.grads)
    assert float(ga.norm()) > 0 and float((ga - ge).norm() / ge.norm()) <= 1e-8


@pytest.fixture(scope="module")
def enveloped(tmp_path_factory):
    """A gray-box estimator whose residual fades over part of its windows' states, and its L4CasADi solver."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    est, windows = estimator("gray", 6), vehicle_windows(6, 2)
    with torch.no_grad():  # half the helpers' random last layer: the MHE with the full one, faded, is too stiff
        for p in est.model.residual.mlp.ordered_parameters()[-2:]:
            p.mul_(0.5)
    plain = WindowSolver(est, tmp_path_factory.mktemp("plain"), name="plain")
    sol = plain.solve(windows)
    plain.close()
    # a band as wide as the data's spread: with a narrower one (or the full last layer) the faded residual bends
    # so sharply that IPOPT needs 200+ iterations on one window (the derivatives are right: the KKT test checks them)
    w = _banded(est, sol.point.x, windows.u, band=1.0)
    solver = WindowSolver(est, tmp_path_factory.mktemp("enveloped"), name="enveloped")
    yield est, solver, windows, w
    solver.close()
    torch.set_default_dtype(old)


def test_the_gray_box_hypergradient_with_an_envelope_matches_central_differences(enveloped):
    est, solver, windows, w = enveloped
    assert bool(((w > 0) & (w < 1)).any())
    sol = solver.solve(windows)
    assert bool(sol.ok.all())
    hg = hypergradient_adjoint(est, sol.point.stages(), windows)
    gen = torch.Generator().manual_seed(7)
    params = dict(est.named_parameters())
    for _ in range(2):
        d = {n: torch.randn(p.shape, generator=gen, dtype=p.dtype) for n, p in params.items()}
        vals = []
        for sign in (1.0, -1.0):
            with torch.no_grad():
                for n, p in params.items():
                    p.add_(sign * 1e-5 * d[n])
            s = solver.solve(windows)
            vals.append(float(prediction_loss(est, s.point.stages(), windows)[0].sum()))
            with torch.no_grad():
                for n, p in params.items():
                    p.sub_(sign * 1e-5 * d[n])
        fd = (vals[0] - vals[1]) / 2e-5
        ad = float(sum((hg.grads[n] * d[n]).sum() for n in d))
        assert abs(fd - ad) <= 1e-5 * abs(ad)


def test_a_solver_built_before_the_envelope_refuses_its_weights(gray_solver):
    est, solver, _ = gray_solver
    changed = copy.deepcopy(est)
    record_envelope(changed.model.residual, torch.randn(5, 3), torch.randn(5, 2))
    with pytest.raises(ValueError, match="build a new WindowSolver") as err:
        solver._local.dynamics.load_residual(changed.model.residual.state_dict(), -1)
    assert "\n" not in str(err.value)


def test_the_envelope_of_windows_is_recorded_from_the_mhe_states_and_the_inputs(gray_solver):
    est, solver, windows = gray_solver
    copy_ = copy.deepcopy(est)
    record = envelope_of_windows(copy_, solver, windows, 0.5, (["vx", "vy", "omega"], ["delta", "pedal"]))
    sol = solver.solve(windows)
    x = sol.point.x[sol.ok].reshape(-1, 3)
    assert record["windows"] == int(sol.ok.sum()) == len(windows)
    assert np.allclose(record["span"]["low"][:3], x.min(0).values.numpy(), atol=1e-9)
    assert record["span"]["high"][3:] == windows.u.reshape(-1, 2).max(0).values.tolist()
    assert est.model.residual.envelope is None and copy_.model.residual.envelope is not None
    with pytest.raises(ValueError, match="fades a neural residual; this model has none"):
        envelope_of_windows(estimator("physics", 6), solver, windows)


def test_the_envelope_is_on_by_default_for_recorded_data_only():
    settings = dict(mhe=MHESettings(4, (0.01, 0.01), (0.05,)), arrival=ArrivalCost((5.0, 5.0), (3.0, 3.0)),
                    measured=(1,), physics=TwoTanks())
    rec = Recording(torch.zeros(10, 2), torch.ones(10, 1), torch.ones(10, 1), 2.0)
    assert not IdentificationProblem(TwoTankSimulation(steps=10), **settings).envelope_wanted
    assert not IdentificationProblem(TwoTankSimulation(steps=10), residual=ResidualSettings(4), **settings
                                     ).envelope_wanted
    assert IdentificationProblem(TwoTankSimulation(steps=10), residual=ResidualSettings(4, envelope=True), **settings
                                 ).envelope_wanted
    assert not IdentificationProblem(rec, residual=ResidualSettings(4), **settings).envelope_wanted

    class Log(TwoTankSimulation):
        recorded = True

    assert IdentificationProblem(Log(steps=10), residual=ResidualSettings(4), **settings).envelope_wanted
    assert not IdentificationProblem(Log(steps=10), residual=ResidualSettings(4, envelope=False), **settings
                                     ).envelope_wanted


def test_a_gray_box_is_scored_by_free_run_with_its_network_and_fade_written_out():
    source = TwoTankSimulation(steps=60, noise=0.01, offset=0.0)
    rec = source.record()
    net = ResidualSettings(6, in_scale=(5.0, 5.0, 5.0), out_scale=(0.01, 0.01), seed=2).build(2, 1)
    with torch.no_grad():
        net.mlp.ordered_parameters()[-2].normal_(generator=torch.Generator().manual_seed(3))
    model = StateSpaceModel(TwoTanks(), net, dt=rec.dt, measured=(1,), hold="zoh")
    record_envelope(net, rec.states[:30], rec.inputs[:30])  # the second half partly outside
    est = MovingHorizonEstimator(model, MHESettings(4, (0.01, 0.01), (0.01,)), (0.5, 0.5), (3.0, 3.0))
    x0, rmse = estimate_initial_states(est, Recording(torch.zeros(60, 0), rec.inputs, rec.outputs, rec.dt))
    run = simulate_free_run(model, x0, rec.inputs)
    assert torch.allclose(rmse, ((run.outputs - rec.outputs) ** 2).mean(0).sqrt(), rtol=1e-9)
    assert bool(net.outside(run.states, rec.inputs).any()) and bool(torch.isfinite(x0).all())
    for dx in ((0.2, 0.0), (0.0, -0.2)):  # the estimated initial state is the free run's best
        other = simulate_free_run(model, x0 + torch.tensor(dx), rec.inputs)
        assert float(((other.outputs - rec.outputs) ** 2).mean().sqrt()) > float(rmse)

"""Output maps y = h(x, u; p_y) (issue 33, item 2): smooth kinks, torch vs CasADi, the inverse guess, the MHE on a
clipping sensor, both hypergradients and the Gauss-Newton rows against central differences of re-solved MHEs (float64),
a map that reads the input, the YAML config and one-line errors."""
import math
from dataclasses import replace

import casadi as cs
import numpy as np
import pytest
import torch

from mhe import (ArrivalCost, IdentificationProblem, MHESettings, OuterSettings, StateSpaceModel, WindowSolver,
                 hypergradient_adjoint, hypergradient_explicit, residual_jacobian)
from mhe.estimator.kkt import prediction_loss
from mhe.models.casadi_model import CASADI_OPS, CasadiDynamics
from mhe.models.ops import TORCH_OPS
from mhe.models.output import OutputMap, SensorOutput
from mhe.models.smooth import positive_part, saturate
from mhe.problems.oscillator import LinearOscillator, OscillatorSimulation


def test_smooth_positive_part_and_saturation_are_within_their_width_of_the_kinks_on_both_backends():
    z = torch.linspace(-3.0, 3.0, 601, dtype=torch.float64)
    for w in (0.01, 0.3):
        pos = positive_part(z, w, TORCH_OPS)
        gap = pos - z.clamp(min=0.0)
        assert float(gap.min()) >= -1e-15 and float(gap.max()) == pytest.approx(w * math.log(2.0), rel=1e-12)
        sat = saturate(z, -1.0, 2.0, w, TORCH_OPS)
        assert float((sat - z.clamp(-1.0, 2.0)).abs().max()) <= w * math.log(2.0) + 1e-15
        assert float(saturate(z, None, 2.0, w, TORCH_OPS)[0]) == pytest.approx(-3.0, abs=w * math.exp(-5.0 / w) + 1e-15)
    s = cs.SX.sym("z")
    f = cs.Function("f", [s], [saturate(s, -1.0, 2.0, 0.3, CASADI_OPS)])
    np.testing.assert_allclose(np.asarray(f(z.numpy()[None])).ravel(), saturate(z, -1.0, 2.0, 0.3, TORCH_OPS).numpy(),
                               rtol=1e-14, atol=1e-14)
    big = torch.tensor([800.0, -800.0], dtype=torch.float64)  # no overflow far from the kink
    assert torch.equal(positive_part(big, 1.0, TORCH_OPS), torch.tensor([800.0, 0.0], dtype=torch.float64))


def _sensor(**kw):
    args = dict(measured=(0,), offset=[0.2], gain=[1.5], identify=("offset_0", "gain_0"), limits=[(None, 0.5)],
                width=0.02)
    return SensorOutput(**{**args, **kw})


def test_sensor_output_is_the_same_function_in_torch_and_casadi_and_its_guess_inverts_it(tmp_path):
    model = StateSpaceModel(LinearOscillator(), dt=0.05, output=_sensor())
    x = torch.tensor([[-0.4, 1.0], [0.1, -2.0], [0.5, 0.0]], dtype=torch.float64)
    y = model.output(x).detach()
    dyn = CasadiDynamics(model, tmp_path)
    q = CasadiDynamics.output_values(model)
    assert dyn.n_q == 2 and q.tolist() == [0.2, 1.5]
    ours = np.concatenate([np.asarray(dyn.output(xi.numpy(), [0.0], q)).ravel() for xi in x])
    np.testing.assert_allclose(ours, y[:, 0].numpy(), rtol=1e-14, atol=1e-15)
    assert float(y[2, 0]) == pytest.approx(0.5, abs=0.02 * math.log(2.0))  # 1.5 * 0.5 + 0.2 = 0.95, clipped at 0.5
    inside = torch.tensor([[-0.4], [0.1]], dtype=torch.float64)
    assert torch.allclose(model.state_guess(1.5 * inside + 0.2), inside, atol=1e-15)
    assert float(model.state_guess(torch.tensor([[3.0]], dtype=torch.float64))) == pytest.approx((0.5 - 0.2) / 1.5)


def test_bad_output_maps_are_one_line_errors_naming_the_setting():
    for kw, match in ((dict(gain=[0.0]), "every output gain must be nonzero"), (dict(limits=[(1.0, 0.5)]), "lo < hi"),
                      (dict(width=0.0), "width .* must be positive"), (dict(measured=(0, 0), offset=None, gain=None,
                                                                          identify=(), limits=None), "distinct")):
        with pytest.raises(ValueError, match=match) as err:
            _sensor(**kw)
        assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match=r"measured \[1\] differs from the output map's \[0\]"):
        StateSpaceModel(LinearOscillator(), output=_sensor(), measured=(1,))
    with pytest.raises(ValueError, match="give the output map the problem's measured states"):
        IdentificationProblem(OscillatorSimulation(steps=50), MHESettings(5, (0.1, 0.1), (0.01,)),
                              ArrivalCost((0.0, 0.0), (1.0, 1.0)), (1,), LinearOscillator(), output=_sensor())


class _Feedthrough(OutputMap):
    """``y = p + d u``: a map that reads the input (a sensor with a direct feedthrough)."""

    feedthrough = True

    def __init__(self, d: float) -> None:
        from mhe import BoundedParameters

        super().__init__((0,), BoundedParameters({"d": d}, identify=("d",)))

    def output(self, x, u, p, ops):
        return [x[0] + p["d"] * u[0]]


@pytest.fixture(scope="module")
def clipped():
    """An oscillator read through ``clip(1.5 p + 0.2)`` at its 80th percentile, with noise: a problem whose MHE
    sees the sensor's saturation in several windows, physics and sensor started off."""
    source = OscillatorSimulation(steps=90, noise=0.01, seed=3)
    rec = source.record()
    clean = 1.5 * rec.states[:, :1] + 0.2
    hi = float(torch.quantile(clean, 0.8))
    gen = torch.Generator().manual_seed(4)
    rec = replace(rec, outputs=(clean + 0.01 * torch.randn(clean.shape, generator=gen, dtype=torch.float64)).clamp(
        max=hi))
    physics = LinearOscillator(1.05 * source.omega, 0.07, 0.95 * source.gain, identify=("omega", "zeta", "gain"))
    sensor = SensorOutput((0,), offset=[0.15], gain=[1.4], identify=("offset_0", "gain_0"), limits=[(None, hi)],
                          width=0.01)
    problem = IdentificationProblem(rec, MHESettings(8, (0.5, 5.0), (0.01,)), ArrivalCost((0.0, 0.0), (1.0, 50.0)),
                                    (0,), physics, stride=10, output=sensor)
    return problem, hi


def _grad_vector(grads):
    return torch.cat([g.reshape(-1) for g in grads.values()])


def _central(est, solver, windows, eps, value):
    columns = []
    for p in est.parameters():
        for j in range(p.numel()):
            out = []
            for sign in (1.0, -1.0):
                with torch.no_grad():
                    p.view(-1)[j] += sign * eps
                sol = solver.solve(windows)
                assert bool(sol.ok.all())
                out.append(value(sol.point.stages()))
                with torch.no_grad():
                    p.view(-1)[j] -= sign * eps
            columns.append((out[0] - out[1]) / (2 * eps))
    return torch.stack(columns, dim=-1)


def test_hypergradients_of_a_clipping_sensor_match_central_differences_of_re_solved_mhes(clipped, tmp_path):
    problem, hi = clipped
    est, windows = problem.estimator(), problem.windows
    assert bool((windows.y >= hi).any())  # the saturation is active in the data
    solver = WindowSolver(est, tmp_path)
    sol = solver.solve(windows)
    assert bool(sol.ok.all()) and float(sol.kkt_residual.max()) < 1e-9
    z = sol.point.stages()
    adj, exp = hypergradient_adjoint(est, z, windows), hypergradient_explicit(est, z, windows, chunk_size=16)
    ga, ge = _grad_vector(adj.grads), _grad_vector(exp.grads)
    out_grad = adj.grads["model.output_map.params.raw"]
    assert float(out_grad.abs().min()) > 0  # offset and gain both move J
    assert float((ga - ge).norm() / ge.norm()) <= 1e-8
    fd = _central(est, solver, windows, 1e-6, lambda zz: prediction_loss(est, zz, windows)[0].sum())
    assert float((fd - ga).norm() / ga.norm()) <= 1e-5
    # the Gauss-Newton rows carry the direct term dh/dp_y too: central differences of the residuals
    rj = residual_jacobian(est, z, windows)
    assert float((rj.gradient - ga).norm() / ga.norm()) <= 1e-10
    fd_rows = _central(est, solver, windows, 1e-6, lambda zz: est.prediction_error(zz, windows).detach())
    assert float((fd_rows - rj.jacobian).norm() / rj.jacobian.norm()) <= 1e-5


def test_a_map_that_reads_the_input_uses_the_input_at_the_prediction_instant(tmp_path):
    source = OscillatorSimulation(steps=60, noise=0.01, seed=5)
    rec = source.record()
    rec = replace(rec, outputs=rec.outputs + 0.3 * rec.inputs)
    physics = LinearOscillator(source.omega, 0.07, source.gain, identify=("zeta",))
    problem = IdentificationProblem(rec, MHESettings(6, (0.5, 5.0), (0.01,)), ArrivalCost((0.0, 0.0), (1.0, 50.0)),
                                    (0,), physics, stride=9, output=_Feedthrough(0.1), hold="foh")
    est, windows = problem.estimator(), problem.windows
    assert torch.equal(windows.u_end[:, 0], rec.inputs[windows.start + 6, 0])
    solver = WindowSolver(est, tmp_path)
    sol = solver.solve(windows)
    assert bool(sol.ok.all())
    z = sol.point.stages()
    r = est.prediction_error(z, windows)
    x_end = z[:, -1, 0]
    assert torch.allclose(r[:, 0], x_end + 0.1 * windows.u_end[:, 0] - windows.y[:, -1, 0], atol=1e-15)
    ga = _grad_vector(hypergradient_adjoint(est, z, windows).grads)
    fd = _central(est, solver, windows, 1e-6, lambda zz: prediction_loss(est, zz, windows)[0].sum())
    assert float((fd - ga).norm() / ga.norm()) <= 1e-5
    with pytest.raises(ValueError, match="needs u~_N"):
        est.prediction_error(z, replace(windows, u_end=None))


def test_the_two_tank_config_selects_the_sensor_map_and_the_free_run_criterion(tmp_path):
    from mhe.training import load_experiment

    exp = load_experiment("configs/mhe_two_tank_gn.yaml", ["--model.solver.build_dir", str(tmp_path)])
    out = exp.problem.output
    assert isinstance(out, SensorOutput) and out.limits == ((0.0, 10.0),) and out.params.free_names == ("offset_0",)
    assert exp.problem.estimator().model.output_map is not None and exp.problem.measured == (1,)
    assert exp.outer.criterion == "simulation" and exp.outer.simulation.segment == 10
    with pytest.raises(ValueError, match=r"outer.criterion must be one of \('prediction', 'simulation'\).*'free_run'"):
        OuterSettings(criterion="free_run")

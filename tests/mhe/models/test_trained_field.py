"""A trained torch-ude field as a CasADi / mhe model (mhe.models.trained_field)."""
import casadi as cs
import numpy as np
import pytest
import torch

from mhe.models.trained_field import TrainedField
from torch_ude import HybridField
from torch_ude.export import export_field
from torch_ude.systems import DoublePendulum, FrictionPendulum, SinglePendulum


def _run(folder, system=None, case="A", dtype=torch.float64, seed=0):
    """Export a field with non-trivial weights and scales, as a trainer would."""
    system = system or SinglePendulum()
    field = HybridField.from_seed(system.known_field(case), seed, dtype=dtype, last_layer_gain=1.0)
    n = field.n_states
    field.set_scales(torch.linspace(0.5, 1.5, n, dtype=dtype), torch.linspace(2.0, 0.7, n, dtype=dtype))
    export_field(field, folder, system, case)
    return field


@pytest.mark.parametrize("case", ["A", "B"])
def test_casadi_function_and_jacobian_equal_the_torch_field_in_float64(tmp_path, case):
    field = _run(tmp_path, case=case)
    trained = TrainedField.load(tmp_path)
    fun = trained.casadi_function()
    x_sym = cs.SX.sym("x", 2)
    jac = cs.Function("J", [x_sym], [cs.jacobian(fun(x_sym), x_sym)])
    states = torch.randn(50, 2) * torch.tensor([1.2, 3.0])
    value_err = jac_err = 0.0
    for x in states:
        value_err = max(value_err, np.abs(np.asarray(fun(x.numpy())).ravel() - field(x[None]).detach().numpy()[0]).max())
        expected = torch.autograd.functional.jacobian(lambda s: field(s[None])[0], x)
        jac_err = max(jac_err, np.abs(np.asarray(jac(x.numpy())) - expected.numpy()).max())
    assert value_err < 1e-10 and jac_err < 1e-10
    assert float(field.residual(states).detach().abs().max()) > 1e-2  # the network is not zero


def test_residual_and_model_carry_the_trained_weights(tmp_path):
    field = _run(tmp_path, seed=4)
    trained = TrainedField.load(tmp_path, system=SinglePendulum(), case="a")
    x = torch.randn(20, 2)
    u = x.new_zeros(20, 0)
    assert torch.allclose(trained.residual()(x, u), field.residual(x), rtol=0, atol=1e-13)
    model = trained.model(dt=0.02, measured=(0,))
    assert torch.allclose(model.field(x, u, torch.zeros_like(x)), field(x), rtol=0, atol=1e-13)
    assert model.physics.params.free_names == ()


def test_friction_plant_and_float32_fields_load(tmp_path):
    field = _run(tmp_path / "f", system=FrictionPendulum(), dtype=torch.float32)
    trained = TrainedField.load(tmp_path / "f")
    x = torch.randn(10, 2, dtype=torch.float32)
    got = np.stack([np.asarray(trained.casadi_function()(row.double().numpy())).ravel() for row in x])
    assert np.abs(got - field(x).detach().double().numpy()).max() < 1e-5


def test_a_field_of_another_plant_or_case_is_an_error_naming_both(tmp_path):
    _run(tmp_path / "a")
    with pytest.raises(ValueError, match=r"damping.*0\.4.*loaded into.*damping.*0\.3"):
        TrainedField.load(tmp_path / "a", system=SinglePendulum(damping=0.3))
    with pytest.raises(ValueError, match="case A.*case 'B'"):
        TrainedField.load(tmp_path / "a", case="B")
    _run(tmp_path / "d", system=DoublePendulum())
    with pytest.raises(ValueError, match="DoublePendulum.*DoublePendulumField"):
        TrainedField.load(tmp_path / "d")
    with pytest.raises(FileNotFoundError, match="field.pt"):
        TrainedField.load(tmp_path / "missing")


def test_an_identification_problem_starts_its_residual_from_a_run(tmp_path):
    from mhe import ArrivalCost, IdentificationProblem, MHESettings, ResidualSettings
    from mhe.problems.pendulum import PendulumStream
    from mhe.models.pendulum import known_pendulum

    field = _run(tmp_path, seed=2)
    system = SinglePendulum()
    problem = IdentificationProblem(PendulumStream(system, 0.01, 0, duration=5.0), MHESettings(10, (1e-3, 1e-2), (1e-2,)),
                                    ArrivalCost((0.0, 0.0), (1.0, 3.0)), measured=(0,),
                                    physics=known_pendulum(system, "A"), residual=ResidualSettings(16, start=str(tmp_path)))
    x = torch.randn(8, 2)
    u, w = x.new_zeros(8, 0), torch.zeros_like(x)
    assert torch.allclose(problem.model().field(x, u, w), field(x), rtol=0, atol=1e-13)
    with pytest.raises(ValueError, match="16 hidden units.*needs 2, 0 and 8"):
        problem.replace(residual=ResidualSettings(8, start=str(tmp_path))).model()
    with pytest.raises(ValueError, match="leave in_scale, out_scale, seed and input_lags unset"):
        ResidualSettings(16, in_scale=(1.0, 1.0, 1.0), start=str(tmp_path))


def test_a_residual_on_chosen_channels_keeps_those_rows_of_the_trained_network(tmp_path):
    field = _run(tmp_path, seed=5)
    net = TrainedField.load(tmp_path).residual(outputs=(1,))
    x = torch.randn(16, 2)
    got = net(x, x.new_zeros(16, 0))
    assert torch.all(got[:, 0] == 0)
    assert torch.allclose(got[:, 1], field.residual(x)[:, 1].detach(), rtol=0, atol=1e-13)
    assert net.mlp.sizes == (2, 16, 16, 1)


def test_periodic_states_and_the_envelope_reach_the_casadi_function_exactly(tmp_path):
    system = FrictionPendulum()
    field = HybridField.from_seed(system.known_field("A"), 3, last_layer_gain=1.0, periodic=(0,))
    field.set_scales(torch.tensor([0.7, 1.9]), torch.tensor([2.0, 0.6]))
    states = torch.randn(60, 2) * torch.tensor([4.0, 3.0])
    z = field.net_input(states[:6])  # a box around a tenth of the states: the rest in the band and beyond
    field.set_envelope(z.amin(0), z.amax(0), 0.2 * (field.net_input(states).amax(0) - field.net_input(states).amin(0)))
    export_field(field, tmp_path, system, "A")
    trained = TrainedField.load(tmp_path)
    fun = trained.casadi_function()
    x_sym = cs.SX.sym("x", 2)
    jac = cs.Function("J", [x_sym], [cs.jacobian(fun(x_sym), x_sym)])
    fades = field.fade(field.net_input(states))[0]
    assert bool((fades == 0).any()) and bool(((fades > 0) & (fades < 1)).any())
    for x in states:
        assert np.allclose(np.asarray(fun(x.numpy())).ravel(), field(x[None]).detach().numpy()[0], atol=1e-10)
        expected = torch.autograd.functional.jacobian(lambda s: field(s[None])[0], x)
        assert np.allclose(np.asarray(jac(x.numpy())), expected.numpy(), atol=1e-9)
    with pytest.raises(ValueError, match="cannot carry"):
        trained.residual()


def test_the_residual_carries_the_trust_envelope(tmp_path):
    """issue 33 item 5: mhe's residual has the jet-matching field's envelope (same box, same fade, same z)."""
    field = _run(tmp_path, seed=4)
    states = torch.randn(60, 2, dtype=torch.float64) * torch.tensor([2.0, 3.0])
    z = field.net_input(states[:6])
    field.set_envelope(z.amin(0), z.amax(0), 0.2 * (field.net_input(states).amax(0) - field.net_input(states).amin(0)))
    export_field(field, tmp_path, SinglePendulum(), "A")
    net = TrainedField.load(tmp_path).residual()
    fades = field.fade(field.net_input(states))[0]
    assert bool((fades == 0).any()) and bool(((fades > 0) & (fades < 1)).any())
    assert torch.allclose(net(states, states.new_zeros(60, 0)), field.residual(states), rtol=0, atol=1e-13)
    assert torch.equal(net.outside(states, states.new_zeros(60, 0)), field.outside(states))

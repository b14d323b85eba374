"""The DFKI double pendulum's model: the lab's equations, hand-written Jacobians against torch.func
and complex step, the jet-loss gradient and the baseline's adjoint with it, and bad constants."""
import copy
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.func import jacrev

from torch_ude import HybridField
from torch_ude.systems import TorqueDoublePendulumModel, TorquePendulumModel
from torch_ude.systems.dfki_double_pendulum import MODEL_3_1, dfki_lab_model
from baselines.gradcheck import complex_copy, complex_step_gradient, relative_error
from baselines.shooting import ShootingObjective
from tests.baselines.test_adjoint import _input_windows
from tests.torch_ude.test_jet import _complex_step_grads, _input_batch, _loss_for, _naive_input_loss, _rel

DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "dfki_double_pendulum"
#: the lab's model 3.0 (model_3.0_parameters.yml): model 3.1 with friction and rotor inertia
MODEL_3_0 = MODEL_3_1 | {"Ir": 9.937281205437459e-05, "b1": 0.001, "b2": 0.001, "cf1": 0.093, "cf2": 0.078}
MODELS = {"3.1": MODEL_3_1, "3.0": MODEL_3_0}


def _states(seed: int, batch: int = 9) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.cat((2.0 * torch.randn(batch, 2, generator=gen), 0.05 * torch.randn(batch, 2, generator=gen)), 1)
    x[::2, 2:] *= 100.0  # slow states resolve the Coulomb atan, fast ones the Coriolis terms
    return x, torch.randn(batch, 2, generator=gen)


def _lab_acceleration(p: dict, x: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """The lab's DoublePendulumPlant.forward_dynamics ("UnderactuatedLecture"), written as the source does."""
    q1, q2, v1, v2 = x
    i1, i2, ir, gr, m1, m2, l1, r1, r2, g = (p[k] for k in ("I1", "I2", "Ir", "gr", "m1", "m2", "l1", "r1", "r2", "g"))
    m = np.array([[i1 + i2 + m2 * l1**2 + 2 * m2 * l1 * r2 * np.cos(q2) + gr**2 * ir + ir,
                   i2 + m2 * l1 * r2 * np.cos(q2) - gr * ir],
                  [i2 + m2 * l1 * r2 * np.cos(q2) - gr * ir, i2 + gr**2 * ir]])
    c = np.array([[-2 * m2 * l1 * r2 * np.sin(q2) * v2, -m2 * l1 * r2 * np.sin(q2) * v2],
                  [m2 * l1 * r2 * np.sin(q2) * v1, 0.0]])
    grav = np.array([-m1 * g * r1 * np.sin(q1) - m2 * g * (l1 * np.sin(q1) + r2 * np.sin(q1 + q2)),
                     -m2 * g * r2 * np.sin(q1 + q2)])
    fric = np.array([p["b1"] * v1 + p["cf1"] * np.arctan(100 * v1), p["b2"] * v2 + p["cf2"] * np.arctan(100 * v2)])
    return np.linalg.solve(m, grav + tau - c @ np.array([v1, v2]) - fric)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_model_is_the_labs_plant(name):
    model = TorqueDoublePendulumModel(**MODELS[name])
    p = model.init_args()
    x, u = _states(1)
    out = model(x, u)
    assert torch.equal(out[:, :2], x[:, 2:])
    ref = np.stack([_lab_acceleration(p, x[b].numpy(), u[b].numpy()) for b in range(x.shape[0])])
    assert np.allclose(out[:, 2:].numpy(), ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_jacobians_match_jacrev_and_complex_step(name):
    model = TorqueDoublePendulumModel(**MODELS[name])
    x, u = _states(2)
    jx = torch.stack([jacrev(model, argnums=0)(x[b:b + 1], u[b:b + 1])[0, :, 0, :] for b in range(x.shape[0])])
    ju = torch.stack([jacrev(model, argnums=1)(x[b:b + 1], u[b:b + 1])[0, :, 0, :] for b in range(x.shape[0])])
    assert torch.allclose(model.jacobian(x, u), jx, rtol=1e-12, atol=1e-12)
    assert torch.allclose(model.input_jacobian(x, u), ju, rtol=1e-12, atol=1e-12)
    h, xc, uc = 1e-30, x.to(torch.complex128), u.to(torch.complex128)
    cx = torch.stack([model(xc + 1j * h * torch.eye(4)[j], uc).imag / h for j in range(4)], dim=2)
    cu = torch.stack([model(xc, uc + 1j * h * torch.eye(2)[k]).imag / h for k in range(2)], dim=2)
    assert torch.allclose(model.jacobian(x, u), cx, rtol=1e-13, atol=1e-13)
    assert torch.allclose(model.input_jacobian(x, u), cu, rtol=1e-13, atol=1e-13)
    # the complex model runs the same closed forms: its Jacobian equals the real one
    assert torch.allclose(model.jacobian(xc, uc).real, model.jacobian(x, u), rtol=1e-14, atol=1e-14)


def _random_field(seed: int) -> HybridField:
    """A hybrid field on model 3.1 with random weights, biases and scales (float64)."""
    gen = torch.Generator().manual_seed(seed)
    field = HybridField(TorqueDoublePendulumModel(), generator=gen, last_layer_gain=1.0)
    field.set_scales(0.5 + torch.rand(4, generator=gen), 0.5 + torch.rand(4, generator=gen),
                     0.5 + torch.rand(2, generator=gen))
    with torch.no_grad():
        for _, b in field.mlp.layers:
            b.uniform_(-0.5, 0.5, generator=gen)
    return field


@pytest.mark.parametrize("lam2", [0.0, 0.1])
def test_jet_gradient_matches_torch_func_and_complex_step(lam2):
    field = _random_field(3)
    x, xd, xdd, u, udot = _input_batch(field, 7, 3)
    loss = _loss_for(field, lam2, 3)
    res = loss.value_and_grad(field, x, xd, xdd, u=u, udot=udot)
    value, params, order = _naive_input_loss(field, loss, x, xd, xdd, u, udot)
    ref = torch.func.grad(value)(params)
    assert _rel(res.grads, [ref[i] for i in order]) <= 1e-10
    assert torch.allclose(res.loss, value(params), rtol=1e-13, atol=0)
    assert _rel(res.grads, _complex_step_grads(field, loss, x, xd, xdd, u, udot)) <= 1e-12


def test_baseline_adjoint_matches_complex_step():
    field = _random_field(4)
    windows, scale = _input_windows(field, 3, 2, seed=4), torch.tensor([0.5, 1.5, 4.0, 6.0])
    objective = ShootingObjective(field, windows, state_scale=scale)
    objective.shooting_states += 0.01  # off the observations, so the state gradient is not special
    result = objective.gradient()
    reference = ShootingObjective(complex_copy(field), windows, state_scale=scale)
    reference.shooting_states.copy_(objective.shooting_states)
    theta_cs, states_cs = complex_step_gradient(reference)
    assert relative_error(torch.cat([g.reshape(-1) for g in result.grads]), theta_cs) <= 1e-12
    assert relative_error(result.state_grad, states_cs) <= 1e-12


def test_the_mass_matrix_and_friction():
    lab = TorqueDoublePendulumModel(**MODEL_3_0)
    q2 = torch.tensor([0.0, np.pi / 2])
    m11, m12, m22 = lab.mass_matrix(q2)
    c = MODEL_3_1["m2"] * MODEL_3_1["l1"] * MODEL_3_1["r2"]
    base = MODEL_3_1["I1"] + MODEL_3_1["I2"] + MODEL_3_1["m2"] * MODEL_3_1["l1"] ** 2 + 37 * MODEL_3_0["Ir"]
    assert torch.allclose(m11, torch.tensor([base + 2 * c, base]))
    d = MODEL_3_1["I2"] - 6 * MODEL_3_0["Ir"]
    assert torch.allclose(m12, torch.tensor([d + c, d]))
    assert torch.allclose(m22, torch.full((2,), MODEL_3_1["I2"] + 36 * MODEL_3_0["Ir"]))
    fric = lab.friction(torch.tensor([[2.0, -1.0]]))
    assert torch.allclose(fric, torch.tensor([[0.002 + 0.093 * np.arctan(200.0), -0.001 - 0.078 * np.arctan(100.0)]]))
    assert torch.equal(TorqueDoublePendulumModel().friction(torch.tensor([[2.0, -1.0]])), torch.zeros(1, 2))


@pytest.mark.skipif(not DATA.is_dir(), reason=f"the DFKI double-pendulum files are not at {DATA} "
                                              f"(see ../shared/data/README.md)")
def test_the_lab_files_are_models_3_1_and_3_0():
    assert TorqueDoublePendulumModel.from_lab_file(DATA / "model_3.1_parameters.yml").init_args() == \
        TorqueDoublePendulumModel().init_args()
    assert TorqueDoublePendulumModel.from_lab_file(DATA / "model_3.0_parameters.yml").init_args() == \
        TorqueDoublePendulumModel(**MODEL_3_0).init_args()



def test_the_lab_model_of_a_single_pendulum_log_folder(tmp_path):
    (tmp_path / "system_identification.txt").write_text("J = 0.06\nm*cx = 0.1\nFv = 0.02\nFc = 0.18\noffset = -0.05\n")
    model, constants = dfki_lab_model(TorquePendulumModel(gravity=9.8), tmp_path)
    assert constants == {"J": 0.06, "m*cx": 0.1, "Fv": 0.02, "Fc": 0.18, "offset": -0.05} and model.gravity == 9.8
    with pytest.raises(FileNotFoundError, match="system_identification.txt does not exist"):
        dfki_lab_model(TorquePendulumModel(), tmp_path / "nowhere")


@pytest.mark.skipif(not DATA.is_dir(), reason=f"the DFKI double-pendulum files are not at {DATA} "
                                              f"(see ../shared/data/README.md)")
def test_the_lab_model_of_a_double_pendulum_log_folder_is_model_3_0():
    model, constants = dfki_lab_model(TorqueDoublePendulumModel(), DATA)
    assert constants == model.init_args() == TorqueDoublePendulumModel(**MODEL_3_0).init_args()

def test_bad_constants_and_files_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="m2 must be positive"):
        TorqueDoublePendulumModel(m2=0.0)
    with pytest.raises(ValueError, match="I1 must be positive"):
        TorqueDoublePendulumModel(I1=-0.1)
    with pytest.raises(ValueError, match="cf1 must be a finite number; got nan"):
        TorqueDoublePendulumModel(cf1=float("nan"))
    with pytest.raises(ValueError, match="gr must be a finite number; got True"):
        TorqueDoublePendulumModel(gr=True)
    with pytest.raises(ValueError, match=r"Ir \(rotor inertia in kg m\^2\) must be >= 0"):
        TorqueDoublePendulumModel(Ir=-1e-5)
    with pytest.raises(ValueError, match="not positive definite for every q2"):
        TorqueDoublePendulumModel(I1=1e-4, I2=1e-4)
    with pytest.raises(FileNotFoundError, match="missing.yml does not exist"):
        TorqueDoublePendulumModel.from_lab_file(tmp_path / "missing.yml")
    lines = [f"{k}: {v}" for k, v in TorqueDoublePendulumModel().init_args().items()]
    (tmp_path / "short.yml").write_text("\n".join(lines[:-1]))
    with pytest.raises(ValueError, match=r"short.yml lacks the parameters \['g'\]"):
        TorqueDoublePendulumModel.from_lab_file(tmp_path / "short.yml")
    (tmp_path / "text.yml").write_text("\n".join(lines[:-1] + ["g: heavy"]))
    with pytest.raises(ValueError, match="text.yml: g must be a number; got 'heavy'"):
        TorqueDoublePendulumModel.from_lab_file(tmp_path / "text.yml")


def test_trainable_constants_bounds_are_checked_before_any_work():
    with pytest.raises(ValueError, match="g is not a trainable parameter"):
        TorqueDoublePendulumModel(trainable={"g": [9.0, 10.0]})
    with pytest.raises(ValueError, match="the lower bound of Ir must be >= 0"):
        TorqueDoublePendulumModel(trainable={"Ir": [-1e-4, 1e-4]})
    with pytest.raises(ValueError, match="the lower bound of I2 must be > 0"):
        TorqueDoublePendulumModel(trainable={"I2": [0.0, 0.1]})
    with pytest.raises(ValueError, match="exclude its configured value"):
        TorqueDoublePendulumModel(trainable={"cf1": [0.1, 0.2]})
    with pytest.raises(ValueError, match="at the corner .* of the trainable bounds"):
        TorqueDoublePendulumModel(trainable={"r2": [0.1, 3.0]})
    with pytest.raises(ValueError, match="has no physical parameter 'l2'"):
        TorqueDoublePendulumModel(trainable={"l2": [0.1, 0.5]})


def test_parameter_jacobians_match_complex_step():
    """``df/dtheta`` and ``d/dtheta (J_x f v + J_u f udot)`` of every constant but g, float64, against
    complex step in theta (the model's own complex128 closed forms), at a random point of the bounds."""
    from tests.torch_ude.helpers import trainable_model
    model = trainable_model("double_torque", torch.Generator().manual_seed(3))
    x, u = _states(5)
    gen = torch.Generator().manual_seed(6)
    v, udot = torch.randn(x.shape, generator=gen, dtype=torch.float64), torch.randn(u.shape, generator=gen,
                                                                                   dtype=torch.float64)
    jac, lie = model.parameter_jacobian(x, u), model.parameter_lie_jacobian(x, u, v, udot)
    assert jac.shape == lie.shape == (x.shape[0], 4, 13)
    cmodel = copy.deepcopy(model).to(torch.complex128)
    xc, uc, vc, udc = (t.to(torch.complex128) for t in (x, u, v, udot))
    h, cs_f, cs_lie = 1e-30, [], []
    with torch.no_grad():
        for i in range(13):
            cmodel.theta[i] += 1j * h
            cs_f.append(cmodel(xc, uc).imag / h)
            lie_c = (torch.einsum("bij,bj->bi", cmodel.jacobian(xc, uc), vc)
                     + torch.einsum("bij,bj->bi", cmodel.input_jacobian(xc, uc), udc))
            cs_lie.append(lie_c.imag / h)
            cmodel.theta[i] -= 1j * h
    assert torch.allclose(jac, torch.stack(cs_f, dim=2), rtol=1e-11, atol=1e-11)
    assert torch.allclose(lie, torch.stack(cs_lie, dim=2), rtol=1e-11, atol=1e-11)
    assert float(jac[:, 2:].abs().min(dim=0).values.max()) > 0  # no all-zero column: each constant moves q''


def test_trained_constants_rebuild_the_model():
    model = TorqueDoublePendulumModel(trainable={"Ir": [0.0, 1e-3], "cf1": [0.0, 0.3]})
    with torch.no_grad():
        model.theta += torch.tensor([0.2, 0.5], dtype=torch.float64)
    args = model.init_args()
    assert args["Ir"] == pytest.approx(1e-4) and args["cf1"] == pytest.approx(0.075)
    assert args["trainable"] == {"Ir": [0.0, 1e-3], "cf1": [0.0, 0.3]}
    rebuilt = TorqueDoublePendulumModel(**{k: v for k, v in args.items() if k != "trainable"})
    x, u = _states(7)
    assert torch.allclose(rebuilt(x, u), model(x, u).detach(), rtol=1e-13, atol=1e-13)

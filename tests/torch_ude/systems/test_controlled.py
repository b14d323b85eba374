"""Known models with inputs: hand-written state and input Jacobians against torch.func."""
import pytest
import torch
from torch.func import jacrev

from torch_ude.systems.controlled import TorquePendulumModel
from tests.torch_ude.helpers import INPUT_MODELS


@pytest.mark.parametrize("model", sorted(INPUT_MODELS))
def test_jacobians_match_jacrev(model):
    known = INPUT_MODELS[model]()
    gen = torch.Generator().manual_seed(3)
    x = 2.0 * torch.randn(9, known.n_states, generator=gen)
    u = torch.randn(9, known.n_inputs, generator=gen)
    jx = torch.stack([jacrev(known, argnums=0)(x[b:b + 1], u[b:b + 1])[0, :, 0, :] for b in range(9)])
    ju = torch.stack([jacrev(known, argnums=1)(x[b:b + 1], u[b:b + 1])[0, :, 0, :] for b in range(9)])
    assert torch.allclose(known.jacobian(x, u), jx, rtol=1e-13, atol=1e-13)
    assert torch.allclose(known.input_jacobian(x, u), ju, rtol=1e-13, atol=1e-13)
    w = torch.randn(9, known.n_states, generator=gen)
    assert torch.allclose(known.vjp(x, u, w), torch.einsum("bij,bi->bj", jx, w), rtol=1e-13, atol=1e-13)


def test_torque_pendulum_is_the_lab_model():
    known = TorquePendulumModel(inertia=0.5, mass_com=0.2, gravity=10.0)
    x = torch.tensor([[torch.pi / 2, 3.0]])
    out = known(x, torch.tensor([[1.5]]))
    assert torch.allclose(out, torch.tensor([[3.0, (1.5 - 0.2 * 10.0) / 0.5]]))
    assert known.spec()["init_args"] == {"inertia": 0.5, "mass_com": 0.2, "gravity": 10.0, "viscous": 0.0,
                                         "coulomb": 0.0, "offset": 0.0}
    lab = TorquePendulumModel(inertia=0.5, mass_com=0.2, gravity=10.0, viscous=0.1, coulomb=0.3, offset=-0.05)
    friction = 0.1 * 3.0 + 0.3 * torch.atan(torch.tensor(300.0)) - 0.05
    assert torch.allclose(lab(x, torch.tensor([[1.5]])), torch.tensor([[3.0, (1.5 - 2.0 - friction) / 0.5]]))


def test_torque_pendulum_rejects_bad_constants():
    with pytest.raises(ValueError, match="inertia .* must be positive"):
        TorquePendulumModel(inertia=0.0)
    with pytest.raises(ValueError, match="mass_com must be a finite number"):
        TorquePendulumModel(mass_com=float("nan"))


def test_the_lab_file_gives_the_lab_model_and_a_missing_value_is_named(tmp_path):
    path = tmp_path / "system_identification.txt"
    path.write_text("# least squares\nJ = 6.259e-2\nm*cx = 1.022e-1\nFv = 4.707e-2\nFc = 1.839e-1\n"
                    "offset = -7.586e-2\n")
    model = TorquePendulumModel.from_lab_file(path, gravity=9.8)
    assert (model.inertia, model.mass_com, model.gravity) == (6.259e-2, 1.022e-1, 9.8)
    assert (model.viscous, model.coulomb, model.offset) == (4.707e-2, 1.839e-1, -7.586e-2)
    path.write_text("J = 6.259e-2\n")
    with pytest.raises(ValueError, match="no number for m\\*cx"):
        TorquePendulumModel.from_lab_file(path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        TorquePendulumModel.from_lab_file(tmp_path / "missing.txt")

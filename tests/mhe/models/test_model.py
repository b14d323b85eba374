"""Models: zero-initialized residual, output map, validation of settings and dimensions."""
import pytest
import torch

from mhe import MHESettings, MovingHorizonEstimator, NeuralResidual, SingleTrackVehicle, StateSpaceModel


def test_neural_residual_starts_at_zero_and_model_families_share_dims():
    net = NeuralResidual(3, 2, width=16, seed=1)
    x, u = torch.randn(5, 3), torch.randn(5, 2)
    assert torch.equal(net(x, u), torch.zeros(5, 3))
    phys = SingleTrackVehicle()
    gray = StateSpaceModel(phys, net, measured=(0, 2))
    physics_only = StateSpaceModel(phys, measured=(0, 2))
    assert torch.equal(gray.field(x.abs() + 1, u, torch.zeros(5, 3)), physics_only.field(x.abs() + 1, u, torch.zeros(5, 3)))
    assert torch.equal(gray.output(x), x[:, [0, 2]]) and (gray.n_y, gray.n_eta, gray.n_w) == (2, 2, 3)
    assert sum(p.numel() for p in net.parameters()) == 5 * 16 + 16 + 16 * 16 + 16 + 16 * 3 + 3


def test_model_and_settings_validation():
    with pytest.raises(ValueError, match="needs physics, a neural residual or both"):
        StateSpaceModel()
    with pytest.raises(ValueError, match="measured must list distinct state indices"):
        StateSpaceModel(SingleTrackVehicle(), measured=(0, 3))
    with pytest.raises(ValueError, match="horizon must be >= 2"):
        MHESettings(1, (1.0,), (1.0,))
    with pytest.raises(ValueError, match="solver must be 'ipopt'"):
        MHESettings(4, (1.0,), (1.0,), solver="sqp")
    model = StateSpaceModel(SingleTrackVehicle(), measured=(0, 2))
    with pytest.raises(ValueError, match="mhe.process_std needs n_w = 3 numbers for this model; got 2"):
        MovingHorizonEstimator(model, MHESettings(4, (1.0, 1.0), (1.0, 1.0)), (0, 0, 0), (1, 1, 1))
    with pytest.raises(ValueError, match="values is missing the parameters"):
        SingleTrackVehicle({"Bf": 5.0})


def test_a_residual_on_some_channels_leaves_the_others_without_residual():
    net = NeuralResidual(3, 2, width=4, outputs=(2, 0), out_scale=(2.0, 3.0, 5.0))
    with torch.no_grad():
        net.mlp.weight2.normal_()
        net.mlp.bias2.normal_()
    x, u = torch.randn(6, 3), torch.randn(6, 2)
    out = net(x, u)
    raw = net.mlp(torch.cat([x, u], dim=-1))
    assert torch.all(out[:, 1] == 0)
    assert torch.allclose(out[:, 2], 5.0 * raw[:, 0]) and torch.allclose(out[:, 0], 2.0 * raw[:, 1])
    for bad in ((), (0, 0), (3,)):
        with pytest.raises(ValueError, match="outputs must list distinct state indices"):
            NeuralResidual(3, 2, outputs=bad)

"""Physical parameters: the refit of a physics-alone field by bounded least squares on the jets."""
import pytest
import torch

from torch_ude.jet import JetLoss
from torch_ude.physical import refit_physical_parameters
from tests.torch_ude.helpers import random_field, variant_field


def _exact_jets(field, rows: int, seed: int):
    """States, inputs and their exact first and second derivatives under ``field`` (no noise)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, field.n_states, generator=gen, dtype=torch.float64)
    u = torch.randn(rows, field.n_inputs, generator=gen, dtype=torch.float64)
    udot = torch.randn(rows, field.n_inputs, generator=gen, dtype=torch.float64)
    jet = field.jet(x, u=u, udot=udot)
    return x, jet.value.detach(), jet.lie.detach(), u, udot


def _loss(field) -> JetLoss:
    n = field.n_states
    return JetLoss(torch.ones(n, dtype=torch.float64), 3 * torch.ones(n, dtype=torch.float64), 1.0, 0.1)


@pytest.mark.parametrize("known", ["torque", "axis"])
def test_the_refit_recovers_the_parameters_that_made_the_jets(known):
    truth = variant_field(known, 3, physical=True).without_residual()
    x, xdot, xddot, u, udot = _exact_jets(truth, 200, 3)
    field = truth.without_residual()
    with torch.no_grad():
        field.known.theta.zero_()  # the configured values, up to 30 % of each span away from the truth
    report = refit_physical_parameters(field, _loss(field), x, xdot, xddot, u, udot)
    assert report["converged"] and report["loss_before"] > 1e-3 and report["loss_after"] < 1e-20
    jet = field.jet(x, u=u, udot=udot)
    assert torch.allclose(jet.value, xdot, atol=1e-9) and torch.allclose(jet.lie, xddot, atol=1e-9)
    if known == "torque":  # J q'' = tau - ...: the torque's unit gain fixes every parameter (the axis's
        # mass and force gain are determined only as a ratio)
        assert torch.allclose(field.known.theta, truth.known.theta, atol=1e-9, rtol=0)
    before = report["values_before"]
    assert [before[name] for name in field.known.trainable_names] == pytest.approx(field.known.p0.tolist())


def test_the_refit_stays_inside_the_bounds():
    truth = variant_field("torque", 4, physical=True).without_residual()
    jets = _exact_jets(truth, 200, 4)
    field = truth.without_residual()
    i = field.known.trainable_names.index("viscous")
    with torch.no_grad():
        field.known.p_high[i] = field.known.value("viscous").detach() - 0.01  # the truth is now out of bounds
        field.known.theta.zero_()
    report = refit_physical_parameters(field, _loss(field), *jets)
    assert field.known.values()["viscous"] == pytest.approx(float(field.known.p_high[i]), abs=1e-9)
    assert report["loss_after"] > 1e-8  # the bound keeps the loss above the truth's zero


def test_the_refit_improves_the_loss_of_the_report_on_noisy_jets():
    truth = variant_field("torque", 5, physical=True).without_residual()
    x, xdot, xddot, u, udot = _exact_jets(truth, 300, 5)
    gen = torch.Generator().manual_seed(5)
    xdot, xddot = xdot + 0.05 * torch.randn(xdot.shape, generator=gen, dtype=torch.float64), \
        xddot + 0.2 * torch.randn(xddot.shape, generator=gen, dtype=torch.float64)
    field, loss = truth.without_residual(), _loss(truth)
    with torch.no_grad():
        field.known.theta.zero_()
    report = refit_physical_parameters(field, loss, x, xdot, xddot, u, udot)
    assert report["loss_after"] < 0.5 * report["loss_before"]
    # the refit ends at the minimum: started there, it stays
    theta = field.known.theta.detach().clone()
    again = refit_physical_parameters(field, loss, x, xdot, xddot, u, udot)
    assert torch.allclose(field.known.theta, theta, atol=1e-7, rtol=0)
    assert again["loss_after"] == pytest.approx(report["loss_after"], rel=1e-9)


def test_a_field_without_physical_parameters_is_refused():
    field = random_field("single", "A", 0)
    x = torch.zeros(4, field.n_states, dtype=field.dtype)
    with pytest.raises(ValueError, match="trains no physical|trains none"):
        refit_physical_parameters(field, _loss(field), x, x, x)

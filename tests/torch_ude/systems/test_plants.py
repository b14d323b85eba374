"""Plants: hand-derived Jacobians, cases, excitation law and bad input."""
import numpy as np
import pytest
import torch
from torch.func import jacrev

from torch_ude import DoublePendulum, SinglePendulum
from torch_ude.systems import DuffingField, PendulumField, System, ZeroField


def _jac_ref(f, x):
    return torch.stack([jacrev(f)(x[i : i + 1])[0, :, 0, :] for i in range(x.shape[0])])


@pytest.mark.parametrize("plant", [SinglePendulum(), DoublePendulum()])
@pytest.mark.parametrize("case", ["A", "B", "C", "true"])
def test_known_and_true_jacobians_match_jacrev(plant, case):
    f = plant.true_field() if case == "true" else plant.known_field(case)
    x = 2.0 * torch.randn(13, plant.n_states)
    assert torch.allclose(f.jacobian(x), _jac_ref(f, x), rtol=1e-12, atol=1e-12)


def test_the_duffing_fields_coulomb_term_and_its_jacobian():
    x = torch.randn(17, 2)
    plain, friction = DuffingField(4.0, 1.5, 0.1), DuffingField(4.0, 1.5, 0.1, mu=0.05)
    assert torch.allclose(friction(x)[:, 1] - plain(x)[:, 1], -0.05 * torch.tanh(20.0 * x[:, 1]), atol=1e-15)
    for f in (plain, friction):
        assert torch.allclose(f.jacobian(x), _jac_ref(f, x), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="mu must be >= 0; got mu=-0.1"):
        DuffingField(4.0, 1.5, 0.1, mu=-0.1)
    with pytest.raises(ValueError, match="alpha must be positive; got alpha=0"):
        DuffingField(0, 1.5, 0.1)


def test_single_pendulum_cases_follow_the_paper():
    p = SinglePendulum()
    x = torch.tensor([[0.3, -1.1]])
    true = p.true_field()(x)
    assert torch.allclose(true, torch.tensor([[-1.1, -9.81 * np.sin(0.3) + 0.4 * 1.1]]))
    a, b, c = (p.known_field(k)(x) for k in "ABC")
    assert torch.allclose(a[:, 1] - true[:, 1], torch.tensor([-0.4 * 1.1]))  # damping omitted
    assert torch.allclose(b[:, 1] - true[:, 1], torch.tensor([0.1 * 9.81 * np.sin(0.3)]))
    assert torch.allclose(c[:, 1], torch.tensor([-0.9 * 9.81 * np.sin(0.3)]))
    assert p.damping_terms("B") == ((1, 1, 0.0),) and p.damping_terms("a") == ((1, 1, 0.4),)


def test_double_pendulum_equations_at_a_known_point():
    p = DoublePendulum()
    x = torch.tensor([[2.0, 2.4, 0.0, 0.0]])
    f = p.true_field()(x)[0]
    th1, th2, g = 2.0, 2.4, 9.81
    d = th1 - th2
    den = 3 - np.cos(2 * d)
    dw1 = (-g * 3 * np.sin(th1) - g * np.sin(th1 - 2 * th2)) / den
    dw2 = 2 * np.sin(d) * (2 * g * np.cos(th1)) / den
    assert torch.allclose(f, torch.tensor([0.0, 0.0, dw1, dw2]))


def test_unknown_case_is_an_error():
    with pytest.raises(ValueError, match=r"case must be one of \['A', 'B', 'C'\]"):
        SinglePendulum().known_field("D")
    with pytest.raises(ValueError, match="case must be one of"):
        DoublePendulum().damping_terms("nominal")


def test_single_pendulum_reexcitation_stays_inside_the_energy_level():
    p = SinglePendulum()
    rng = np.random.default_rng(0)
    states = torch.as_tensor(np.stack([p.reexcite(rng) for _ in range(2000)]))
    ratio = p.energy(states) / p.energy0
    assert float(ratio.max()) <= 1.0 + 1e-12
    assert float(ratio.min()) >= 0.5 - 1e-12
    assert bool(p.visited_region(states).all())


def test_rollout_states_start_at_x0_and_lie_on_their_energy_levels():
    p = SinglePendulum()
    x0 = p.rollout_states()
    assert x0.shape == (8, 2) and x0.dtype == torch.float64 and x0[0].tolist() == [1.2, 0.0]
    fractions = torch.tensor([1.0, 0.3, 0.5, 0.7, 0.9, 0.95, 0.6, 0.4], dtype=torch.float64)
    assert torch.allclose(p.energy(x0) / p.energy0, fractions, atol=1e-12)
    assert bool(p.visited_region(x0).all()) and len({(a > 0, b > 0) for a, b in x0[1:].tolist()}) == 4


def test_grid_and_visited_region():
    p = SinglePendulum()
    grid = p.evaluation_grid()
    assert grid.shape == (1681, 2)
    inside = p.visited_region(grid)
    assert 0 < int(inside.sum()) < 1681
    assert not bool(p.visited_region(torch.tensor([[1.2, 3.5]]))[0])


def test_bad_plant_parameters_are_errors():
    with pytest.raises(ValueError, match="x0 must be 2 finite numbers"):
        SinglePendulum(x0=(1.0, float("nan")))
    with pytest.raises(ValueError, match="separatrix"):
        SinglePendulum(x0=(3.1, 1.0))
    with pytest.raises(ValueError, match="length must be positive"):
        PendulumField(9.81, 0.0, 0.1)
    with pytest.raises(ValueError, match="x0 must be 4 finite numbers"):
        DoublePendulum(x0=(1.0, 2.0))


def test_zero_field_is_a_valid_known_model():
    f = ZeroField(3)
    x = torch.randn(4, 3)
    assert torch.equal(f(x), torch.zeros(4, 3)) and f.jacobian(x).shape == (4, 3, 3)
    assert issubclass(SinglePendulum, System)

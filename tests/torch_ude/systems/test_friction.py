"""The friction pendulum: friction curve, hand-derived Jacobians, known model, region, configs, bad input."""
import math

import numpy as np
import pytest
import torch
from torch.func import jacrev

from torch_ude import FrictionPendulum, simulate
from torch_ude.cli import main
from torch_ude.systems import FrictionField, PendulumField, System


def _jac_ref(f, x):
    return torch.stack([jacrev(f)(x[i : i + 1])[0, :, 0, :] for i in range(x.shape[0])])


@pytest.mark.parametrize("which", ["true", "known"])
def test_jacobians_match_jacrev_also_where_the_sign_function_is_steep(which):
    p = FrictionPendulum()
    f = p.true_field() if which == "true" else p.known_field("A")
    x = torch.cat([2.0 * torch.randn(9, 2), torch.stack([torch.randn(9), 0.05 * torch.randn(9)], dim=1)])
    assert torch.allclose(f.jacobian(x), _jac_ref(f, x), rtol=1e-11, atol=1e-11)


def test_friction_curve_at_a_point_and_its_shape():
    f = FrictionField(9.81, 1.0, viscous=0.1, coulomb=0.5, static=0.8, stribeck_velocity=0.1, smoothing=0.02)
    w = 0.05
    expected = 0.1 * w + (0.5 + 0.3 * math.exp(-0.25)) * math.tanh(2.5)
    assert f.friction(torch.tensor([w])).item() == pytest.approx(expected, rel=1e-14)
    omega = torch.linspace(-4.0, 4.0, 801)
    phi = f.friction(omega)
    assert torch.allclose(phi, -f.friction(-omega))          # odd
    assert bool((omega * phi >= 0).all())                    # dissipative
    assert f.friction(torch.tensor([3.0])).item() == pytest.approx(0.1 * 3 + 0.5, rel=1e-6)  # Coulomb + viscous
    x = torch.tensor([[0.3, -1.1]])
    assert torch.allclose(f(x), torch.tensor([[-1.1, -9.81 * math.sin(0.3) - f.friction(torch.tensor(-1.1)).item()]]))


def test_the_known_model_is_the_pendulum_without_friction():
    p = FrictionPendulum()
    known = p.known_field("a")
    assert isinstance(known, PendulumField) and known.damping == 0.0
    x = torch.randn(20, 2)
    residual = p.true_field()(x) - known(x)
    assert torch.equal(residual[:, 0], torch.zeros(20))
    assert torch.allclose(residual[:, 1], -p.true_field().friction(x[:, 1]))
    assert p.damping_terms("A") == ((1, 1, 0.0941),)
    with pytest.raises(ValueError, match=r"case must be one of \['A'\]"):
        p.known_field("B")


def test_defaults_follow_the_dfki_identification():
    p = FrictionPendulum()
    inertia = 0.5 * 1.0**2                                   # 0.5 kg bob on the 1 m arm
    assert p.damping == pytest.approx(4.707e-2 / inertia, rel=1e-3)
    assert p.coulomb == pytest.approx(math.pi / 2 * 1.839e-1 / inertia, rel=1e-3)
    assert p.static == pytest.approx(1.5 * p.coulomb, rel=1e-3)


def test_the_stream_stays_in_the_visited_region_and_loses_energy_between_reexcitations():
    p = FrictionPendulum()
    rec = simulate(p, 20.0, noise=0.0, seed=1)
    x = torch.as_tensor(rec.x)
    energy = p.energy(x)
    assert bool(p.visited_region(x).all())
    same = torch.as_tensor(rec.segment[1:] == rec.segment[:-1])
    assert float((energy[1:] - energy[:-1])[same].max()) <= 1e-9   # friction only dissipates
    assert int(rec.segment.max()) >= 3                              # re-excited every 2.5-5 s
    grid = p.evaluation_grid()
    assert grid.shape == (1681, 2)
    assert float(grid[:, 0].max()) == pytest.approx(1.2) and float(grid[:, 1].max()) == pytest.approx(
        math.sqrt(2 * p.energy0))
    inside = int(p.visited_region(grid).sum())
    assert 1000 < inside < 1681


def test_spec_round_trip_and_configs():
    p = FrictionPendulum(coulomb=0.4, static=0.5)
    q = System.from_spec(p.spec())
    assert isinstance(q, FrictionPendulum) and q.init_args() == p.init_args()
    with pytest.raises(ValueError, match="importable torch_ude.systems.System subclass"):
        System.from_spec({"class_path": "numpy.ndarray"})
    for config in ("configs/friction_pendulum.yaml", "configs/baseline_friction_pendulum.yaml"):
        cli = main(["--config", config], run=False)
        assert isinstance(cli.datamodule.system, FrictionPendulum) and cli.datamodule.case == "A"


@pytest.mark.parametrize("kwargs, message", [
    ({"static": 0.1}, "static .* must be >= coulomb"),
    ({"coulomb": -0.1}, "viscous and coulomb must be >= 0"),
    ({"smoothing": 0.0}, "stribeck_velocity and smoothing must be positive"),
    ({"length": 0.0}, "length must be positive"),
    ({"x0": (3.1, 1.0)}, "separatrix"),
])
def test_bad_parameters_are_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        FrictionPendulum(**kwargs).true_field()


def test_reexcitation_reaches_the_chosen_energy_levels():
    p = FrictionPendulum()
    rng = np.random.default_rng(0)
    ratio = p.energy(torch.as_tensor(np.stack([p.reexcite(rng) for _ in range(2000)]))) / p.energy0
    assert 0.3 - 1e-12 <= float(ratio.min()) < 0.35 and 0.95 < float(ratio.max()) <= 1.0 + 1e-12

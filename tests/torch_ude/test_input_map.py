"""The network's input map: periodic states as (sin, cos), its tangent and pull-back."""
import math

import pytest
import torch
from torch.func import jacrev

from torch_ude.input_map import InputMap, check_periodic


def _scales(n, n_u, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return 0.5 + torch.rand(n, generator=gen), (0.5 + torch.rand(n_u, generator=gen)) if n_u else None


@pytest.mark.parametrize("periodic", [(), (0,), (0, 2)])
@pytest.mark.parametrize("n_u", [0, 2])
def test_columns_are_scaled_states_then_sin_cos_then_inputs(periodic, n_u):
    imap = InputMap(3, n_u, periodic)
    s, su = _scales(3, n_u)
    x, u = torch.randn(5, 3), torch.randn(5, n_u) if n_u else None
    z = imap(x, u, s, su)
    plain = [i for i in range(3) if i not in periodic]
    expect = [x[:, i] / s[i] for i in plain] + [torch.sin(x[:, i]) for i in periodic]
    expect += [torch.cos(x[:, i]) for i in periodic] + ([u[:, k] / su[k] for k in range(n_u)] if n_u else [])
    assert imap.width == 3 + len(periodic) + n_u and imap.state_width == 3 + len(periodic)
    assert torch.equal(z, torch.stack(expect, dim=1))


def test_without_periodic_states_the_map_is_the_old_scaling_bit_for_bit():
    s, su = _scales(2, 1)
    x, u = torch.randn(7, 2), torch.randn(7, 1)
    assert torch.equal(InputMap(2, 0)(x, None, s, None), x / s)
    assert torch.equal(InputMap(2, 1)(x, u, s, su), torch.cat((x / s, u / su), 1))


@pytest.mark.parametrize("periodic", [(), (1,), (0, 1, 2)])
@pytest.mark.parametrize("n_u", [0, 1])
def test_tangent_and_pullback_are_the_maps_jacobian(periodic, n_u):
    imap = InputMap(3, n_u, periodic)
    s, su = _scales(3, n_u, 1)
    gen = torch.Generator().manual_seed(2)
    x, v = torch.randn(4, 3, generator=gen), torch.randn(4, 3, generator=gen)
    u = torch.randn(4, n_u, generator=gen) if n_u else None
    udot = torch.randn(4, n_u, generator=gen) if n_u else None
    zbar = torch.randn(4, imap.width, generator=gen)
    z = imap(x, u, s, su)
    for b in range(4):
        jx = jacrev(lambda xx: imap(xx.reshape(1, 3), None if u is None else u[b : b + 1], s, su)[0])(x[b])
        tangent = jx @ v[b]
        if n_u:
            ju = jacrev(lambda uu: imap(x[b : b + 1], uu.reshape(1, n_u), s, su)[0])(u[b])
            assert torch.allclose(imap.tangent(z, v, udot, s, su)[b], tangent + ju @ udot[b], atol=1e-14)
        assert torch.allclose(imap.tangent(z, v, None, s, su)[b], tangent, atol=1e-14)
        assert torch.allclose(imap.pullback(z, zbar, s)[b], jx.T @ zbar[b], atol=1e-14)


def test_an_angle_and_the_angle_plus_a_turn_give_the_same_input():
    imap = InputMap(2, 1, (0,))
    s, su = _scales(2, 1)
    x, u = torch.randn(6, 2), torch.randn(6, 1)
    turned = x + torch.tensor([2 * math.pi * 7, 0.0])
    assert torch.allclose(imap(x, u, s, su), imap(turned, u, s, su), atol=1e-12)


def test_column_names():
    assert InputMap(2, 1, (0,)).columns(("q", "qdot"), ("tau",)) == ["qdot/s", "sin(q)", "cos(q)", "tau/s"]


def test_bad_periodic_indices_are_one_line_errors():
    with pytest.raises(ValueError, match=r"periodic index 2 is out of range: the plant has 2 states"):
        check_periodic([2], 2)
    with pytest.raises(ValueError, match="out of range"):
        check_periodic([-1], 2)
    with pytest.raises(ValueError, match="names a state twice"):
        check_periodic([0, 0], 2)
    with pytest.raises(TypeError, match="integer state indices"):
        check_periodic(["q"], 2)
    with pytest.raises(TypeError, match="list of state indices"):
        check_periodic(0, 2)


@pytest.mark.parametrize("n_u", [0, 1])
def test_invariant_states_are_not_read_and_their_tangent_and_cotangent_vanish(n_u):
    imap = InputMap(3, n_u, periodic=(2,), invariant=(0,))
    s, su = _scales(3, n_u, 3)
    gen = torch.Generator().manual_seed(4)
    x, v = torch.randn(5, 3, generator=gen), torch.randn(5, 3, generator=gen)
    u = torch.randn(5, n_u, generator=gen) if n_u else None
    z = imap(x, u, s, su)
    assert imap.width == 3 - 1 + 1 + n_u and imap.columns(("p", "v", "a"), ("f",) * n_u)[:3] == ["v/s", "sin(a)",
                                                                                                   "cos(a)"]
    moved = x.clone()
    moved[:, 0] += 100.0
    assert torch.equal(imap(moved, u, s, su), z)
    for b in range(5):
        jx = jacrev(lambda xx: imap(xx.reshape(1, 3), None if u is None else u[b:b + 1], s, su)[0])(x[b])
        assert torch.allclose(imap.tangent(z, v, None, s, su)[b], jx @ v[b], atol=1e-14)
    zbar = torch.randn(5, imap.width, generator=gen)
    assert bool((imap.pullback(z, zbar, s)[:, 0] == 0).all())


def test_a_state_cannot_be_both_periodic_and_invariant_nor_all_invariant():
    with pytest.raises(ValueError, match="both periodic and invariant"):
        InputMap(2, 0, periodic=(0,), invariant=(0,))
    with pytest.raises(ValueError, match="all 2 states are declared invariant"):
        InputMap(2, 0, invariant=(0, 1))
    with pytest.raises(ValueError, match="invariant index 5 is out of range"):
        InputMap(2, 0, invariant=(5,))

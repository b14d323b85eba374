"""HybridField: sizes, state derivatives against torch.func, input validation."""
import copy
import math

import pytest
import torch
from torch.func import jacrev, jvp, vjp

from torch_ude import HybridField, SinglePendulum
from torch_ude.mlp import TanhMLP
from torch_ude.systems.controlled import TorquePendulumModel
from tests.torch_ude.helpers import (PLANTS, random_batch, random_field, random_input_field, set_test_envelope,
                                     variant_field)


@pytest.mark.parametrize("plant,expected", [("single", 354), ("double", 420)])
def test_parameter_counts_match_the_paper(plant, expected):
    assert HybridField(PLANTS[plant]().known_field("A")).num_parameters() == expected


def _jacobian_ref(f, x):
    return torch.stack([jacrev(f)(x[i : i + 1])[0, :, 0, :] for i in range(x.shape[0])])


@pytest.mark.parametrize("plant", ["single", "double"])
@pytest.mark.parametrize("case,linear", [("A", False), ("B", False), ("C", False), ("A", True)])
def test_jacobian_and_lie_derivative_match_jacrev(plant, case, linear):
    field = random_field(plant, case, 4, linear)
    x = random_batch(field.n_states, 9, 4)[0]
    jac = _jacobian_ref(field.evaluate, x)
    assert torch.allclose(field.jacobian(x), jac, rtol=1e-12, atol=1e-12)
    g_ref = torch.einsum("bij,bj->bi", jac, field.evaluate(x))
    assert torch.allclose(field.lie_derivative(x), g_ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("plant", ["single", "double"])
@pytest.mark.parametrize("linear", [False, True])
def test_jvp_and_vjp_match_torch_func(plant, linear):
    field = random_field(plant, "C", 5, linear)
    x, v, u = random_batch(field.n_states, 11, 5)
    _, jv = jvp(field.evaluate, (x,), (v,))
    assert torch.allclose(field.jvp(x, v), jv, rtol=1e-12, atol=1e-12)
    _, pull = vjp(field.evaluate, x)
    assert torch.allclose(field.vjp(x, u), pull(u)[0], rtol=1e-12, atol=1e-12)


def test_float32_field_runs_in_float32():
    system = SinglePendulum()
    field = HybridField(system.known_field("A"), dtype=torch.float32)
    x = torch.randn(5, 2, dtype=torch.float32)
    assert field(x).dtype == torch.float32
    assert field.lie_derivative(x).dtype == torch.float32


def test_forward_rejects_bad_states():
    field = random_field("single", "A", 0)
    with pytest.raises(ValueError, match=r"shape \(N, 2\)"):
        field(torch.zeros(3, 4))
    with pytest.raises(ValueError, match=r"shape \(N, 2\)"):
        field(torch.zeros(2))
    with pytest.raises(ValueError, match="NaN or Inf"):
        field(torch.tensor([[0.0, float("inf")]]))
    with pytest.raises(TypeError, match="torch.Tensor"):
        field([[0.0, 1.0]])
    with pytest.raises(TypeError, match="float32 or float64"):
        field(torch.zeros(3, 2, dtype=torch.int64))


@pytest.mark.parametrize("method", ["evaluate", "forward", "residual"])
def test_every_public_entry_validates_its_states(method):
    field = random_field("single", "A", 0)
    call = getattr(field, method)
    with pytest.raises(ValueError, match=r"shape \(N, 2\).*got shape \(2,\).*reshape\(1, -1\)"):
        call(torch.zeros(2))
    with pytest.raises(ValueError, match=r"shape \(N, 2\).*got shape \(5, 3\)"):
        call(torch.zeros(5, 3))
    for dtype in (torch.float16, torch.bfloat16, torch.int64):
        with pytest.raises(TypeError, match=rf"float32 or float64 tensor; got dtype {dtype}.*x\.to\(torch\.float64\)"):
            call(torch.zeros(5, 2, dtype=dtype))
    with pytest.raises(TypeError, match=r"dtype torch.float32 but the field's parameters are torch.float64.*"
                                        r"x\.to\(torch\.float64\)"):
        call(torch.zeros(5, 2, dtype=torch.float32))
    with pytest.raises(ValueError, match="NaN or Inf"):
        call(torch.tensor([[0.0, float("nan")]]))
    assert call(torch.zeros(5, 2)).shape == (5, 2)


def test_the_unchecked_path_is_the_checked_value():
    field = random_field("double", "B", 2)
    x = random_batch(4, 7, 2)[0]
    assert torch.equal(field.evaluate(x), field.evaluate_unchecked(x))
    assert torch.equal(field.jet(x, lie=False).value, field.evaluate_unchecked(x))


def test_set_scales_rejects_bad_scales():
    field = random_field("single", "A", 0)
    with pytest.raises(ValueError, match="positive finite"):
        field.set_scales(torch.tensor([1.0, -1.0]), torch.ones(2))
    with pytest.raises(ValueError, match="positive finite"):
        field.set_scales(torch.ones(3), torch.ones(2))


# ----- fields with recorded inputs ----------------------------------------------------------
@pytest.mark.parametrize("model", ["torque", "coupled"])
@pytest.mark.parametrize("linear", [False, True, "affine"])
def test_input_field_value_and_lie_derivative_match_torch_func(model, linear):
    field = random_input_field(model, 6, linear)
    n, m = field.n_states, field.n_inputs
    gen = torch.Generator().manual_seed(6)
    x, u, udot = torch.randn(11, n, generator=gen), torch.randn(11, m, generator=gen), torch.randn(11, m, generator=gen)
    value = field.known(x, u) + field.out_scale * field.mlp(torch.cat((x / field.in_scale, u / field.input_scale), 1))
    assert torch.allclose(field.evaluate(x, u), value, rtol=1e-14, atol=1e-14)
    # G is the time derivative of F along x' = F and the measured input rate
    _, g_ref = jvp(field.evaluate, (x, u), (value, udot))
    jet = field.jet(x, u=u, udot=udot)
    assert torch.allclose(jet.value, value, rtol=1e-14, atol=1e-14)
    assert torch.allclose(jet.lie, g_ref, rtol=1e-12, atol=1e-12)
    assert torch.allclose(field.residual(x, u), value - field.known(x, u), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("linear", [False, True, "affine"])
def test_input_field_state_vjp_block_matches_torch_func(linear):
    field = random_input_field("coupled", 2, linear)
    gen = torch.Generator().manual_seed(2)
    x, u, w = torch.randn(5, 2, generator=gen), torch.randn(5, 2, generator=gen), torch.randn(5, 2, generator=gen)
    _, pull = vjp(lambda xx: field.residual(xx, u), x)
    acts = field.mlp.activations(field.net_input(x, u))
    assert torch.allclose(field.vjp_residual(acts, w), pull(w)[0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("linear", [False, True, "affine"])
def test_input_field_state_derivatives_match_torch_func(linear):
    field = random_input_field("coupled", 3, linear)
    gen = torch.Generator().manual_seed(3)
    x, u, udot = (torch.randn(6, 2, generator=gen, dtype=torch.float64) for _ in range(3))
    v, w = torch.randn(6, 2, generator=gen, dtype=torch.float64), torch.randn(6, 2, generator=gen, dtype=torch.float64)
    jac = torch.stack([jacrev(lambda xx: field.evaluate(xx, u[i : i + 1]))(x[i : i + 1])[0, :, 0, :] for i in range(6)])
    assert torch.allclose(field.jacobian(x, u), jac, rtol=1e-12, atol=1e-12)
    assert torch.allclose(field.jvp(x, v, u), torch.einsum("bij,bj->bi", jac, v), rtol=1e-12, atol=1e-12)
    assert torch.allclose(field.vjp(x, w, u), torch.einsum("bij,bi->bj", jac, w), rtol=1e-12, atol=1e-12)
    _, g_ref = jvp(field.evaluate, (x, u), (field.evaluate(x, u), udot))
    assert torch.allclose(field.lie_derivative(x, u, udot), g_ref, rtol=1e-12, atol=1e-12)


def test_input_field_checks_its_inputs():
    field = random_input_field("torque", 0)
    x = torch.zeros(4, 2)
    with pytest.raises(ValueError, match=r"reads 1 recorded input\(s\): pass u of shape \(N, 1\)"):
        field(x)
    with pytest.raises(ValueError, match=r"u must have shape \(N, 1\)"):
        field(x, torch.zeros(4, 2))
    with pytest.raises(ValueError, match="one row per state: 4 rows; got 3"):
        field(x, torch.zeros(3, 1))
    with pytest.raises(ValueError, match="u holds NaN or Inf"):
        field(x, torch.full((4, 1), float("inf")))
    with pytest.raises(ValueError, match="has no inputs"):
        random_field("single", "A", 0)(x, torch.zeros(4, 1))
    with pytest.raises(ValueError, match=r"reads 1 recorded input\(s\): pass inputs of shape \(N, 1\)"):
        field.jacobian(x)
    with pytest.raises(ValueError, match=r"pass input_rates of shape \(N, 1\)"):
        field.lie_derivative(x, torch.zeros(4, 1))
    with pytest.raises(ValueError, match="inputs was given but this field has no inputs"):
        random_field("single", "A", 0).jvp(x, x, torch.zeros(4, 1))
    with pytest.raises(ValueError, match="input_scale must be 1 positive"):
        field.set_scales(torch.ones(2), torch.ones(2))
    with pytest.raises(ValueError, match="input_scale must be 1 positive finite"):
        field.set_scales(torch.ones(2), torch.ones(2), torch.tensor([0.0]))


def test_an_autonomous_field_is_unchanged_by_the_input_code():
    field = random_field("double", "A", 1)
    assert field.n_inputs == 0 and "input_scale" not in field.state_dict()
    assert field.mlp.sizes == (4, 16, 16, 4)


# ----- the residual's linear term (linear=True) ------------------------------------------------
@pytest.mark.parametrize("model", ["torque", "coupled"])
def test_the_linear_term_is_l_times_the_normalized_input(model):
    field = random_input_field(model, 3, linear=True)
    gen = torch.Generator().manual_seed(3)
    x, u = torch.randn(6, field.n_states, generator=gen), torch.randn(6, field.n_inputs, generator=gen)
    z = field.net_input(x, u)
    plain = HybridField(field.known)  # the same MLP without L
    plain.load_state_dict({k: v for k, v in field.state_dict().items() if k != "mlp.linear_weight"})
    lin = field.mlp.linear_weight
    assert lin.shape == (field.n_states, field.n_states + field.n_inputs) and bool((lin != 0).all())
    expected = field.out_scale * (plain.mlp(z) + z @ lin.T)
    assert torch.allclose(field.residual(x, u), expected, rtol=1e-14, atol=1e-14)
    assert field.num_parameters() == plain.num_parameters() + lin.numel()
    assert field.parameters_list()[-1] is lin


@pytest.mark.parametrize("known", [SinglePendulum().known_field("A"), TorquePendulumModel()])
def test_the_linear_term_starts_at_zero_and_changes_nothing(known):
    off, on = HybridField.from_seed(known, 7), HybridField.from_seed(known, 7, linear=True)
    assert not off.linear and on.linear and bool((on.mlp.linear_weight == 0).all())
    for p, q in zip(off.parameters_list(), on.parameters_list()):  # the seed's draws are the same
        assert torch.equal(p, q)
    gen = torch.Generator().manual_seed(7)
    for field in (off, on):
        n, m = field.n_states, field.n_inputs
        field.set_scales(torch.full((n,), 0.7), torch.full((n,), 1.9), torch.full((m,), 0.8) if m else None)
    x = torch.randn(9, off.n_states, generator=gen)
    u, udot = (torch.randn(9, off.n_inputs, generator=gen) if off.n_inputs else None for _ in range(2))
    a, b = off.jet(x, u=u, udot=udot), on.jet(x, u=u, udot=udot)
    assert torch.equal(a.value, b.value) and torch.equal(a.lie, b.lie)
    w = torch.randn(9, off.n_states, generator=gen)
    assert torch.equal(off.vjp_residual(a.acts, w), on.vjp_residual(b.acts, w))
    grads_off = off.parameter_vjp(a.acts, w, a.tangents, w)
    grads_on = on.parameter_vjp(b.acts, w, b.tangents, w)
    assert len(grads_on) == len(grads_off) + 1
    for g, h in zip(grads_off, grads_on):
        assert torch.equal(g, h)


def test_without_the_linear_term_the_state_dict_is_unchanged():
    field = HybridField(SinglePendulum().known_field("A"))
    assert list(field.state_dict()) == ["in_scale", "out_scale", "mlp.weight0", "mlp.bias0", "mlp.weight1",
                                        "mlp.bias1", "mlp.weight2", "mlp.bias2"]
    assert "linear_weight" not in dict(field.mlp.named_parameters())
    assert list(HybridField(TorquePendulumModel(), linear=True).state_dict())[-1] == "mlp.linear_weight"
    # a checkpoint of a plain field loads into a plain field; into one with the term it names the missing key
    HybridField(SinglePendulum().known_field("A")).load_state_dict(field.state_dict())
    with pytest.raises(RuntimeError, match="mlp.linear_weight"):
        HybridField(SinglePendulum().known_field("A"), linear=True).load_state_dict(field.state_dict())


def test_the_linear_option_must_be_a_bool():
    with pytest.raises(TypeError, match="linear must be True or False; got 'yes'"):
        HybridField(SinglePendulum().known_field("A"), linear="yes")


# ----- the input-affine form (input_affine=True) ----------------------------------------------
@pytest.mark.parametrize("model", ["torque", "coupled"])
def test_input_affine_residual_is_the_state_network_plus_l_z(model):
    field = random_input_field(model, 5, "affine")
    n, m = field.n_states, field.n_inputs
    assert field.input_affine and field.mlp.weight0.shape == (16, n)
    gen = torch.Generator().manual_seed(5)
    x, u = torch.randn(7, n, generator=gen), torch.randn(7, m, generator=gen)
    z = field.net_input(x, u)
    mlp = field.mlp
    h = torch.tanh(x / field.in_scale @ mlp.weight0.T + mlp.bias0)
    h = torch.tanh(h @ mlp.weight1.T + mlp.bias1)
    expected = field.out_scale * (h @ mlp.weight2.T + mlp.bias2 + z @ mlp.linear_weight.T)
    assert torch.allclose(field.residual(x, u), expected, rtol=1e-13, atol=1e-13)
    # the residual's input gain is the constant matrix s_out L_u / s_u: a second u changes N linearly
    du = torch.randn(7, m, generator=gen)
    gain = field.out_scale[:, None] * mlp.linear_weight[:, n:] / field.input_scale
    assert torch.allclose(field.residual(x, u + du) - field.residual(x, u), du @ gain.T, rtol=1e-12, atol=1e-12)


def test_input_affine_needs_inputs_and_the_linear_term():
    with pytest.raises(ValueError, match="input_affine=True needs a known model with recorded inputs"):
        HybridField(SinglePendulum().known_field("A"), linear=True, input_affine=True)
    with pytest.raises(ValueError, match="got 1 inputs, linear=False"):
        HybridField(TorquePendulumModel(), input_affine=True)
    field = HybridField(TorquePendulumModel(), linear=True)
    assert not field.input_affine and field.mlp.weight0.shape == (16, 3)
    with pytest.raises(ValueError, match="reads=2 < 3 inputs needs linear=True"):
        TanhMLP((3, 16, 2), reads=2)
    with pytest.raises(ValueError, match="reads must lie between 1 and the input width 3; got 4"):
        TanhMLP((3, 16, 2), linear=True, reads=4)


# ----- periodic states and the trust envelope ------------------------------------------------
VARIANTS = [
    ("single", (0,), False, False), ("single", (0,), True, False), ("single", (), True, True),
    ("double", (0, 1), True, True), ("torque", (0,), True, False), ("torque", (0,), True, "affine"),
    ("coupled", (1,), True, True), ("coupled", (), True, "affine"),
]


def _variant_data(field, batch, seed):
    gen = torch.Generator().manual_seed(40 + seed)
    x, v, w = (2.0 * torch.randn(batch, field.n_states, generator=gen) for _ in range(3))
    u = udot = None
    if field.n_inputs:
        u, udot = (torch.randn(batch, field.n_inputs, generator=gen) for _ in range(2))
    return x, v, w, u, udot


@pytest.mark.parametrize("known,periodic,envelope,linear", VARIANTS)
def test_state_derivatives_with_periodic_states_and_an_envelope_match_torch_func(known, periodic, envelope, linear):
    field = variant_field(known, 7, periodic, linear)
    x, v, w, u, udot = _variant_data(field, 24, 7)
    if envelope:
        set_test_envelope(field, x, u)  # the random states lie inside, in the band and beyond
        fades = field.fade(field.net_input(x, u))[0]
        assert bool((fades == 1).any()) and bool((fades == 0).any()) and bool(((fades > 0) & (fades < 1)).any())
    f = (lambda xx: field.evaluate(xx)) if u is None else (lambda xx: field.evaluate(xx, u))
    jac = torch.stack([jacrev(lambda xx, i=i: (field.evaluate(xx) if u is None else field.evaluate(xx, u[i:i + 1])))(
        x[i:i + 1])[0, :, 0, :] for i in range(x.shape[0])])
    assert torch.allclose(field.jacobian(x, u), jac, rtol=1e-12, atol=1e-12)
    assert torch.allclose(field.jvp(x, v, u), jvp(f, (x,), (v,))[1], rtol=1e-12, atol=1e-12)
    assert torch.allclose(field.vjp(x, w, u), vjp(f, x)[1](w)[0], rtol=1e-12, atol=1e-12)
    value = field.evaluate(x, u)
    if u is None:
        g_ref = jvp(field.evaluate, (x,), (value,))[1]
    else:
        g_ref = jvp(field.evaluate, (x, u), (value, udot))[1]
    assert torch.allclose(field.lie_derivative(x, u, udot), g_ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("known,periodic", [("single", (0,)), ("double", (0, 1)), ("torque", (0,))])
def test_a_periodic_state_turned_by_whole_turns_gives_the_same_field(known, periodic):
    field = variant_field(known, 3, periodic)
    x, _, _, u, _ = _variant_data(field, 9, 3)
    turns = torch.zeros(field.n_states)
    turns[list(periodic)] = 2 * math.pi * torch.tensor([3.0, -5.0][: len(periodic)])
    assert torch.allclose(field.residual(x + turns, u), field.residual(x, u), atol=1e-12)
    assert field.mlp.sizes[0] == field.n_states + len(periodic) + field.n_inputs


def test_the_envelope_fades_the_residual_to_the_physics():
    field = variant_field("torque", 5, (0,))
    x, _, _, u, _ = _variant_data(field, 200, 5)
    before = field.residual(x, u)
    z = field.net_input(x, u)
    field.set_envelope(z.amin(0), z.amax(0), torch.full((z.shape[1],), 0.1))
    assert torch.equal(field.residual(x, u), before) and not bool(field.outside(x, u).any())
    far = x + torch.tensor([0.0, 1000.0])
    assert torch.equal(field.evaluate(far, u), field.known(far, u))
    assert bool(field.outside(far, u).all())
    bare = field.without_envelope()  # the same weights unfaded; the original keeps its envelope
    assert bare.envelope is None and field.envelope is not None and "envelope_low" not in bare.state_dict()
    assert torch.equal(bare.residual(x, u), before) and not torch.equal(bare.evaluate(far, u), field.evaluate(far, u))


def test_the_envelope_travels_in_the_state_dict_and_through_dtype_changes():
    field = variant_field("single", 2, (0,))
    x = torch.randn(5, 2)
    set_test_envelope(field, torch.randn(30, 2))
    fresh = HybridField(field.known, periodic=(0,))
    assert fresh.envelope is None
    fresh.load_state_dict(field.state_dict())
    assert torch.equal(fresh.evaluate(x), field.evaluate(x))
    single = copy.deepcopy(field).to(torch.float32)
    assert single.envelope[0].dtype == torch.float32
    assert torch.allclose(single.evaluate(x.float()).double(), field.evaluate(x), atol=1e-5)


def test_set_envelope_rejects_bad_boxes():
    field = variant_field("single", 0, (0,))
    ok = torch.zeros(3)
    with pytest.raises(ValueError, match="3 finite numbers"):
        field.set_envelope(torch.zeros(2), ok, ok + 1)
    with pytest.raises(ValueError, match="low <= high and a positive margin"):
        field.set_envelope(ok + 1, ok, ok + 1)
    with pytest.raises(ValueError, match="low <= high and a positive margin"):
        field.set_envelope(ok, ok, ok)
    with pytest.raises(ValueError, match="periodic index 2 is out of range"):
        HybridField(SinglePendulum().known_field("A"), periodic=(2,))


@pytest.mark.parametrize("linear", [False, True, "affine"])
def test_without_residual_is_the_trained_physics_alone(linear):
    field = variant_field("torque", 7, linear=linear, physical=True)
    x, _, _, u, _ = _variant_data(field, 50, 7)
    physics = field.without_residual()
    assert torch.equal(physics.known.theta, field.known.theta)  # the trained physical parameters are kept
    assert float(field.known.theta.abs().min()) > 0
    assert torch.allclose(physics.evaluate(x, u), field.known(x, u), atol=1e-14, rtol=0)
    assert not torch.allclose(field.evaluate(x, u), field.known(x, u))


def test_configured_physics_is_the_known_model_at_its_configured_constants():
    known = TorquePendulumModel(viscous=0.1, trainable={"viscous": [0.0, 1.0]})
    with torch.no_grad():
        known.theta.add_(0.5)  # a trained value
    field = HybridField.configured_physics(known)
    x, u = torch.randn(7, 2, dtype=torch.float64), torch.randn(7, 1, dtype=torch.float64)
    assert torch.equal(field.evaluate(x, u), TorquePendulumModel(viscous=0.1)(x, u))

"""The hand-written jet gradient (Eq. 14-16) against torch.func and complex-step differentiation.

36 conditions: both plants x Cases A/B/C x lambda2 in {0, 0.1} x three (batch, weight
seed) pairs, all float64; with recorded inputs, 8 more: two known models (one and two
inputs) x lambda2 in {0, 0.1} x two (batch, weight seed) pairs. With the residual's linear
term (``HybridField(..., linear=True)``, a random ``L``): 4 autonomous conditions (both
plants, Case A, lambda2 in {0, 0.1}) and 4 with inputs (both models, lambda2 in {0, 0.1}); the
same 4 with the input-affine form (``input_affine=True``: the tanh layers read the states only).
"""
import copy

import pytest
import torch
from torch.func import functional_call, grad, jvp

from torch_ude import HybridField, JetLoss, SinglePendulum
from torch_ude.jet import jet_update_macs
from torch_ude.systems import TorquePendulumModel
from tests.torch_ude.helpers import random_batch, random_field, random_input_field, set_test_envelope, variant_field

CONDITIONS = [
    (plant, case, lam2, batch, seed)
    for plant in ("single", "double")
    for case in ("A", "B", "C")
    for lam2 in (0.0, 0.1)
    for batch, seed in ((1, 0), (7, 1), (64, 2))
]


def _loss_for(field, lam2, seed):
    n = field.n_states
    gen = torch.Generator().manual_seed(500 + seed)
    return JetLoss(0.5 + torch.rand(n, generator=gen), 0.5 + torch.rand(n, generator=gen), 1.0, lam2)


def _naive_loss(field, loss, x, xd, xdd):
    """The loss with G = J_F F by forward-mode autograd, as a function of the MLP weights."""
    names = [name for name, _ in field.mlp.named_parameters()]

    def value(params):
        def f(xx):
            return field.known(xx) + field.out_scale * functional_call(
                field.mlp, dict(zip(names, params)), (xx / field.in_scale,))
        val = f(x)
        _, g = jvp(f, (x,), (val,))
        r1, r2 = (xd - val) / loss.s1, (xdd - g) / loss.s2
        return (loss.lambda1 * (r1 * r1).sum() + loss.lambda2 * (r2 * r2).sum()) / x.shape[0]

    params = [p.detach() for _, p in field.mlp.named_parameters()]
    order = {id(p): i for i, (_, p) in enumerate(field.mlp.named_parameters())}
    return value, params, [order[id(p)] for p in field.parameters_list()]


def _rel(a, b):
    num = torch.sqrt(sum(((x - y) ** 2).sum() for x, y in zip(a, b)))
    den = torch.sqrt(sum((y**2).sum() for y in b))
    return float(num / den)


LINEAR = [(plant, "A", lam2, 7, 1, True) for plant in ("single", "double") for lam2 in (0.0, 0.1)]


@pytest.mark.parametrize("plant,case,lam2,batch,seed,linear", [(*c, False) for c in CONDITIONS] + LINEAR)
def test_gradient_matches_torch_func(plant, case, lam2, batch, seed, linear):
    field = random_field(plant, case, seed, linear)
    x, xd, xdd = random_batch(field.n_states, batch, seed)
    loss = _loss_for(field, lam2, seed)
    res = loss.value_and_grad(field, x, xd, xdd)
    value, params, order = _naive_loss(field, loss, x, xd, xdd)
    ref = grad(value)(params)
    assert _rel(res.grads, [ref[i] for i in order]) <= 1e-10
    assert torch.allclose(res.loss, value(params), rtol=1e-13, atol=0)


def _complex_step_grads(field, loss, *data, h: float = 1e-30) -> list[torch.Tensor]:
    """The loss gradient by complex step, one parameter entry at a time (float64, per parameter tensor)."""
    cfield = copy.deepcopy(field).to(torch.complex128)
    cdata = [t.to(torch.complex128) for t in data]
    cs = []
    with torch.no_grad():
        for p in cfield.parameters_list():
            g = torch.empty(p.shape, dtype=torch.float64)
            flat, gflat = p.view(-1), g.view(-1)
            for k in range(flat.numel()):
                flat[k] += 1j * h
                gflat[k] = loss(cfield, *cdata).imag / h
                flat[k] -= 1j * h
            cs.append(g)
    return cs


@pytest.mark.parametrize("plant,case,lam2,batch,seed,linear", [(*c, False) for c in CONDITIONS] + LINEAR)
def test_gradient_matches_complex_step(plant, case, lam2, batch, seed, linear):
    field = random_field(plant, case, seed, linear)
    x, xd, xdd = random_batch(field.n_states, batch, seed)
    loss = _loss_for(field, lam2, seed)
    res = loss.value_and_grad(field, x, xd, xdd)
    assert _rel(res.grads, _complex_step_grads(field, loss, x, xd, xdd)) <= 1e-12


def test_no_autograd_graph_is_built(monkeypatch):
    field = random_field("single", "A", 0)
    x, xd, xdd = random_batch(2, 32, 0)
    assert all(p.requires_grad for p in field.parameters_list())

    def forbidden(*args, **kwargs):
        raise AssertionError("torch.autograd was called on the training path")

    monkeypatch.setattr(torch.autograd, "grad", forbidden)
    monkeypatch.setattr(torch.autograd, "backward", forbidden)
    monkeypatch.setattr(torch.Tensor, "backward", forbidden)
    res = JetLoss(torch.ones(2), torch.ones(2), 1.0, 0.1).value_and_grad(field, x, xd, xdd)
    for t in (res.loss, res.loss_r1, res.loss_r2, *res.grads):
        assert t.grad_fn is None and not t.requires_grad


@pytest.mark.parametrize("lam2,linear", [(0.0, False), (0.1, False), (0.1, True)])
def test_gradients_written_into_given_tensors_are_the_new_ones(lam2, linear):
    field = random_field("double", "C", 4, linear)
    x, xd, xdd = random_batch(4, 64, 4)
    loss = _loss_for(field, lam2, 4)
    ref = loss.value_and_grad(field, x, xd, xdd)
    out = [torch.full_like(p, 7.0) for p in field.parameters_list()]
    res = loss.value_and_grad(field, x, xd, xdd, out=out)
    assert all(g is o for g, o in zip(res.grads, out))
    assert all(torch.equal(g, r) for g, r in zip(res.grads, ref.grads))


def test_written_grad_drives_a_torch_optimizer():
    field = random_field("double", "C", 3)
    x, xd, xdd = random_batch(4, 64, 3)
    loss = JetLoss(torch.ones(4), torch.ones(4), 1.0, 0.1)
    opt = torch.optim.Adam(field.parameters(), lr=1e-2)
    first = float(loss.value_and_grad(field, x, xd, xdd).loss)
    for _ in range(50):
        res = loss.value_and_grad(field, x, xd, xdd)
        field.write_grad(res.grads)
        opt.step()
    assert float(loss.value_and_grad(field, x, xd, xdd).loss) < 0.9 * first


def test_loss_rejects_bad_batches():
    field = random_field("single", "A", 0)
    loss = JetLoss(torch.ones(2), torch.ones(2))
    x, xd, xdd = random_batch(2, 8, 0)
    with pytest.raises(ValueError, match=r"shape \(N, 2\)"):
        loss.value_and_grad(field, x[:, :1], xd, xdd)
    bad = xd.clone()
    bad[3, 1] = float("nan")
    with pytest.raises(ValueError, match="NaN or Inf"):
        loss.value_and_grad(field, x, bad, xdd)
    with pytest.raises(ValueError, match="same shape"):
        loss.value_and_grad(field, x, xd[:4], xdd)
    with pytest.raises(ValueError, match="positive finite"):
        JetLoss(torch.tensor([1.0, 0.0]), torch.ones(2))
    with pytest.raises(ValueError, match=">= 0"):
        JetLoss(torch.ones(2), torch.ones(2), lambda2=-1.0)


def test_an_empty_batch_is_a_clear_error():
    field = random_field("single", "A", 0)
    empty = torch.empty(0, 2)
    with pytest.raises(ValueError, match=r"no samples \(batch size 0\).*at least one sample"):
        JetLoss(torch.ones(2), torch.ones(2)).value_and_grad(field, empty, empty, empty)


def test_inputs_in_another_dtype_than_the_field_are_a_clear_error():
    field = random_field("single", "A", 0)
    loss = JetLoss(torch.ones(2), torch.ones(2))
    x, xd, xdd = (t.float() for t in random_batch(2, 8, 0))
    with pytest.raises(TypeError, match=r"x has dtype torch.float32 but the field's parameters are torch.float64; "
                                        r"convert the states with x\.to\(torch\.float64\)"):
        loss.value_and_grad(field, x, xd, xdd)
    # a float32 field trains on float32 inputs once the loss is converted too
    field32, loss32 = copy.deepcopy(field).float(), copy.deepcopy(loss).float()
    res = loss32.value_and_grad(field32, x, xd, xdd)
    assert res.loss.dtype == torch.float32 and all(g.dtype == torch.float32 for g in res.grads)
    with pytest.raises(TypeError, match=r"loss scales are torch.float64.*loss\.to\(torch\.float32\)"):
        loss.value_and_grad(field32, x, xd, xdd)


# ----- recorded inputs: F(x, u), G = J_x F F + J_u F udot ------------------------------------
INPUT_CONDITIONS = [(model, lam2, batch, seed, False) for model in ("torque", "coupled") for lam2 in (0.0, 0.1)
                    for batch, seed in ((1, 0), (9, 1))]
INPUT_CONDITIONS += [(model, lam2, 9, 1, form) for model in ("torque", "coupled") for lam2 in (0.0, 0.1)
                     for form in (True, "affine")]


def _input_batch(field, batch, seed):
    gen = torch.Generator().manual_seed(700 + seed)
    n, m = field.n_states, field.n_inputs
    return tuple(torch.randn(batch, k, generator=gen) for k in (n, n, n, m, m))


def _naive_input_loss(field, loss, x, xd, xdd, u, udot):
    """The loss with G = d/dt F(x, u) along (F, udot) by forward-mode autograd, in the MLP weights."""
    names = [name for name, _ in field.mlp.named_parameters()]

    def value(params):
        def f(xx, uu):
            z = torch.cat((xx / field.in_scale, uu / field.input_scale), dim=1)
            return field.known(xx, uu) + field.out_scale * functional_call(field.mlp, dict(zip(names, params)), (z,))
        val = f(x, u)
        _, g = jvp(f, (x, u), (val, udot))
        r1, r2 = (xd - val) / loss.s1, (xdd - g) / loss.s2
        return (loss.lambda1 * (r1 * r1).sum() + loss.lambda2 * (r2 * r2).sum()) / x.shape[0]

    params = [p.detach() for _, p in field.mlp.named_parameters()]
    order = {id(p): i for i, (_, p) in enumerate(field.mlp.named_parameters())}
    return value, params, [order[id(p)] for p in field.parameters_list()]


@pytest.mark.parametrize("model,lam2,batch,seed,linear", INPUT_CONDITIONS)
def test_input_gradient_matches_torch_func(model, lam2, batch, seed, linear):
    field = random_input_field(model, seed, linear)
    x, xd, xdd, u, udot = _input_batch(field, batch, seed)
    loss = _loss_for(field, lam2, seed)
    res = loss.value_and_grad(field, x, xd, xdd, u=u, udot=udot)
    value, params, order = _naive_input_loss(field, loss, x, xd, xdd, u, udot)
    ref = grad(value)(params)
    assert _rel(res.grads, [ref[i] for i in order]) <= 1e-10
    assert torch.allclose(res.loss, value(params), rtol=1e-13, atol=0)


@pytest.mark.parametrize("model,lam2,batch,seed,linear", INPUT_CONDITIONS)
def test_input_gradient_matches_complex_step(model, lam2, batch, seed, linear):
    field = random_input_field(model, seed, linear)
    data = _input_batch(field, batch, seed)
    loss = _loss_for(field, lam2, seed)
    res = loss.value_and_grad(field, *data[:3], u=data[3], udot=data[4])
    assert _rel(res.grads, _complex_step_grads(field, loss, *data)) <= 1e-12


def test_input_loss_checks_its_inputs():
    field = random_input_field("torque", 0)
    x, xd, xdd, u, udot = _input_batch(field, 8, 0)
    loss = JetLoss(torch.ones(2), torch.ones(2))
    with pytest.raises(ValueError, match=r"pass u of shape \(N, 1\)"):
        loss.value_and_grad(field, x, xd, xdd)
    with pytest.raises(ValueError, match=r"pass udot of shape \(N, 1\)"):
        loss.value_and_grad(field, x, xd, xdd, u=u)
    bad = udot.clone()
    bad[2, 0] = float("nan")
    with pytest.raises(ValueError, match="udot holds NaN or Inf"):
        loss.value_and_grad(field, x, xd, xdd, u=u, udot=bad)
    with pytest.raises(ValueError, match="has no inputs"):
        loss.value_and_grad(random_field("single", "A", 0), x, xd, xdd, u=u, udot=udot)


# ----- periodic states and the trust envelope --------------------------------------------------
VARIANT_CONDITIONS = [(known, periodic, envelope, linear, lam2)
                      for known, periodic, envelope, linear in (
                          ("single", (0,), False, False), ("single", (0,), True, True), ("double", (0, 1), True, False),
                          ("torque", (0,), True, "affine"), ("coupled", (1,), True, True), ("coupled", (0, 1), False, False))
                      for lam2 in (0.0, 0.1)]


def _variant_batch(field, batch, seed):
    gen = torch.Generator().manual_seed(900 + seed)
    n, m = field.n_states, field.n_inputs
    x, xd, xdd = (2.0 * torch.randn(batch, n, generator=gen) for _ in range(3))
    u, udot = (torch.randn(batch, m, generator=gen) for _ in range(2)) if m else (None, None)
    return x, xd, xdd, u, udot


def _reference_loss(field, loss, x, xd, xdd, u, udot):
    """The loss as a function of the field's weights by torch.func through the field's own forward
    (the input map, the fade): G by forward mode along (F, udot)."""
    names = [name for name, _ in field.named_parameters()]

    def value(params):
        p = dict(zip(names, params))
        if u is None:
            def f(xx):
                return functional_call(field, p, (xx,))
            val = f(x)
            _, g = jvp(f, (x,), (val,))
        else:
            def f(xx, uu):
                return functional_call(field, p, (xx, uu))
            val = f(x, u)
            _, g = jvp(f, (x, u), (val, udot))
        r1, r2 = (xd - val) / loss.s1, (xdd - g) / loss.s2
        return (loss.lambda1 * (r1 * r1).sum() + loss.lambda2 * (r2 * r2).sum()) / x.shape[0]

    params = [p.detach() for _, p in field.named_parameters()]
    order = {id(p): i for i, (_, p) in enumerate(field.named_parameters())}
    return value, params, [order[id(p)] for p in field.parameters_list()]


PHYSICAL_CONDITIONS = [("torque", (0,), True, "affine", lam2, True) for lam2 in (0.0, 0.1)]
PHYSICAL_CONDITIONS += [("single", (), False, False, lam2, True) for lam2 in (0.0, 0.1)]
PHYSICAL_CONDITIONS += [("axis", (), True, True, 0.1, True), ("double_torque", (0, 1), True, "affine", 0.1, True)]


@pytest.mark.parametrize("known,periodic,envelope,linear,lam2,physical",
                         [(*c, False) for c in VARIANT_CONDITIONS] + PHYSICAL_CONDITIONS)
def test_gradient_with_periodic_states_and_an_envelope_matches_torch_func_and_complex_step(known, periodic, envelope,
                                                                                            linear, lam2, physical):
    """Also with trained physical parameters (``physical``): their gradient, the last one, is checked too."""
    field = variant_field(known, 11, periodic, linear, physical)
    x, xd, xdd, u, udot = _variant_batch(field, 30, 11)
    if envelope:
        set_test_envelope(field, x, u)
    loss = _loss_for(field, lam2, 11)
    res = loss.value_and_grad(field, x, xd, xdd, u=u, udot=udot)
    value, params, order = _reference_loss(field, loss, x, xd, xdd, u, udot)
    ref = grad(value)(params)
    assert _rel(res.grads, [ref[i] for i in order]) <= 1e-10
    assert torch.allclose(res.loss, value(params), rtol=1e-12, atol=0)
    data = (x, xd, xdd) if u is None else (x, xd, xdd, u, udot)
    assert _rel(res.grads, _complex_step_grads(field, loss, *data)) <= 1e-11


def test_update_macs_of_the_pendulum_are_the_published_counts():
    """RESULTS.md, Table 3: 59,392 MACs per update with the second-order term gated off, 139,776 with it."""
    field = HybridField.from_seed(SinglePendulum().known_field("A"), 0)
    off, on = jet_update_macs(field, 0.0), jet_update_macs(field, 0.1)
    assert (off["matmul_macs"], on["matmul_macs"]) == (59_392, 139_776)
    assert sum(on["by_op"].values()) == on["matmul_macs"]
    torque = HybridField.from_seed(TorquePendulumModel(), 0)  # a field with an input: u and udot are drawn too
    assert jet_update_macs(torque, 0.1, batch=8)["matmul_macs"] > 0

"""HybridField: sizes, state derivatives against torch.func, input validation."""
import pytest
import torch
from torch.func import jacrev, jvp, vjp

from torch_ude import HybridField, SinglePendulum
from tests.torch_ude.helpers import PLANTS, random_batch, random_field


@pytest.mark.parametrize("plant,expected", [("single", 354), ("double", 420)])
def test_parameter_counts_match_the_paper(plant, expected):
    assert HybridField(PLANTS[plant]().known_field("A")).num_parameters() == expected


def _jacobian_ref(f, x):
    return torch.stack([jacrev(f)(x[i : i + 1])[0, :, 0, :] for i in range(x.shape[0])])


@pytest.mark.parametrize("plant", ["single", "double"])
@pytest.mark.parametrize("case", ["A", "B", "C"])
def test_jacobian_and_lie_derivative_match_jacrev(plant, case):
    field = random_field(plant, case, 4)
    x = random_batch(field.n_states, 9, 4)[0]
    jac = _jacobian_ref(field.evaluate, x)
    assert torch.allclose(field.jacobian(x), jac, rtol=1e-12, atol=1e-12)
    g_ref = torch.einsum("bij,bj->bi", jac, field.evaluate(x))
    assert torch.allclose(field.lie_derivative(x), g_ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("plant", ["single", "double"])
def test_jvp_and_vjp_match_torch_func(plant):
    field = random_field(plant, "C", 5)
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

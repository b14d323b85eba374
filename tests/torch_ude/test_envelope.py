"""The trust envelope: the fade, its derivatives, and the box from the channel ranges."""
import math

import pytest
import torch
from torch.func import jacrev

from torch_ude.envelope import DEFAULT_MARGIN, MIN_MARGIN, envelope_from_span, fade, fade_weight, outside
from torch_ude.input_map import InputMap

LOW, HIGH, MARGIN = torch.tensor([-1.0, 0.0, 2.0]), torch.tensor([1.0, 0.5, 2.0]), torch.tensor([0.5, 0.25, 1.0])


def _smooth(t):
    t = min(max(t, 0.0), 1.0)
    return 1.0 - (10 * t**3 - 15 * t**4 + 6 * t**5)


def test_fade_is_one_inside_zero_far_outside_and_the_product_of_the_columns():
    z = torch.tensor([[0.0, 0.2, 2.0], [1.25, 0.2, 2.0], [0.0, -0.1, 1.5], [3.0, 0.2, 2.0], [1.1, 0.6, 2.3]])
    w, _ = fade(z, LOW, HIGH, MARGIN)
    expect = []
    for row in z.tolist():
        value = 1.0
        for zj, lo, hi, m in zip(row, LOW.tolist(), HIGH.tolist(), MARGIN.tolist()):
            value *= _smooth(max(zj - hi, lo - zj, 0.0) / m)
        expect.append(value)
    assert torch.allclose(w[:, 0], torch.tensor(expect), atol=1e-15)
    assert w[0, 0] == 1.0 and w[3, 0] == 0.0
    assert outside(z, LOW, HIGH).tolist() == [False, True, True, True, True]


def test_fade_gradient_matches_jacrev_and_complex_step():
    gen = torch.Generator().manual_seed(0)
    z = torch.stack((-2.0 + 4.0 * torch.rand(40, generator=gen), -0.5 + 1.5 * torch.rand(40, generator=gen),
                     1.0 + 2.0 * torch.rand(40, generator=gen)), 1)
    _, dw = fade(z, LOW, HIGH, MARGIN)
    ref = torch.stack([jacrev(lambda zz: fade(zz.reshape(1, 3), LOW, HIGH, MARGIN)[0][0, 0])(z[i]) for i in range(40)])
    assert torch.allclose(dw, ref, atol=1e-13)
    h = 1e-30
    for j in range(3):
        zc = z.to(torch.complex128)
        zc[:, j] += 1j * h
        assert torch.allclose(fade(zc, LOW, HIGH, MARGIN)[0][:, 0].imag / h, dw[:, j], atol=1e-13)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex128])
def test_the_weight_alone_is_bit_for_bit_the_fade(dtype):
    """`fade_weight` (rollouts, scores) gives exactly `fade`'s w, inside, in the band and past it."""
    gen = torch.Generator().manual_seed(1)
    lo, width = LOW - 1.5 * MARGIN, HIGH - LOW + 3.0 * MARGIN  # inside, in the band and past it, per column
    z = (lo + width * torch.rand(500, 3, generator=gen)).to(dtype)
    if dtype.is_complex:
        z = z + 1e-30j
    w = fade_weight(z, LOW, HIGH, MARGIN)
    assert w.shape == (500, 1) and torch.equal(w, fade(z, LOW, HIGH, MARGIN)[0])
    assert 0 < int(((w.real > 0) & (w.real < 1)).sum()) < 500 and 0 < int((w.real == 0).sum()) < 500


def test_fade_is_twice_continuously_differentiable_at_the_edges():
    # the second derivative of s at t = 0 and t = 1 is zero, so w'' is continuous across both edges
    eps = 1e-6
    for edge in (1.0, 1.5):  # the box edge and the end of the band of column 0
        z = torch.tensor([[edge - eps, 0.2, 2.0], [edge, 0.2, 2.0], [edge + eps, 0.2, 2.0]])
        w, dw = fade(z, LOW, HIGH, MARGIN)
        assert float(dw[:, 0].abs().max()) < 1e-9
        assert float((w[0] - w[2]).abs()) < 1e-12


def test_the_box_of_an_angle_interval_holds_the_exact_sin_and_cos_ranges():
    imap = InputMap(2, 0, (0,))
    scale = torch.tensor([1.0, 2.0])
    low, high, margin = envelope_from_span(torch.tensor([-0.5, -4.0]), torch.tensor([2.0, 6.0]), imap, scale, None)
    # columns: qdot / 2, sin q, cos q
    assert torch.allclose(low, torch.tensor([-2.0, math.sin(-0.5), math.cos(2.0)]))
    assert torch.allclose(high, torch.tensor([3.0, 1.0, 1.0]))
    assert torch.allclose(margin, torch.clamp(DEFAULT_MARGIN * (high - low), min=MIN_MARGIN))
    full, *_ = envelope_from_span(torch.tensor([-10.0, 0.0]), torch.tensor([10.0, 1.0]), imap, scale, None)
    assert full[1:].tolist() == [-1.0, -1.0]


def test_inputs_enter_the_box_over_their_scale():
    imap = InputMap(2, 1)
    low, high, _ = envelope_from_span(torch.tensor([0.0, -1.0, -2.0]), torch.tensor([1.0, 1.0, 4.0]), imap,
                                      torch.tensor([0.5, 1.0]), torch.tensor([2.0]))
    assert low.tolist() == [0.0, -1.0, -1.0] and high.tolist() == [2.0, 1.0, 2.0]


def test_an_envelope_without_data_is_a_one_line_error():
    imap = InputMap(2, 0)
    inf = torch.full((2,), math.inf)
    with pytest.raises(ValueError, match="training saw no jet"):
        envelope_from_span(inf, -inf, imap, torch.ones(2), None)
    with pytest.raises(ValueError, match="low <= high"):
        envelope_from_span(torch.ones(2), torch.zeros(2), imap, torch.ones(2), None)
    with pytest.raises(ValueError, match="range of each of the 2 channels"):
        envelope_from_span(torch.ones(3), torch.ones(3), imap, torch.ones(2), None)
    with pytest.raises(ValueError, match="positive fraction"):
        envelope_from_span(torch.zeros(2), torch.ones(2), imap, torch.ones(2), None, fraction=0.0)

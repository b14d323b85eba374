"""QualityGate: running median, floor, history, disabled mode."""
import torch

from torch_ude.gate import QualityGate


def test_rejects_outliers_against_the_running_median():
    gate = QualityGate(2, factor=6.0, floor=0.0, history=11)
    base = torch.full((30, 2), 1.0)
    assert bool(gate.check(base, torch.zeros(30, 2)).all())
    misfit = torch.tensor([[1.0, 1.0], [5.9, 1.0], [6.1, 1.0], [1.0, 7.0]])
    assert gate.check(misfit, torch.zeros(4, 2)).tolist() == [True, True, False, False]


def test_floor_scales_with_the_window_rms():
    gate = QualityGate(1, factor=6.0, floor=0.02, history=5)
    gate.check(torch.full((5, 1), 0.1), torch.zeros(5, 1))
    # threshold 0.6 + 0.02 * rms
    assert gate.check(torch.tensor([[0.65]]), torch.tensor([[1.0]])).tolist() == [False]
    assert gate.check(torch.tensor([[0.65]]), torch.tensor([[3.0]])).tolist() == [True]


def test_median_follows_the_history_window_in_order():
    gate = QualityGate(1, factor=2.0, floor=0.0, history=3)
    # the first window sees an empty history (accepted); then medians of the preceding <= 3
    out = gate.check(torch.tensor([[1.0], [1.0], [1.0], [10.0], [10.0], [10.0], [10.0]]), torch.zeros(7, 1))
    assert out.tolist() == [True, True, True, False, False, True, True]


def test_disabled_gate_accepts_everything_but_tracks_history():
    gate = QualityGate(1, history=3, enabled=False)
    assert bool(gate.check(torch.tensor([[1.0], [100.0]]), torch.zeros(2, 1)).all())
    assert gate.history[-1, 0] == 100.0

"""Windows of Eq. (3): layout and the three data errors."""
import pytest
import torch

from mhe import make_windows


def _data(t=12):
    u = torch.arange(2 * t, dtype=torch.float64).reshape(t, 2)
    y = 100 + torch.arange(t, dtype=torch.float64)[:, None]
    return u, y


def test_windows_hold_u0_to_uN_minus_1_and_y1_to_yN():
    u, y = _data()
    w = make_windows(u, y, horizon=4, stride=3)
    assert w.u.shape == (3, 4, 2) and w.y.shape == (3, 4, 1) and w.horizon == 4
    assert torch.equal(w.start, torch.tensor([0, 3, 6]))
    assert torch.equal(w.u[1], u[3:7]) and torch.equal(w.y[1], y[4:8])
    assert len(w[torch.tensor([True, False, True])]) == 2


def test_nan_rows_are_a_clear_error():
    u, y = _data()
    y[5, 0] = float("nan")
    with pytest.raises(ValueError, match=r"outputs holds NaN or Inf in 1 rows \(first: \[5\]\)"):
        make_windows(u, y, horizon=4)


def test_mismatched_input_and_output_lengths_are_a_clear_error():
    u, y = _data()
    with pytest.raises(ValueError, match="inputs has 12 rows but outputs has 11"):
        make_windows(u, y[:-1], horizon=4)


def test_horizon_longer_than_the_data_is_a_clear_error():
    u, y = _data(6)
    with pytest.raises(ValueError, match="horizon N=6 needs N \\+ 1 = 7 samples, but the data hold only 6"):
        make_windows(u, y, horizon=6)

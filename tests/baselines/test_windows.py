"""Observations at the observation rate and shooting windows inside one segment."""
import numpy as np
import pytest
import torch

from baselines.windows import observe, recorded_observations, shooting_windows
from torch_ude import SinglePendulum, simulate
from torch_ude.recorded import RecordedLog


@pytest.fixture(scope="module")
def recording():
    return simulate(SinglePendulum(reexcite_interval=(1.0, 2.0)), 10.0, noise=0.01, seed=4)


@pytest.mark.parametrize("rate,stride", [(50.0, 20), (100.0, 10)])
def test_observations_are_every_nth_stream_sample(recording, rate, stride):
    obs = observe(recording, rate)
    assert obs.stride == stride and obs.h == pytest.approx(1.0 / rate)
    np.testing.assert_array_equal(obs.y, recording.y[::stride])
    np.testing.assert_array_equal(obs.segment, recording.segment[::stride])


def test_windows_lie_inside_one_segment_and_are_counted(recording):
    obs = observe(recording, 50.0)
    steps = 40
    w = shooting_windows(obs, steps, 30)
    spans = obs.segment[w.starts[:, None] + np.arange(steps + 1)]
    assert (spans == spans[:, :1]).all()
    positions = obs.y.shape[0] - steps
    assert w.candidates + w.straddling == positions
    # re-excitation every 1-2 s: each of the boundaries rules out up to K start positions
    boundaries = int((np.diff(obs.segment) != 0).sum())
    assert boundaries >= 4 and w.straddling <= boundaries * steps and w.straddling > 0
    assert len(np.unique(w.starts)) == 30
    np.testing.assert_array_equal(w.x0.numpy(), obs.y[w.starts])
    np.testing.assert_array_equal(w.targets[steps - 1].numpy(), obs.y[w.starts + steps])
    assert (w.steps, w.batch) == (steps, 30)


def test_bad_rates_sizes_and_nan_observations_are_clear_errors(recording):
    with pytest.raises(ValueError, match="must divide the stream rate"):
        observe(recording, 300.0)
    with pytest.raises(ValueError, match="positive number"):
        observe(recording, 0.0)
    obs = observe(recording, 50.0)
    with pytest.raises(ValueError, match="steps \\(K\\) must be a positive integer"):
        shooting_windows(obs, 0, 10)
    with pytest.raises(ValueError, match="n_windows must be a positive integer"):
        shooting_windows(obs, 5, 0)
    with pytest.raises(ValueError, match="holds only .* distinct positions"):
        shooting_windows(obs, 40, 10_000)
    with pytest.raises(ValueError, match="needs 601 observations"):
        shooting_windows(obs, 600, 1)
    kept = recording.y[4320, 1]
    recording.y[4321, 1] = recording.y[4320, 1] = np.nan  # the first is no observation at 50 Hz
    try:
        with pytest.raises(ValueError, match=r"NaN or Inf in 1 of 500 rows \(first at t = 4.32 s\)"):
            observe(recording, 50.0)
    finally:
        recording.y[4320:4322, 1] = kept


def test_recorded_logs_are_observed_per_segment_with_their_inputs():
    seg_a = np.arange(40, dtype=float).reshape(20, 2) @ np.array([[1.0, 0.0, 2.0], [0.0, 1.0, 0.0]])
    seg_b = -np.ones((10, 3))
    log = RecordedLog(fs=100.0, names=("q", "qd", "tau"), n_states=2, segments=[seg_a, seg_b], starts=[0.0, 5.0])
    obs = recorded_observations([log], 50.0)
    assert obs.stride == 2 and obs.y.shape == (15, 2) and obs.u.shape == (15, 1)
    assert np.array_equal(obs.segment, [0] * 10 + [1] * 5) and np.array_equal(obs.u[:10, 0], seg_a[::2, 2])
    windows = shooting_windows(obs, 3, 4)
    assert windows.inputs.shape == (4, 4, 1) and all(s + 3 < 10 or s >= 10 for s in windows.starts)
    assert torch.equal(windows.inputs[:, 0, 0], torch.as_tensor(obs.u[windows.starts[0]:windows.starts[0] + 4, 0]))
    with pytest.raises(ValueError, match="must divide the logs' rate"):
        recorded_observations([log], 30.0)

"""StreamEstimator: phase sampling, calibration hand-off, rejection of bad samples, state."""
import numpy as np
import pytest
import torch

from torch_ude import SinglePendulum, simulate
from torch_ude.stream import StreamEstimator, StreamSettings

FS = 1000.0


@pytest.fixture(scope="module")
def rec():
    return simulate(SinglePendulum(reexcite_interval=(30.0, 30.0)), 8.0, noise=0.0, seed=0)


def _settings(**kw):
    base = dict(calibration_s=1.0, m=10, capacity=512, gate_history=21)
    base.update(kw)
    return StreamSettings(**base)


def _feed(est, y, ticks=None, chunk=40, segment=None):
    for i in range(0, y.shape[0], chunk):
        est.push(y[i : i + chunk], None if ticks is None else ticks[i : i + chunk],
                 None if segment is None else segment[i : i + chunk])


def _target_error(est):
    data = est.buffer.data[: est.buffer.fill]
    f = SinglePendulum().true_field()(data[:, 0])
    return float((data[:, 1] - f).norm() / f.norm())


def test_full_rate_phase_sampling_and_clean_targets(rec):
    est = StreamEstimator(2, FS, _settings(capacity=10_000))
    _feed(est, torch.as_tensor(rec.y))
    c = est.counters
    # windows end at every tick divisible by s = 5 once 10 m = 100 samples of history exist
    assert c["windows"] == (8000 - 1000) // 5
    assert c["accepted"] == c["windows"] and c["misfit"] == c["boundary"] == c["nonfinite"] == 0
    assert _target_error(est) < 1e-5


def test_v1_decimated_windows_slide_by_m(rec):
    est = StreamEstimator(2, FS, _settings(stride=None, capacity=10_000))
    _feed(est, torch.as_tensor(rec.y))
    assert est.stride == 10 and est.counters["windows"] == 7000 // 10


def test_one_sample_at_a_time_equals_chunks(rec):
    y = torch.as_tensor(rec.y[:1600])
    a, b = StreamEstimator(2, FS, _settings()), StreamEstimator(2, FS, _settings())
    _feed(a, y, chunk=40)
    for i in range(y.shape[0]):
        b.push(y[i])
    assert a.counters == b.counters and torch.equal(a.buffer.data, b.buffer.data)


def test_nonfinite_samples_are_rejected_and_counted(rec):
    y = torch.as_tensor(rec.y).clone()
    y[3000, 0] = float("nan")
    y[5000, 1] = float("inf")
    est = StreamEstimator(2, FS, _settings(capacity=10_000))
    _feed(est, y)
    c = est.counters
    assert c["nonfinite_samples"] == 2
    # a bad sample at a tick divisible by 5 is a tap of the 11 windows ending 0, 10, ..., 100 ticks later
    assert c["nonfinite"] == 22
    assert torch.isfinite(est.buffer.data).all() and _target_error(est) < 1e-5


def test_gaps_and_segment_changes_start_new_windows(rec):
    keep = np.ones(8000, dtype=bool)
    keep[4000:4013] = False  # 13 dropped samples
    y, ticks = torch.as_tensor(rec.y[keep]), torch.as_tensor(np.flatnonzero(keep))
    est = StreamEstimator(2, FS, _settings(capacity=10_000))
    _feed(est, y, ticks)
    assert est.counters["gaps"] == 1 and est.counters["boundary"] > 0
    assert _target_error(est) < 1e-5  # no window straddles the gap


def test_spikes_are_gated(rec):
    y = torch.as_tensor(rec.y).clone()
    rng = np.random.default_rng(0)
    hits = rng.choice(np.arange(1200, 8000), size=20, replace=False)
    y[hits, 1] += 0.5
    gated = StreamEstimator(2, FS, _settings(capacity=10_000))
    _feed(gated, y)
    open_ = StreamEstimator(2, FS, _settings(capacity=10_000, quality_gate=False))
    _feed(open_, y)
    assert gated.counters["misfit"] > 0 and open_.counters["misfit"] == 0
    assert _target_error(gated) < 1e-3 < _target_error(open_)


def test_out_of_order_ticks_are_dropped(rec):
    est = StreamEstimator(2, FS, _settings())
    y = torch.as_tensor(rec.y[:100])
    est.push(y[:50], torch.arange(50))
    est.push(y[50:60], torch.tensor([49, 50, 51, 51, 52, 53, 54, 55, 56, 57]))
    assert est.counters["out_of_order"] == 2 and est.last_tick == 57


def test_memory_is_fixed_after_calibration(rec):
    est = StreamEstimator(2, FS, _settings())
    _feed(est, torch.as_tensor(rec.y[:3000]))
    ptr, hist = est.buffer.data.data_ptr(), est._hist_y.shape
    _feed(est, torch.as_tensor(rec.y[3000:]))
    assert est.buffer.data.data_ptr() == ptr and est._hist_y.shape == hist == (100, 2)


def test_state_dict_round_trip(rec):
    y = torch.as_tensor(rec.y)
    a = StreamEstimator(2, FS, _settings(capacity=300))
    _feed(a, y[:4000])
    b = StreamEstimator.from_state_dict(a.state_dict())
    _feed(a, y[4000:])
    _feed(b, y[4000:])
    assert a.counters == b.counters and torch.equal(a.buffer.data, b.buffer.data)


def test_bad_chunks_and_settings_are_errors():
    est = StreamEstimator(2, FS, _settings())
    with pytest.raises(ValueError, match=r"shape \(k, 2\)"):
        est.push(torch.zeros(5, 3))
    with pytest.raises(TypeError, match="floating-point"):
        est.push(torch.zeros(5, 2, dtype=torch.int64))
    with pytest.raises(ValueError, match="ticks must be 5 integers"):
        est.push(torch.zeros(5, 2), torch.zeros(5))
    with pytest.raises(ValueError, match="m must be an integer"):
        StreamSettings(m=0).validate()
    with pytest.raises(ValueError, match="capacity"):
        StreamSettings(capacity=0).validate()
    with pytest.raises(ValueError, match="fs"):
        StreamEstimator(2, 0.0)

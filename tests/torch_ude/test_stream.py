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
    """Small settings with the paper's point taps (the mechanics below are counted on them; box-averaged taps,
    the default, have their own tests)."""
    base = dict(calibration_s=1.0, m=10, capacity=512, gate_history=21, tap_average=False)
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


def _drop(rng, n, rate):
    keep = rng.random(n) >= rate
    keep[:1] = True
    return keep


def test_short_gaps_are_bridged_by_linear_interpolation():
    est = StreamEstimator(1, FS, _settings(calibration_s=0.2, m=2, max_bridge=3))
    y = torch.tensor([[0.0], [1.0], [5.0], [6.0], [float("nan")], [20.0]])
    est.push(y, torch.tensor([0, 1, 5, 6, 8, 20]))
    c = est.counters
    # 1 -> 5 misses ticks 2, 3, 4 (bridged); 6 -> 8 misses 7 (bridged with NaN); 8 -> 20 is a long gap
    assert c["gaps"] == 3 and c["long_gaps"] == 1 and c["bridged"] == 4
    got = est._cal_y[: est._cal_fill, 0]
    expect = torch.tensor([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, float("nan"), float("nan"), 20.0])
    assert torch.equal(torch.isnan(got), torch.isnan(expect))
    assert torch.allclose(got[~torch.isnan(got)], expect[~torch.isnan(expect)])
    assert est._cal_bridged[: est._cal_fill].tolist() == [False, False, True, True, True, False, False, True,
                                                          False, False]
    assert est._cal_seg[: est._cal_fill].tolist() == [0] * 9 + [1]


@pytest.mark.parametrize("rate", [0.01, 0.05])
def test_independent_drops_cost_almost_no_windows(rec, rate):
    keep = _drop(np.random.default_rng(1), 8000, rate)
    y, ticks = torch.as_tensor(rec.y[keep]), torch.as_tensor(np.flatnonzero(keep))
    est = StreamEstimator(2, FS, _settings(capacity=10_000))
    _feed(est, y, ticks)
    c = est.counters
    assert c["gaps"] > 0 and c["long_gaps"] == 0 and c["bridged"] == 8000 - int(keep.sum())
    # every window ending at a tick divisible by 5 is formed and accepted, as on the clean stream
    assert c["windows"] == (8000 - 1000) // 5 and c["accepted"] == c["windows"]
    assert _target_error(est) < 2e-5
    # without bridging (the old behaviour) most windows straddle a gap and are lost, and at
    # 5 % drops no segment of the calibration record is long enough for one window
    old = StreamEstimator(2, FS, _settings(capacity=10_000, max_bridge=0))
    if rate == 0.05:
        with pytest.raises(ValueError, match="no complete SG window"):
            _feed(old, y, ticks)
    else:
        _feed(old, y, ticks)
        assert old.counters["accepted"] < 0.5 * c["accepted"]


def test_long_dropouts_start_new_segments(rec):
    keep = np.ones(8000, dtype=bool)
    keep[4000:4200] = False  # 200 ms dropout
    keep[6000:6006] = False  # 6 missing ticks: one more than max_bridge = 5
    y, ticks = torch.as_tensor(rec.y[keep]), torch.as_tensor(np.flatnonzero(keep))
    est = StreamEstimator(2, FS, _settings(capacity=10_000))
    _feed(est, y, ticks)
    c = est.counters
    assert c["gaps"] == c["long_gaps"] == 2 and c["bridged"] == 0 and c["boundary"] > 0
    assert _target_error(est) < 1e-5  # no window straddles a long gap


def test_drops_one_sample_at_a_time_equal_chunks(rec):
    keep = _drop(np.random.default_rng(2), 3000, 0.03)
    y, ticks = torch.as_tensor(rec.y[:3000][keep]), torch.as_tensor(np.flatnonzero(keep))
    a, b = StreamEstimator(2, FS, _settings()), StreamEstimator(2, FS, _settings())
    _feed(a, y, ticks, chunk=37)
    for i in range(y.shape[0]):
        b.push(y[i], ticks[i : i + 1])
    assert a.counters == b.counters and torch.equal(a.buffer.data, b.buffer.data)


def test_reject_rate_counts_every_rejection(rec):
    y = torch.as_tensor(rec.y).clone()
    y[2000::7, 0] = float("nan")  # a NaN every 7 ticks: most windows tap one
    est = StreamEstimator(2, FS, _settings(capacity=10_000))
    _feed(est, y)
    c = est.counters
    assert c["nonfinite"] > 0.4 * c["windows"]
    assert est.reject_rate() == pytest.approx((c["windows"] - c["accepted"]) / c["windows"])
    assert est.reject_rate() > 0.4 and est.misfit_rate() < 0.01


def test_state_dict_round_trip_inside_a_bridged_gap(rec):
    keep = _drop(np.random.default_rng(3), 8000, 0.02)
    y, ticks = torch.as_tensor(rec.y[keep]), torch.as_tensor(np.flatnonzero(keep))
    a = StreamEstimator(2, FS, _settings(capacity=300))
    _feed(a, y[:4000], ticks[:4000])
    b = StreamEstimator.from_state_dict(a.state_dict())
    _feed(a, y[4000:], ticks[4000:])
    _feed(b, y[4000:], ticks[4000:])
    assert a.counters == b.counters and torch.equal(a.buffer.data, b.buffer.data)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(half_width=2, order=4), ValueError, "2M\\+1 >= P\\+2.*half_width to at least 3"),
    (dict(order=1), ValueError, "stream.order must be >= 2"),
    (dict(gate_history=0), ValueError, "stream.gate_history must be >= 1"),
    (dict(dt_scale=-1.0), ValueError, "stream.dt_scale must be a finite number > 0"),
    (dict(gate_factor=0.0), ValueError, "stream.gate_factor"),
    (dict(lambda2=float("nan")), ValueError, "stream.lambda2"),
    (dict(max_bridge=-1), ValueError, "stream.max_bridge must be >= 0"),
    (dict(outlier_threshold=0.0), ValueError, "stream.outlier_threshold"),
    (dict(capacity=2.5), TypeError, "stream.capacity must be an integer"),
    (dict(stride=0), ValueError, "stream.stride must be >= 1"),
    (dict(buffer="ring"), ValueError, "reservoir"),
    (dict(tap_average="yes"), TypeError, "stream.tap_average must be true or false; got 'yes'"),
    (dict(calibration_replay=1), TypeError, "stream.calibration_replay must be true or false; got 1"),
])
def test_every_setting_is_validated_before_any_sample(kwargs, error, match):
    with pytest.raises(error, match=match):
        StreamEstimator(2, FS, StreamSettings(**kwargs))


def test_a_calibration_phase_shorter_than_one_window_is_refused():
    with pytest.raises(ValueError, match="holds 300 samples.*lengthen stream.calibration_s to at least 0.401 s"):
        StreamEstimator(2, FS, StreamSettings(calibration_s=0.3))
    StreamEstimator(2, FS, StreamSettings(calibration_s=0.3, m=20))  # a fixed m = 20 needs 201 samples


def test_inputs_ride_as_extra_channels_and_do_not_set_m_or_lambda2():
    t = torch.arange(8000, dtype=torch.float64) / FS
    gen = torch.Generator().manual_seed(4)
    states = torch.stack((torch.sin(2.0 * t), 2.0 * torch.cos(2.0 * t)), dim=1) + 0.002 * torch.randn(8000, 2, generator=gen)
    u = (0.5 * torch.sin(9.0 * t)).unsqueeze(1) + 0.01 * torch.randn(8000, 1, generator=gen)  # faster and noisier
    settings = dict(calibration_s=3.0, capacity=256, m=None)
    alone = StreamEstimator(2, FS, StreamSettings(**settings))
    both = StreamEstimator(2, FS, StreamSettings(**settings), n_inputs=1)
    joint = StreamEstimator(3, FS, StreamSettings(**settings))  # the input taken for a state
    _feed(alone, states)
    _feed(both, torch.cat((states, u), dim=1))
    _feed(joint, torch.cat((states, u), dim=1))
    a, b = alone.calibration, both.calibration
    assert (b.m, b.lambda2, b.sigma_rel, b.omega_c) == (a.m, a.lambda2, a.sigma_rel, a.omega_c)
    assert joint.calibration.m < a.m  # the fast input would have shortened the window
    assert b.x_rms.shape == (3,) and torch.equal(b.x_rms[:2], a.x_rms)
    # jets of the input: its value and rate at the window centres
    jets = both.buffer.data[: both.buffer.fill]
    assert jets.shape[2] == 3
    assert float(jets[:, 0, 2].abs().max()) < 0.6 and float(jets[:, 1, 2].abs().max()) < 1.2 * 4.5
    assert float(jets[:, 1, 2].abs().max()) > 0.8 * 4.5  # udot = 4.5 cos(9 t) is estimated, not smoothed away
    state = both.state_dict()
    again = StreamEstimator.from_state_dict(state)
    assert again.n_inputs == 1 and again.n == 3


def test_box_averaged_taps_use_every_sample_and_keep_clean_targets(rec):
    est = StreamEstimator(2, FS, _settings(capacity=10_000, tap_average=True))
    _feed(est, torch.as_tensor(rec.y))
    c = est.counters
    # a window now also reaches back over the m - 1 older samples of its first bin
    assert est._hist_y.shape == (10 * 10 + 9, 2)
    assert c["windows"] == (8000 - 1000) // 5 and c["accepted"] == c["windows"]
    assert _target_error(est) < 1e-5


def test_box_averaged_taps_cut_the_target_noise(rec):
    noisy = simulate(SinglePendulum(reexcite_interval=(30.0, 30.0)), 8.0, noise=0.02, seed=0)
    errors = {}
    for average in (False, True):
        est = StreamEstimator(2, FS, _settings(m=30, capacity=10_000, tap_average=average))
        _feed(est, torch.as_tensor(noisy.y))
        errors[average] = _target_error(est)
    assert errors[True] < 0.3 * errors[False]  # noise std / sqrt(30), plus the unchanged bias


def test_box_averaged_taps_chunks_state_and_segments(rec):
    y = torch.as_tensor(rec.y[:2400])
    settings = _settings(tap_average=True, capacity=300)
    a, b = StreamEstimator(2, FS, settings), StreamEstimator(2, FS, settings)
    _feed(a, y, chunk=40)
    for i in range(1600):
        b.push(y[i])
    c = StreamEstimator.from_state_dict(b.state_dict())
    _feed(b, y[1600:], chunk=7)
    _feed(c, y[1600:], chunk=13)
    assert a.counters == b.counters == c.counters
    assert torch.equal(a.buffer.data, b.buffer.data) and torch.equal(b.buffer.data, c.buffer.data)
    # a segment change 5 samples after a window's end tap: its first bin straddles it only with averaging
    segment = torch.zeros(2400, dtype=torch.int64)
    segment[1300:] = 1
    point, box = StreamEstimator(2, FS, _settings()), StreamEstimator(2, FS, _settings(tap_average=True))
    _feed(point, y, segment=segment)
    _feed(box, y, segment=segment)
    assert box.counters["boundary"] == point.counters["boundary"] + 2  # windows ending at ticks 1400, 1405


@pytest.mark.parametrize("chunk", [40, 1, 777])
def test_calibration_replay_trains_on_the_calibration_record(rec, chunk):
    """With calibration_replay the record's windows join the buffer: the same windows and jets as a
    stream whose calibration read a copy of the record first (a second segment), and no sample lost."""
    y = torch.as_tensor(rec.y[:4000])
    replay = StreamEstimator(2, FS, _settings(capacity=10_000, calibration_replay=True))
    _feed(replay, y, chunk=chunk)
    plain = StreamEstimator(2, FS, _settings(capacity=10_000))
    _feed(plain, y)
    # every tick divisible by s = 5 ends a window once 10 m = 100 samples exist: from the record's start
    assert replay.counters["windows"] == (4000 - 100) // 5
    assert plain.counters["windows"] == (4000 - 1000) // 5
    assert replay.counters["accepted"] == replay.counters["windows"] and _target_error(replay) < 1e-5
    # the stream after the record gives the plain estimator's jets, in order, after the record's own
    n_record = replay.counters["windows"] - plain.counters["windows"]
    assert torch.equal(replay.buffer.data[n_record:replay.buffer.fill], plain.buffer.data[:plain.buffer.fill])
    assert replay.calibration.m == plain.calibration.m


def test_calibration_replay_survives_a_checkpoint_inside_the_calibration(rec):
    y = torch.as_tensor(rec.y[:3000])
    a = StreamEstimator(2, FS, _settings(calibration_replay=True))
    _feed(a, y[:600])  # (calibration_s = 1 s: still calibrating)
    b = StreamEstimator.from_state_dict(a.state_dict())
    _feed(a, y[600:])
    _feed(b, y[600:])
    assert a.calibration is not None and a.counters == b.counters and torch.equal(a.buffer.data, b.buffer.data)

"""Position-only sensors: the derived velocity, its noise and bias, trimming, and bad settings."""
import math

import numpy as np
import pytest
import torch

from torch_ude.position_only import VelocityFromPosition, noise_gains, velocity_name, with_velocities
from torch_ude.recorded import LogReport, RecordedLog
from torch_ude.savgol import SavitzkyGolay
from tests.torch_ude.helpers import forced_axis_log


def _log(*segments: np.ndarray, fs: float = 1000.0, inputs: int = 1) -> RecordedLog:
    """A log of one position channel (and ``inputs`` input channels) with the given segments."""
    names = ("q", *(f"u{j}" for j in range(inputs)))
    samples = sum(s.shape[0] for s in segments)
    report = LogReport(file="synthetic", rows=samples, segments=len(segments), samples=samples)
    return RecordedLog(fs=fs, names=names, n_states=1, segments=list(segments),
                       starts=[10.0 * j for j in range(len(segments))], report=report)


@pytest.mark.parametrize("half_width", [1, 2, 5, 12, 25])
def test_the_velocity_gain_is_the_closed_form(half_width):
    # ||D1||^2 = 3 / (M (M + 1) (2M + 1)) for P = 1 and 2 (the module doc)
    closed = math.sqrt(3.0 / (half_width * (half_width + 1) * (2 * half_width + 1)))
    for order in (1, 2):
        assert noise_gains(VelocityFromPosition(half_width, order))["velocity"] == pytest.approx(closed, rel=1e-12)
    assert noise_gains(VelocityFromPosition(1, 2))["velocity"] == pytest.approx(math.sqrt(0.5), rel=1e-12)


def test_order_four_costs_two_and_a_half_times_the_noise_at_m_25():
    ratio = noise_gains(VelocityFromPosition(25, 4))["velocity"] / noise_gains(VelocityFromPosition(25, 2))["velocity"]
    assert ratio == pytest.approx(2.50, abs=0.005)


@pytest.mark.parametrize("half_width, order, spacing", [(5, 2, 1), (5, 2, 3), (3, 4, 2)])
def test_noise_gains_match_a_monte_carlo_estimate(half_width, order, spacing):
    """White position noise through the velocity window and then the stream's SG window (point taps)."""
    settings = VelocityFromPosition(half_width, order)
    fs, sigma_q = 1000.0, 2e-4
    rng = np.random.default_rng(0)
    noise = sigma_q * rng.standard_normal(200_000)
    log = with_velocities(_log(np.stack((noise, np.zeros_like(noise)), axis=1), fs=fs), settings)
    v = log.segments[0][:, 1]
    gains = noise_gains(settings, stream_half_width=5, stream_order=4, spacing=spacing)
    assert v.std() == pytest.approx(sigma_q * fs * gains["velocity"], rel=0.02)
    # the stream's jets of the velocity channel (tap spacing m, derivatives in 1/s and 1/s^2)
    sg = SavitzkyGolay(5, 4)
    windows = sg.windows(torch.as_tensor(v).unsqueeze(1), spacing)
    _, acc, jerk = sg.estimate(windows, spacing / fs)
    assert float(acc.std()) == pytest.approx(sigma_q * fs * gains["acceleration"] / (spacing / fs), rel=0.03)
    assert float(jerk.std()) == pytest.approx(sigma_q * fs * gains["jerk"] / (spacing / fs) ** 2, rel=0.03)


@pytest.mark.parametrize("spacing, read", [(1, 0.46), (3, 0.94)])
def test_the_streams_white_noise_estimate_misreads_the_derived_velocity(spacing, read):
    """The module doc's numbers: M = 5, stream window (5, 4), the estimate over the true sigma_v."""
    fs, sigma_q, settings = 1000.0, 2e-4, VelocityFromPosition(5, 2)
    noise = sigma_q * np.random.default_rng(0).standard_normal(200_000)
    v = with_velocities(_log(np.stack((noise, np.zeros_like(noise)), axis=1), fs=fs), settings).segments[0][:, 1]
    sg = SavitzkyGolay(5, 4)
    windows = sg.windows(torch.as_tensor(v).unsqueeze(1), spacing)
    estimate = float(sg.noise_variance(sg.centre_residual(windows)).sqrt())
    assert estimate / (sigma_q * fs * noise_gains(settings)["velocity"]) == pytest.approx(read, abs=0.02)


@pytest.mark.parametrize("half_width", [2, 5, 25])
def test_the_bias_on_a_cubic_is_the_stated_term_and_order_four_removes_it(half_width):
    fs = 1000.0
    t = np.arange(400) / fs
    q = 3.0 * t**3 - t**2 + 0.5 * t  # qdddot = 18
    exact = 9.0 * t**2 - 2.0 * t + 0.5
    for order, bias in ((2, 18.0 * (3 * half_width**2 + 3 * half_width - 1) / (30 * fs**2)), (4, 0.0)):
        log = with_velocities(_log(np.stack((q, np.zeros_like(q)), axis=1), fs=fs),
                              VelocityFromPosition(half_width, order))
        error = log.segments[0][:, 1] - exact[half_width:-half_width]
        assert np.allclose(error, bias, rtol=1e-7, atol=1e-10)


def test_the_bias_on_a_sine_follows_the_leading_term():
    fs, half_width, omega = 1000.0, 25, 2 * np.pi * 1.5
    t = np.arange(3000) / fs
    log = with_velocities(_log(np.stack((np.sin(omega * t), np.zeros_like(t)), axis=1), fs=fs),
                          VelocityFromPosition(half_width, 2))
    core = t[half_width:-half_width]
    error = log.segments[0][:, 1] - omega * np.cos(omega * core)
    leading = -omega**3 * np.cos(omega * core) * (3 * half_width**2 + 3 * half_width - 1) / (30 * fs**2)
    # the next term is O((omega M / fs)^2) = 5 % of it here
    assert np.max(np.abs(error - leading)) < 0.06 * np.max(np.abs(leading))
    assert np.max(np.abs(error)) > 0.5 * np.max(np.abs(leading))


def test_segments_are_trimmed_and_short_ones_dropped():
    m = 3
    a = np.stack((np.arange(20.0), np.full(20, 7.0)), axis=1)
    short = np.stack((np.arange(2 * m + 1.0), np.zeros(2 * m + 1)), axis=1)   # one window fits, none to spare
    b = np.stack((np.arange(2 * m + 2.0) ** 2, np.ones(2 * m + 2)), axis=1)   # the shortest that is kept
    out = with_velocities(_log(a, short, b), VelocityFromPosition(m, 2))
    assert out.names == ("q", velocity_name("q"), "u0") == ("q", "q_dot", "u0") and out.n_states == 2
    assert [s.shape for s in out.segments] == [(20 - 2 * m, 3), (2, 3)]
    assert out.starts == pytest.approx([0.0 + m / 1000.0, 20.0 + m / 1000.0])
    assert np.allclose(out.segments[0][:, 0], np.arange(m, 20 - m)) and np.allclose(out.segments[0][:, 2], 7.0)
    assert np.allclose(out.segments[0][:, 1], 1000.0)  # a ramp of 1 per sample at 1 kHz
    assert out.report.trimmed == 2 * m + (2 * m + 1) + 2 * m
    assert out.report.segments == 2 and out.report.samples == 20 - 2 * m + 2
    assert out.report.rows == 20 + 2 * m + 1 + 2 * m + 2  # what the file held is unchanged


def test_a_log_with_no_long_enough_segment_is_an_error():
    with pytest.raises(ValueError, match=r"synthetic: no segment holds the 2M\+2 = 12 samples .* lower half_width"):
        with_velocities(_log(np.zeros((11, 2))), VelocityFromPosition(5, 2))


@pytest.mark.parametrize("kwargs, error, match", [
    ({"half_width": 0}, ValueError, r"half_width must be >= 1; got 0"),
    ({"order": 0}, ValueError, r"order must be >= 1; got 0"),
    ({"half_width": 2.0}, TypeError, r"half_width must be an integer; got 2.0"),
    ({"order": True}, TypeError, r"order must be an integer; got True"),
    ({"half_width": 1, "order": 3}, ValueError, r"a window of 2M\+1 = 3 samples cannot fit order 3; raise "
                                                r"half_width to at least 2"),
])
def test_bad_settings_are_clear_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        VelocityFromPosition(**kwargs).validate()
    with pytest.raises(error, match=match):
        noise_gains(VelocityFromPosition(**kwargs))


def test_the_derived_state_of_a_simulated_axis_is_the_truth_within_the_stated_noise_and_bias():
    """A linear axis with friction (truth known) measured by position only: the derived velocity's
    error is the closed-form noise plus the leading bias term, and no more."""
    fs, sigma_q, settings = 1000.0, 1e-5, VelocityFromPosition(5, 2)
    sim = forced_axis_log(duration=6.0, fs=fs, noise=sigma_q, seed=0)
    log = with_velocities(_log(np.stack((sim["position"], sim["force"]), axis=1), fs=fs), settings)
    m = settings.half_width
    truth_q, truth_v, truth_jerk = (sim[k][m:-m] for k in ("true_position", "true_velocity", "true_jerk"))
    q, v = log.segments[0][:, 0], log.segments[0][:, 1]
    assert np.allclose(q, truth_q, atol=5 * sigma_q)  # the positions pass through untouched
    bias = truth_jerk * (3 * m * m + 3 * m - 1) / (30 * fs**2)
    noise = v - truth_v - bias
    predicted = sigma_q * fs * noise_gains(settings)["velocity"]
    assert noise.std() == pytest.approx(predicted, rel=0.1)
    assert abs(noise.mean()) < 0.1 * predicted
    assert np.sqrt(np.mean((v - truth_v) ** 2)) < 0.05 * np.sqrt(np.mean(truth_v**2))


def test_a_stream_too_short_after_trimming_names_the_settings_of_the_recorded_log_module(tmp_path):
    """Issue 36, item 4: the error named ``data.duration``, which the recorded-log module does not have."""
    import yaml

    from torch_ude.cli import main
    from tests.torch_ude.helpers import write_csv

    log = forced_axis_log(duration=12.0, fs=1000.0, noise=1e-5, seed=0)
    write_csv(tmp_path / "axis.csv", {k: log[k] for k in ("time", "position", "force")})
    config = {"trainer": {"max_steps": 10, "logger": False, "enable_progress_bar": False},
              "model": {"class_path": "torch_ude.training.JetMatchingModule"},
              "data": {"class_path": "torch_ude.training.RecordedDataModule",
                       "init_args": {"known": {"class_path": "torch_ude.systems.LinearAxisModel"},
                                     "files": [str(tmp_path / "axis.csv")], "fs": 1000.0, "time": "time",
                                     "states": ["position"], "inputs": ["force"],
                                     "velocity_from_position": {"half_width": 5500, "order": 2}}}}
    (tmp_path / "axis.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(ValueError) as err:
        main(["fit", "--config", str(tmp_path / "axis.yaml"), "--trainer.default_root_dir", str(tmp_path / "run")])
    assert str(err.value) == (
        "model.stream.calibration_s = 3 s is not shorter than the stream (the training logs data.files hold 1 s at "
        "data.fs = 1000 Hz after velocity_from_position trimmed 11000 samples at segment ends), so nothing would be "
        "left to train on; add training logs to data.files, lower data.velocity_from_position.half_width or shorten "
        "model.stream.calibration_s.")

"""A run that learned from a stream it could not trust ends "degraded" with a one-line warning and its
quality indicators in metrics.json (issue 36, item 5); healthy runs stay "finished"."""
import json
import math

import pytest
import torch

from torch_ude.calibration import Calibration
from torch_ude.cli import main
from torch_ude.stream import StreamSettings
from torch_ude.training.quality import MAX_MISFIT_RATIO, MAX_REJECT_RATE, MAX_WINDOW_PHASE, stream_quality

RUN = ["fit", "--config", "configs/pendulum_case_a.yaml", "--data.duration", "30", "--trainer.max_steps", "2000",
       "--trainer.enable_progress_bar", "false"]
FAULTS = {
    "spikes": '{"spike_rate": 0.2, "spike_scale": 100, "seed": 3}',  # 20 % of the samples at 100 sigma
    "mixed": '{"nan_rate": 0.02, "drop_rate": 0.05, "spike_rate": 0.05, "spike_scale": 100, "dropout_rate": 0.001, '
             '"dropout_length": 50, "seed": 3}',
}


def _run(tmp_path, faults=None):
    main([*RUN, "--trainer.default_root_dir", str(tmp_path), *(["--data.faults", faults] if faults else [])])
    return json.loads((tmp_path / "metrics.json").read_text())


def test_a_clean_run_is_finished_and_records_its_indicators(tmp_path):
    metrics = _run(tmp_path)
    quality = metrics["quality"]
    assert metrics["status"] == "finished" and quality["degraded"] == []
    assert quality["reject_rate"] < 0.2 and quality["window_phase"] < 2.0 and max(quality["misfit_ratio"]) < 1.5
    assert quality["calibration_retries"] is None  # (the C engine's counter)


@pytest.mark.parametrize("name, reason", [
    ("spikes", r"the typical window is \d+(\.\d+)? times further off its polynomial than the measured noise explains"),
    ("mixed", r"one window spans \d+(\.\d+)? rad of the calibrated motion \(more than pi: m = 1 is too long"),
])
def test_a_run_on_garbage_ends_degraded_with_a_warning(tmp_path, name, reason):
    with pytest.warns(UserWarning, match=rf"^degraded run: .*{reason}.*check the sensor data \(metrics.json: status "
                                         r"\"degraded\", quality\)\."):
        metrics = _run(tmp_path, FAULTS[name])
    # (the held-back check may reject the residual of the spiked run too: then it exports the physics alone)
    assert metrics["status"] in ("degraded", "residual rejected") and metrics["quality"]["degraded"]
    if name == "mixed":
        assert metrics["status"] == "degraded" and metrics["m"] == 1 and metrics["quality"]["reject_rate"] > 0.5


def _calibration(m=35, omega_c=3.3, sigma=0.01):
    one = torch.ones(2, dtype=torch.float64)
    return Calibration(x_rms=one, s1=one, s2=one, sigma=sigma * one, sigma_rel=sigma, omega_c=omega_c, m=m,
                       dt_eff=m / 1000.0, snr2=1.0, lambda2=0.0)


def _counters(windows=1000, accepted=900, **more):
    return {"windows": windows, "accepted": accepted, **more}


def test_each_indicator_trips_past_its_threshold_only():
    settings = StreamSettings(tap_average=False)  # point taps; box-averaged ones below
    noise = 0.01 * math.sqrt(5.348120627447122)  # median misfit of white noise: sigma sqrt(median chi2_6)
    clean = torch.full((101, 2), noise, dtype=torch.float64)
    assert stream_quality(_calibration(), _counters(), settings, 2, clean)["degraded"] == []
    q = stream_quality(_calibration(), _counters(), settings, 2, clean)
    assert q["misfit_ratio"] == pytest.approx([1.0, 1.0], rel=1e-3) and q["window_phase"] == pytest.approx(1.155)
    # a box of m = 35 samples per tap: the taps' noise is sigma / sqrt(m)
    box = stream_quality(_calibration(), _counters(), StreamSettings(tap_average=True), 2, clean / math.sqrt(35))
    assert box["misfit_ratio"] == pytest.approx([1.0, 1.0], rel=1e-3) and box["degraded"] == []
    # a velocity derived from the position: its correlated noise is not divided by sqrt(m) (a white-noise
    # reading of its misfit would trip the indicator at ratio sqrt(35) = 5.9)
    velocity = clean / math.sqrt(35)
    velocity[:, 1] = noise
    derived = stream_quality(_calibration(), _counters(), StreamSettings(tap_average=True), 2, velocity, derived=(1,))
    assert derived["misfit_ratio"] == pytest.approx([1.0, 1.0], rel=1e-3) and derived["degraded"] == []
    assert stream_quality(_calibration(), _counters(), StreamSettings(tap_average=True), 2, velocity)["degraded"]
    rejected = _counters(accepted=int(1000 * (1 - MAX_REJECT_RATE)) - 1)
    assert len(stream_quality(_calibration(), rejected, settings, 2, clean)["degraded"]) == 1
    fast = _calibration(m=1, omega_c=1.01 * MAX_WINDOW_PHASE * 1000 / 10)
    assert len(stream_quality(fast, _counters(), settings, 2, clean)["degraded"]) == 1
    spiky = clean.clone()
    spiky[:, 1] *= 1.01 * MAX_MISFIT_RATIO
    assert len(stream_quality(_calibration(), _counters(), settings, 2, spiky)["degraded"]) == 1
    inputs = torch.cat((clean, 100 * clean[:, :1]), dim=1)  # a recorded input with steps: not a state
    assert stream_quality(_calibration(), _counters(), settings, 2, inputs)["degraded"] == []
    retried = stream_quality(_calibration(), _counters(calibration_failures=2), settings, 2, None)
    assert retried["misfit_ratio"] is None and retried["degraded"] == [
        "the calibration succeeded only after 2 failed attempt(s)"]

"""Training files at any rate (issue 35, item 5): a 500 Hz and a jittery 616 Hz log in one training set are
resampled onto the nominal grid, the non-multiple one with an anti-aliasing filter; interpolated samples
beyond a share are a warning and a count."""
import json

import numpy as np
import pytest
import yaml

from torch_ude.cli import main
from torch_ude.recorded import FILLED_SHARE, read_log
from torch_ude.systems.controlled import TorquePendulumModel
from torch_ude.training.recorded import RecordedDataModule
from tests.torch_ude.helpers import forced_pendulum_log, write_csv

COLS = dict(time="time", states=["position", "velocity"], inputs=["torque"])


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mixed")
    write_csv(folder / "a500.csv", forced_pendulum_log(duration=10.0, fs=500.0, noise=2e-3, jitter=0.05, seed=0))
    write_csv(folder / "b616.csv", forced_pendulum_log(duration=10.0, fs=616.0, noise=2e-3, jitter=0.3, seed=1))
    write_csv(folder / "val.csv", forced_pendulum_log(duration=6.0, fs=500.0, noise=2e-3, jitter=0.05, seed=2))
    return [str(folder / n) for n in ("a500.csv", "b616.csv", "val.csv")]


def test_a_500_and_a_jittery_616_hz_log_train_together_on_the_100_hz_grid(mixed, tmp_path):
    dm = RecordedDataModule(TorquePendulumModel(), files=mixed[:2], val_files=mixed[2:], fs=100.0, **COLS)
    a, b = (log.report for log in dm.train_logs)
    assert (a.decimation, a.antialiased) == (5, False)  # a multiple: read as before, no filter
    assert (b.decimation, b.antialiased) == (7, True)  # 616 Hz: onto a 700 Hz grid, filtered, decimated by 7
    assert abs(dm.train_logs[1].samples - 1000) <= 1 and a.filled == 0 and b.filled == 0
    with pytest.raises(ValueError, match=r"not the nominal rate data.fs = 100 Hz .*\(data.antialias: other_rates\)"):
        RecordedDataModule(TorquePendulumModel(), files=mixed[:2], fs=100.0, antialias=False, **COLS)
    with pytest.raises(ValueError, match="data.antialias must be other_rates"):
        RecordedDataModule(TorquePendulumModel(), files=mixed[:1], fs=100.0, antialias="yes", **COLS)
    config = {"seed_everything": 0,
              "trainer": {"max_steps": 100, "accelerator": "cpu", "devices": 1, "logger": False,
                          "enable_checkpointing": False, "enable_progress_bar": False, "num_sanity_val_steps": 0,
                          "default_root_dir": str(tmp_path)},
              "model": {"class_path": "torch_ude.training.JetMatchingModule",
                        "init_args": {"stream": {"calibration_s": 5.0, "capacity": 256}}},
              "data": {"class_path": "torch_ude.training.RecordedDataModule",
                       "init_args": {"known": {"class_path": "torch_ude.systems.TorquePendulumModel"},
                                     "files": mixed[:2], "val_files": mixed[2:], "fs": 100.0, **COLS}}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    main(["fit", "--config", str(tmp_path / "c.yaml")])
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    reports = metrics["config"]["data"]["reports"]
    assert metrics["status"] in ("finished", "degraded", "residual rejected") and metrics["updates"] == 100
    assert [r["antialiased"] for r in reports] == [False, True, False] and [r["filled"] for r in reports] == [0, 0, 0]


def test_a_file_slower_than_the_grid_is_a_warning_and_a_count(mixed, tmp_path):
    d = forced_pendulum_log(duration=6.0, fs=50.0, noise=2e-3, seed=3)
    write_csv(tmp_path / "slow.csv", d)
    with pytest.warns(UserWarning, match=r"slow.csv: 29\d of its 59\d samples on the 100 Hz grid \(50 %\) are filled "
                                         r"in by interpolation"):
        log = read_log(tmp_path / "slow.csv", fs=100.0, antialias="other_rates", **COLS)
    assert log.report.filled > FILLED_SHARE * log.samples and not log.report.antialiased


def test_logs_without_a_time_column_take_their_rate_from_the_config(tmp_path):
    d = forced_pendulum_log(duration=8.0, fs=500.0, noise=2e-3, seed=4)
    np.savez(tmp_path / "vectors.npz", position=d["position"], velocity=d["velocity"], torque=d["torque"])
    write_csv(tmp_path / "stamped.csv", d)
    cols = dict(states=["position", "velocity"], inputs=["torque"], fs=100.0)
    log = read_log(tmp_path / "vectors.npz", time=None, file_rate=500.0, **cols)
    stamped = read_log(tmp_path / "stamped.csv", time="time", **cols)
    assert log.report.decimation == 5 and np.allclose(log.segments[0], stamped.segments[0], atol=1e-12)
    # with a time column named, a file that has it is read by its stamps and one that lacks it by the rate
    assert np.allclose(read_log(tmp_path / "vectors.npz", time="time", file_rate=500.0, **cols).segments[0],
                       log.segments[0], atol=1e-12)
    with pytest.raises(ValueError, match=r"a log without a time column \(data.time: null\) needs its sample rate: "
                                         r"set data.file_rate"):
        read_log(tmp_path / "vectors.npz", time=None, **cols)
    with pytest.raises(ValueError, match=r"variable\(s\) \['time'\] named in the config are not in the file; .*"
                                         r"\(a file without a time column: set data.file_rate"):
        read_log(tmp_path / "vectors.npz", time="time", **cols)
    dm = RecordedDataModule(TorquePendulumModel(), files=[str(tmp_path / "vectors.npz")], time=None, file_rate=500.0,
                            **cols)
    assert dm.total_ticks == stamped.samples and dm.config()["file_rate"] == 500.0

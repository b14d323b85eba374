"""The RK4 baseline on recorded logs through a config (issue 35, item 3): `torch-ude fit` trains it, exports a
field, and `torch-ude score` reads it."""
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from baselines.training import RecordedShootingDataModule
from torch_ude import load_field
from torch_ude.cli import main
from torch_ude.prediction import prediction_errors
from torch_ude.recorded import read_log
from torch_ude.systems.controlled import TorquePendulumModel
from tests.torch_ude.helpers import forced_pendulum_log, write_csv

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"
COLS = dict(time="time", states=["position", "velocity"], inputs=["torque"])


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    """Two training logs and a validation log of a pendulum with friction its known model lacks (500 Hz)."""
    folder = tmp_path_factory.mktemp("logs")
    paths = []
    for seed, name in ((0, "train0.csv"), (1, "train1.csv"), (2, "val.csv")):
        write_csv(folder / name, forced_pendulum_log(duration=10.0, fs=500.0, noise=2e-3, jitter=0.05, seed=seed))
        paths.append(str(folder / name))
    return paths


def _config(tmp_path: Path, logs: list[str], max_steps: int) -> Path:
    config = {
        "seed_everything": 0,
        "trainer": {"max_steps": max_steps, "accelerator": "cpu", "devices": 1, "logger": False,
                    "enable_checkpointing": False, "enable_progress_bar": False, "num_sanity_val_steps": 0,
                    "default_root_dir": str(tmp_path / "run")},
        "model": {"class_path": "baselines.training.ShootingModule",
                  "init_args": {"hidden": [8, 8], "linear": True, "input_affine": True}},
        "data": {"class_path": "baselines.training.RecordedShootingDataModule",
                 "init_args": {"known": {"class_path": "torch_ude.systems.TorquePendulumModel"}, "files": logs[:2],
                               "val_files": logs[2:], "fs": 100.0, "rate": 50.0, "steps": 20, "n_windows": 32,
                               "calibration_s": 5.0, "horizons": [0.5, 2.0], **COLS}},
    }
    path = tmp_path / "baseline.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_the_windows_lie_inside_one_file_at_the_observation_rate(logs):
    dm = RecordedShootingDataModule(rate=50.0, steps=20, n_windows=32, known=TorquePendulumModel(), files=logs[:2],
                                    val_files=logs[2:], fs=100.0, **COLS)
    w = dm.windows
    assert w.batch == 32 and w.steps == 20 and w.h == pytest.approx(0.02) and w.inputs.shape == (21, 32, 1)
    assert w.straddling > 0  # the window positions across the two files are left out
    field, cal = dm.initial_field((8,), linear=True, input_affine=True, periodic=True)
    assert field.input_map.periodic == (0,) and field.input_affine and cal.x_rms.shape == (3,)
    assert np.allclose(field.in_scale.numpy(), cal.x_rms[:2].numpy()) and dm.config()["rate"] == 50.0


def test_fit_trains_the_baseline_on_logs_exports_a_field_and_score_reads_it(tmp_path, logs, capsys):
    main(["fit", "--config", str(_config(tmp_path, logs, max_steps=150))])
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["status"] == "finished" and metrics["trainer"] == "rk4_shooting" and metrics["updates"] > 0
    assert metrics["e_field"] is None and metrics["evaluated_on"] == "val_files" and metrics["rate"] == 50.0
    field = load_field(tmp_path / "run")
    assert field.sidecar["linear"] and field.sidecar["input_affine"] and field.sidecar["layer_sizes"] == [4, 8, 8, 2]
    # the exported field scores what the run's metrics.json says
    val = [read_log(logs[2], fs=100.0, **COLS)]
    assert prediction_errors(field, val, (2.0,))["open_loop_2s_nrmse"] == pytest.approx(metrics["open_loop_2s_nrmse"],
                                                                                         rel=1e-12)
    result = main(["score", str(tmp_path / "run"), "--files", logs[2], "--horizons", "0.5", "2",
                   "--config", str(tmp_path / "baseline.yaml"), "--out", str(tmp_path / "score")])
    assert result["files"][0]["one_step_nrmse"] == pytest.approx(metrics["one_step_nrmse"], rel=1e-12)
    assert result["files"][0]["open_loop_0.5s_nrmse"] == pytest.approx(metrics["open_loop_0.5s_nrmse"], rel=1e-12)
    assert (tmp_path / "score" / "val.png").is_file() and "val.csv" in capsys.readouterr().out


def test_a_run_rolls_its_validation_logs_out_once_at_the_end(tmp_path, logs, monkeypatch):
    # the last validation and metrics.json share one evaluation of the final weights
    calls = []
    evaluate = RecordedShootingDataModule.evaluate
    monkeypatch.setattr(RecordedShootingDataModule, "evaluate",
                        lambda self, field, states=None: calls.append(states) or evaluate(self, field, states))
    main(["fit", "--config", str(_config(tmp_path, logs, max_steps=3))])
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert len(calls) == 1 and metrics["updates"] == 3
    assert metrics["one_step_nrmse"] == prediction_errors(load_field(tmp_path / "run"),
                                                          [read_log(logs[2], fs=100.0, **COLS)],
                                                          (0.5, 2.0))["one_step_nrmse"]


def test_the_trained_baseline_predicts_better_than_its_known_model(tmp_path, logs):
    main(["fit", "--config", str(_config(tmp_path, logs, max_steps=150))])
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    main(["fit", "--config", str(_config(tmp_path, logs, max_steps=1)), "--trainer.default_root_dir",
          str(tmp_path / "one"), "--model.lr", "1e-9", "--model.lr_final", "1e-9"])
    untrained = json.loads((tmp_path / "one" / "metrics.json").read_text())
    assert metrics["open_loop_2s_nrmse"] < 0.5 * untrained["open_loop_2s_nrmse"]


def test_input_affine_on_a_simulated_plant_is_a_one_line_error(tmp_path):
    with pytest.raises(ValueError, match="model.input_affine needs a known model with recorded inputs"):
        main(["fit", "--config", str(ROOT / "configs" / "baseline_pendulum_case_a.yaml"), "--trainer.max_steps", "1",
              "--trainer.logger", "false", "--trainer.default_root_dir", str(tmp_path), "--model.input_affine", "true",
              "--data.duration", "5"])


@pytest.mark.skipif(not (DATA / "dfki_pendulum").is_dir(), reason=f"the DFKI pendulum logs are not at "
                                                                    f"{DATA / 'dfki_pendulum'} (see ../shared/data)")
def test_configs_baseline_dfki_pendulum_trains_and_scores_through_the_cli(tmp_path):
    files = [str(DATA / "dfki_pendulum" / f) for f in ("energy_shaping.csv", "sysid_pd.csv", "gravity_compensation.csv")]
    main(["fit", "--config", str(ROOT / "configs" / "baseline_dfki_pendulum.yaml"), "--trainer.max_steps", "5",
          "--trainer.logger", "false", "--trainer.enable_progress_bar", "false", "--trainer.default_root_dir",
          str(tmp_path), "--data.files", json.dumps(files), "--data.val_files",
          json.dumps([str(DATA / "dfki_pendulum" / "ddp.csv")])])
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["status"] == "finished" and set(metrics["physical_parameters"]) >= {"inertia", "offset"}
    assert load_field(tmp_path).sidecar["extra"]["physical_parameters"] == metrics["physical_parameters"]
    result = main(["score", str(tmp_path), "--files", str(DATA / "dfki_pendulum" / "ddp.csv"), "--config",
                   str(ROOT / "configs" / "baseline_dfki_pendulum.yaml")])
    assert result["files"][0]["open_loop_1s_nrmse"] == pytest.approx(metrics["open_loop_1s_nrmse"], rel=1e-12)

"""Trust outside the data, end to end: the envelope a run records, the residual check, the
calibration's warning for a signal too fast for its window, and trained physical parameters."""
import json
import math
import re

import pytest
import torch
import yaml

from torch_ude.calibration import calibrate, calibration_notes
from torch_ude.cli import console, main
from torch_ude.export import load_field
from torch_ude.prediction import prediction_errors, wrap_angle
from torch_ude.systems import DuffingOscillator, SinglePendulum, TorquePendulumModel, simulate
from tests.torch_ude.training.test_recorded import _config, logs  # noqa: F401 (the logs fixture)

QUIET = ["--trainer.logger", "false", "--trainer.enable_progress_bar", "false"]


def _duffing(tmp_path, *extra):
    config = {"seed_everything": 0,
              "trainer": {"max_steps": 1500, "num_sanity_val_steps": 0, "default_root_dir": str(tmp_path)},
              "model": {"class_path": "torch_ude.training.JetMatchingModule",
                        "init_args": {"stream": {"capacity": 1024}}},
              "data": {"class_path": "torch_ude.training.StreamDataModule",
                       "init_args": {"system": {"class_path": "torch_ude.systems.DuffingOscillator"}, "case": "A",
                                     "duration": 15.0, "noise": 0.01, "validation_s": 5.0}}}
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "duffing.yaml").write_text(yaml.safe_dump(config))
    main(["fit", "--config", str(tmp_path / "duffing.yaml"), *QUIET, *extra])
    return json.loads((tmp_path / "metrics.json").read_text())


def test_a_recorded_run_records_its_envelope_and_fades_outside_it(tmp_path, logs):  # noqa: F811
    main(["fit", "--config", str(_config(tmp_path, logs, max_steps=400))])
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    env = metrics["envelope"]
    assert env["columns"] == ["velocity/s", "sin(position)", "cos(position)", "torque/s"]
    assert env["span"]["channels"] == ["position", "velocity", "torque"]
    assert all(lo <= hi for lo, hi in zip(env["low"], env["high"]))
    assert len(metrics["outside_envelope_per_log"]) == 1 and 0 <= metrics["outside_envelope"] < 0.5
    program, meta = load_field(tmp_path)
    assert meta["envelope"]["low"] == env["low"] and meta["periodic"] == [0]
    # far beyond the torques seen, the exported field is the known model alone
    far = torch.tensor([[0.3, 1.0, 100.0], [-2.0, -0.5, -80.0]])
    known = TorquePendulumModel()(far[:, :2], far[:, 2:])
    assert torch.allclose(program(far), known, atol=1e-12)
    assert metrics["residual_check"]["on"] == "the validation files"


def test_the_residual_check_exports_the_physics_when_the_residual_predicts_worse(tmp_path):
    """A Duffing oscillator at 9 samples per period with an exact known model: the jets are biased,
    the residual learns the bias, and the check keeps the physics alone."""
    with pytest.warns(UserWarning) as caught:
        metrics = _duffing(tmp_path)
    said = "\n".join(str(w.message) for w in caught)
    check = metrics["residual_check"]
    assert check["rejected"] and check["hybrid"] > check["physics"] and metrics["status"] == "residual rejected"
    program, meta = load_field(tmp_path)
    x = torch.tensor([[0.3, 100.0], [-0.7, -300.0]])
    assert torch.allclose(program(x), DuffingOscillator().known_field("A")(x), atol=1e-9)
    assert meta["extra"]["status"] == "residual rejected"
    assert "residual rejected: on a held-back simulated stretch of 5 s" in said
    assert "too fast for the Savitzky-Golay window" in said
    kept = _duffing(tmp_path / "kept", "--model.keep_rejected_residual", "true")
    assert kept["status"] != "residual rejected" and kept["residual_check"]["rejected"]


def test_calibration_says_when_the_signal_is_too_fast_for_its_window():
    rec = simulate(DuffingOscillator(), 3.0, noise=0.01, seed=1)
    cal = calibrate(torch.as_tensor(rec.y), 1000.0, torch.as_tensor(rec.segment))
    assert cal.too_fast and cal.lambda2 == 0.0 and float(torch.as_tensor(cal.bias_share).min()) > 0.5
    assert abs(float(torch.as_tensor(cal.samples_per_period)[0]) - 9.0) < 0.5
    notes = calibration_notes(cal, 1000.0, 5)
    assert "off (lambda2 = 0) because the signal is too fast" in notes[0]
    assert "about 8.9 samples per period" in notes[1] or "about 9.0 samples per period" in notes[1]
    assert "sample at 44" in notes[1]
    slow = simulate(SinglePendulum(), 3.0, noise=0.01, seed=1)
    cal = calibrate(torch.as_tensor(slow.y), 1000.0, torch.as_tensor(slow.segment))
    assert not cal.too_fast and float(torch.as_tensor(cal.bias_share).max()) < 0.05
    assert len(calibration_notes(cal, 1000.0, 5)) == 1


def test_trained_physical_parameters_recover_a_simulated_pendulum(tmp_path):
    """Unknown damping (0 in the known model, 0.4 true) and inertia (L = 1.3 m known, 1 m true)."""
    overrides = {"data": {"init_args": {"system": {"class_path": "torch_ude.systems.SinglePendulum", "init_args": {
        "known_length": 1.3, "trainable": {"length": [0.5, 2.0], "damping": [0.0, 1.0]}}}}}}
    (tmp_path / "physics.yaml").write_text(yaml.safe_dump(overrides))
    main(["fit", "--config", "configs/pendulum_case_a.yaml", "--config", str(tmp_path / "physics.yaml"), *QUIET,
          "--trainer.default_root_dir", str(tmp_path)])
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    params = metrics["physical_parameters"]
    assert abs(params["length"]["value"] - 1.0) < 0.02 and abs(params["damping"]["value"] - 0.4) < 0.02 * 0.4
    assert params["length"]["initial"] == 1.3 and 0 < params["damping"]["standard_error"] < 0.05
    meta = json.loads((tmp_path / "field.json").read_text())
    assert meta["extra"]["physical_parameters"]["length"]["value"] == params["length"]["value"]
    program, _ = load_field(tmp_path)
    x = torch.tensor([[0.4, 1.0]])
    truth = SinglePendulum().true_field()(x)
    assert torch.allclose(program(x), truth, atol=5e-3)  # the trained physics (and any residual) is the truth


def test_bounds_that_exclude_the_value_are_a_one_line_error_before_any_work(tmp_path, capsys, monkeypatch):
    with pytest.raises(ValueError, match=r"bounds \[0.1, 0.5\] of inertia exclude its configured value 0.06259"):
        TorquePendulumModel(trainable={"inertia": [0.1, 0.5]})
    with pytest.raises(ValueError, match="has no physical parameter 'mass'"):
        TorquePendulumModel(trainable={"mass": [0.1, 0.5]})
    with pytest.raises(ValueError, match="low < high"):
        TorquePendulumModel(trainable={"offset": [0.5, -0.5]})
    overrides = {"data": {"init_args": {"system": {"class_path": "torch_ude.systems.SinglePendulum",
                                                   "init_args": {"trainable": {"damping": [0.5, 1.0]}}}}}}
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(overrides))
    monkeypatch.setattr("sys.argv", ["torch-ude", "fit", "--config", "configs/pendulum_case_a.yaml", "--config",
                                     str(tmp_path / "bad.yaml"), *QUIET, "--trainer.default_root_dir", str(tmp_path)])
    with pytest.raises(SystemExit) as exit_:
        console()
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "bounds [0.5, 1] of damping exclude its configured value 0" in err
    assert "Traceback" not in err and not (tmp_path / "metrics.json").exists()


def test_prediction_errors_compare_angles_on_the_circle():
    from torch_ude.recorded import RecordedLog
    from torch_ude.field import HybridField

    t = torch.linspace(0, 2, 201)
    q = 3.0 * torch.sin(2 * t) + 20.0  # unwrapped, far from zero
    log = RecordedLog(100.0, ("theta", "omega"), 2, segments=[torch.stack((q, 6 * torch.cos(2 * t)), 1).numpy()])
    field = HybridField(SinglePendulum().known_field("A")).without_residual()
    plain = prediction_errors(field, [log], (1.0,), periodic=())
    circle = prediction_errors(field, [log], (1.0,), periodic=(0,))
    wrapped = wrap_angle(q)
    assert float(wrapped.abs().max()) <= math.pi
    # the raw angle's RMS (about 20 rad) hides the error; on the circle it is measured against the swing
    assert circle["one_step_nrmse_per_channel"][0] > 3 * plain["one_step_nrmse_per_channel"][0]


def test_physics_first_one_fits_the_physics_alone_and_exports_no_residual(tmp_path, logs):  # noqa: F811
    """The log's viscous friction (0.05 N m s) is the one term the known model misses: with the
    residual switched off the run must find it in the known model's own form."""
    main(["fit", "--config", str(_config(tmp_path, logs, max_steps=800)), "--model.physics_first", "1",
          "--data.known.init_args.trainable", "{viscous: [0.0, 0.5]}"])
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["residual_check"] is None and metrics["status"] != "residual rejected"
    assert abs(metrics["physical_parameters"]["viscous"]["value"] - 0.05) < 0.005
    refit = metrics["physics_refit"]  # the exported physics is the least-squares optimum on the buffer
    assert refit["loss_after"] <= refit["loss_before"] and refit["values_before"]["viscous"] != \
        metrics["physical_parameters"]["viscous"]["value"]
    program, _ = load_field(tmp_path)
    x = torch.tensor([[0.3, 1.0, 0.5], [-2.0, -0.5, -1.5], [1.0, 4.0, 0.0]])
    physics = TorquePendulumModel(viscous=metrics["physical_parameters"]["viscous"]["value"])
    assert torch.allclose(program(x), physics(x[:, :2], x[:, 2:]), atol=1e-12)  # no residual anywhere


@pytest.mark.parametrize("share,message", [(1.5, r"share of the updates in \[0, 1\]; got 1.5"),
                                           (1, "trains the physical parameters alone, but the known model "
                                               "TorquePendulumModel trains none")])
def test_a_bad_physics_first_is_a_one_line_error_before_any_work(tmp_path, logs, capsys, monkeypatch, share,
                                                                 message):  # noqa: F811
    monkeypatch.setattr("sys.argv", ["torch-ude", "fit", "--config", str(_config(tmp_path, logs, max_steps=50)),
                                     "--model.physics_first", str(share)])
    with pytest.raises(SystemExit) as exit_:
        console()
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and re.search(message, err) and "Traceback" not in err
    assert not (tmp_path / "metrics.json").exists()

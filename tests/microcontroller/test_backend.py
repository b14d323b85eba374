"""The C trainer behind `torch-ude fit` (microcontroller.training.CJetMatchingModule)."""
import json

import lightning as L
import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from microcontroller.generate import spec_from_config
from microcontroller.memory import static_bytes
from microcontroller.training import CJetMatchingModule
from tests.microcontroller.helpers import forced_log
from torch_ude.cli import main
from torch_ude.export import load_field
from torch_ude.stream import StreamSettings
from torch_ude.systems import SinglePendulum
from torch_ude.training import PeriodicCheckpoint, StreamDataModule
from torch_ude.training.outputs import METRIC_KEYS

SHORT = ["--data.duration", "12", "--model.stream.capacity", "512", "--model.stream.calibration_s", "1.0",
         "--trainer.max_steps", "600", "--trainer.enable_progress_bar", "false",
         "--trainer.callbacks.init_args.every_n_updates", "200"]


def test_fit_with_the_c_trainer_writes_every_output_and_learns(tmp_path):
    cli = main(["fit", "--config", "configs/pendulum_case_a_c.yaml", *SHORT, "--trainer.default_root_dir",
                str(tmp_path), "--trainer.logger.init_args.save_dir", str(tmp_path)])
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["status"] == "finished" and metrics["trainer"] == "jet_matching_c"
    assert set(METRIC_KEYS) <= set(metrics) and metrics["updates"] == 600
    assert cli.trainer.global_step == 600  # Lightning counted the C trainer's updates
    assert metrics["static_bytes"] == metrics["state_bytes"] > 512 * 3 * 2 * 4
    assert np.allclose(metrics["sigma_hat"], metrics["sigma_true"], rtol=0.1)
    assert metrics["e_field_visited"] < 0.06  # the known model alone: about 0.12
    module, meta = load_field(tmp_path)
    assert meta["extra"]["trainer"] == "jet_matching_c"
    grid = torch.zeros(3, 2, dtype=torch.float64)
    assert torch.isfinite(module(grid)).all()
    acc = EventAccumulator(str(next(tmp_path.rglob("events.out.tfevents.*")).parent))
    acc.Reload()
    assert {"train/loss_r1", "train/lr", "stream/m", "stream/reject_rate", "eval/e_field"} <= set(acc.Tags()["scalars"])


def _fit(tmp_path, max_steps, chunks=1, ckpt_path=None, every=None, lr=5e-3):
    dm = StreamDataModule(SinglePendulum(), duration=8.0, noise=0.01, seed=4)
    model = CJetMatchingModule(stream=StreamSettings(capacity=256, calibration_s=1.0, m_max=50, tap_average=False),
                               periodic=False, chunks_per_step=chunks, replay_updates=40, lr=lr)
    callbacks = [PeriodicCheckpoint(every_n_updates=every, dirpath=tmp_path / "ckpt", save_top_k=-1)] if every else []
    trainer = L.Trainer(max_steps=max_steps, logger=False, enable_progress_bar=False, callbacks=callbacks,
                        enable_checkpointing=bool(callbacks), default_root_dir=tmp_path, num_sanity_val_steps=0,
                        limit_val_batches=0)
    trainer.fit(model, dm, ckpt_path=ckpt_path)
    return model


def test_chunking_does_not_change_the_c_updates(tmp_path):
    a, b = _fit(tmp_path / "a", 400, chunks=1), _fit(tmp_path / "b", 400, chunks=25)
    assert np.array_equal(a.engine.weights(), b.engine.weights())


def test_a_c_run_resumes_exactly_extends_its_schedule_and_refuses_other_settings(tmp_path):
    full = _fit(tmp_path / "a", 400, every=200)
    # the first periodic checkpoint, taken after the replay chunk that crossed 200 updates
    ckpt = min((tmp_path / "a" / "ckpt").glob("step=*.ckpt"), key=lambda p: int(p.stem.split("=")[1]))
    assert int(ckpt.stem.split("=")[1]) < 400
    resumed = _fit(tmp_path / "b", 400, ckpt_path=ckpt)
    assert np.array_equal(full.engine.weights(), resumed.engine.weights())
    assert full.engine.report()["counters"] == resumed.engine.report()["counters"]
    longer = _fit(tmp_path / "c", 800, ckpt_path=ckpt)  # the 800-update schedule from the checkpoint on
    report = longer.engine.report()
    assert report["updates"] == 800 and report["lr"] == pytest.approx(5e-5, rel=1e-3)
    with pytest.raises(ValueError, match="built with other settings"):
        _fit(tmp_path / "d", 400, ckpt_path=ckpt, lr=1e-3)


def test_fit_with_the_c_trainer_on_a_log_with_a_recorded_input(tmp_path):
    # the C backend of `torch-ude fit` on a RecordedDataModule: states, then the torque, a sample
    config, _ = forced_log(tmp_path, 12.0)
    device = ["--model.stream.tap_average", "false", "--model.stream.capacity", "256", "--model.stream.calibration_s",
              "1.0", "--model.stream.m_max", "50", "--model.envelope", "false"]
    main(["fit", "--config", str(config), "--model.class_path", "microcontroller.training.CJetMatchingModule", *device,
          "--trainer.max_steps", "400", "--trainer.enable_progress_bar", "false",
          "--trainer.default_root_dir", str(tmp_path / "run"), "--trainer.logger.init_args.save_dir",
          str(tmp_path / "run")])
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["status"] == "finished" and metrics["trainer"] == "jet_matching_c" and metrics["updates"] == 400
    assert metrics["static_bytes"] == static_bytes(spec_from_config(config, device))  # 3 channels a sample
    assert np.isfinite(metrics["open_loop_1s_nrmse"]) and metrics["residual_check"]["physics"] is not None


def test_a_c_run_on_a_log_exports_the_envelope_of_the_span_it_recorded(tmp_path):
    # a recorded log turns the envelope on by default, on the device as in Python (issue 32, item 2)
    config, _ = forced_log(tmp_path, 12.0)
    device = ["--model.stream.tap_average", "false", "--model.stream.capacity", "256", "--model.stream.calibration_s",
              "1.0", "--model.stream.m_max", "50"]
    main(["fit", "--config", str(config), "--model.class_path", "microcontroller.training.CJetMatchingModule", *device,
          "--trainer.max_steps", "200", "--trainer.enable_progress_bar", "false",
          "--trainer.default_root_dir", str(tmp_path / "run"), "--trainer.logger.init_args.save_dir",
          str(tmp_path / "run")])
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    spec = spec_from_config(config, device)
    assert spec.envelope and metrics["static_bytes"] == static_bytes(spec)
    span = metrics["envelope"]["span"]
    assert span["channels"] == ["position", "velocity", "torque"]  # states, then the input
    assert all(lo < hi for lo, hi in zip(span["low"], span["high"]))
    sidecar = json.loads((tmp_path / "run" / "field.json").read_text())
    assert sidecar["envelope"]["low"] == metrics["envelope"]["low"]
    assert sidecar["envelope"]["margin"] == metrics["envelope"]["margin"]


def _physical_c_run(tmp_path, steps: int, settings: list[str]):
    """``torch-ude fit`` with the C backend on the forced log, the inertia and the torque offset trained."""
    config, _ = forced_log(tmp_path, 12.0)
    device = ["--model.stream.tap_average", "false", "--model.stream.capacity", "256", "--model.stream.calibration_s",
              "1.0", "--model.stream.m_max", "50", "--model.envelope", "false", *settings,
              "--data.known.init_args.trainable", "{inertia: [0.03, 0.5], offset: [-1.0, 1.0]}"]
    cli = main(["fit", "--config", str(config), "--model.class_path", "microcontroller.training.CJetMatchingModule",
                *device, "--trainer.max_steps", str(steps), "--trainer.enable_progress_bar", "false",
                "--trainer.default_root_dir", str(tmp_path / "run"), "--trainer.logger.init_args.save_dir",
                str(tmp_path / "run")])
    return cli, json.loads((tmp_path / "run" / "metrics.json").read_text())


def test_a_physics_alone_c_run_exports_its_refitted_parameters(tmp_path):
    # issue 32, item 2: physics_first 1 and the default physics_refit: the run ends with tu_trainer_refit on the
    # reservoir, as the Python trainer ends with refit_physical_parameters; field.json carries the refitted values
    cli, metrics = _physical_c_run(tmp_path, 100, ["--model.physics_first", "1"])
    refit = metrics["physics_refit"]
    assert refit["converged"] and refit["loss_after"] < refit["loss_before"]  # 100 updates leave room to refit
    assert np.isfinite(refit["held_out_before"]) and np.isfinite(refit["held_out_after"])
    theta = cli.model.engine.weights(ema=True)[-2:].astype(np.float64)
    refitted = np.array([0.06259, 0.0]) + np.array([0.235, 1.0]) * theta
    assert [refit["values_before"][k] for k in ("inertia", "offset")] != pytest.approx(refitted.tolist(), rel=1e-3)
    known = json.loads((tmp_path / "run" / "field.json").read_text())["plant"]["init_args"]["known"]["init_args"]
    assert [known["inertia"], known["offset"]] == pytest.approx(refitted.tolist(), rel=1e-6)
    assert all(np.isfinite(metrics["physical_parameters"][k]["standard_error"]) for k in ("inertia", "offset"))


def test_a_c_run_exports_the_physical_parameters_it_trained(tmp_path):
    # issue 32: the known model's inertia and torque offset trained on the device beside the residual; field.json's
    # known model carries p = p0 + s theta of the C trainer's EMA, and metrics.json lists them
    cli, metrics = _physical_c_run(tmp_path, 400, ["--model.physics_refit", "false"])
    assert metrics["status"] == "finished" and metrics["updates"] == 400
    theta = cli.model.engine.weights(ema=True)[-2:].astype(np.float64)
    p0, spans = np.array([0.06259, 0.0]), np.array([0.235, 1.0])
    trained = p0 + spans * theta
    assert np.abs(theta).min() > 1e-4  # both moved
    known = json.loads((tmp_path / "run" / "field.json").read_text())["plant"]["init_args"]["known"]["init_args"]
    assert [known["inertia"], known["offset"]] == pytest.approx(trained.tolist(), rel=1e-6)
    reported = metrics["physical_parameters"]
    assert [reported[k]["value"] for k in ("inertia", "offset")] == pytest.approx(trained.tolist(), rel=1e-6)
    # the C trainer's standard errors on its reservoir, in the parameters' units (theta's times the span)
    se = cli.model.engine.standard_errors().astype(np.float64) * spans
    assert [reported[k]["standard_error"] for k in ("inertia", "offset")] == pytest.approx(se.tolist(), rel=1e-6)
    assert np.all(np.isfinite(se)) and np.all(se > 0) and metrics["physics_refit"] is None
    field = cli.model.exported
    assert [field.known.values()[k] for k in ("inertia", "offset")] == pytest.approx(trained.tolist(), rel=1e-6)
    module, _ = load_field(tmp_path / "run")  # the TorchScript field computes with them
    x, u = torch.tensor([[0.3, -0.2]], dtype=torch.float64), torch.tensor([[0.1]], dtype=torch.float64)
    assert torch.allclose(module(torch.cat([x, u], dim=1)), field(x, u))

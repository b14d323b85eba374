"""The streaming jet-matching LightningModule end to end (short runs)."""
import json
import math
import re

import lightning as L
import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import torch_ude
from torch_ude.cli import console, main
from torch_ude.export import load_field
from torch_ude.stream import StreamEstimator, StreamSettings
from torch_ude.systems import SensorFaults, SinglePendulum, System, VectorField
from torch_ude.training import JetMatchingModule, StreamDataModule
from torch_ude.training.outputs import METRIC_KEYS
from torch_ude.training.run_folder import LOCK_FILE

SHORT = ["--data.duration", "12", "--model.stream.capacity", "512", "--model.stream.calibration_s", "1.0",
         "--trainer.max_steps", "300", "--trainer.enable_progress_bar", "false",
         "--trainer.callbacks.init_args.every_n_updates", "100"]


def _fit(tmp_path, *extra, config="configs/pendulum_case_a.yaml"):
    args = ["fit", "--config", config, *SHORT, "--trainer.default_root_dir", str(tmp_path),
            "--trainer.logger.init_args.save_dir", str(tmp_path), *extra]
    main(args)
    return json.loads((tmp_path / "metrics.json").read_text())


def test_short_run_writes_outputs_logs_and_learns(tmp_path):
    metrics = _fit(tmp_path, "--trainer.max_steps", "600", "--model.ema_decay", "0.99")
    assert set(METRIC_KEYS) <= set(metrics)
    assert metrics["updates"] == 600 and metrics["m"] >= 1 and metrics["wall_s"] > 0
    assert np.allclose(metrics["sigma_hat"], metrics["sigma_true"], rtol=0.1)
    # the AdamW decay was set from the calibrated noise (configs: 0.1 from 1 % noise upwards)
    sigma_rel = metrics["calibration"]["sigma_rel"]
    assert metrics["weight_decay"] == pytest.approx(0.1 * min(1.0, (sigma_rel / 0.01) ** 2))
    assert metrics["weight_decay"] > 0.05
    # the training state holds at least the reservoir (512 jets of 3 x 2 doubles) and the
    # network with its gradient, two Adam moments and the EMA copy, and nothing that grows
    assert 512 * 3 * 2 * 8 + 5 * 354 * 8 < metrics["state_bytes"] < 200_000
    module, meta = load_field(tmp_path)
    assert meta["case"] == "A" and meta["extra"]["trainer"] == "jet_matching"
    # 600 updates on 12 s of stream already beat the known model alone (e_field about 0.12)
    assert metrics["e_field_visited"] < 0.06
    events = next(tmp_path.rglob("events.out.tfevents.*"))
    acc = EventAccumulator(str(events.parent))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"train/loss_r1", "train/loss_r2", "train/lambda2", "train/lr", "stream/m", "stream/reject_rate",
            "stream/reservoir_fill", "stream/sigma_hat_theta", "stream/sigma_true_theta", "eval/e_field",
            "eval/c_hat"} <= tags
    assert "eval/residual" in acc.Tags()["images"]
    # every log_every (50) updates one value per tag, at the update count
    assert [e.step for e in acc.Scalars("train/lr")] == list(range(50, 601, 50))
    assert len({e.value for e in acc.Scalars("stream/m")}) == 1 and len(acc.Scalars("train/loss_r1")) == 12
    # the validate subcommand evaluates the saved checkpoint to the same numbers
    ckpt = next(tmp_path.rglob("*.ckpt"))
    cli = main(["validate", "--config", "configs/pendulum_case_a.yaml", *SHORT, "--trainer.default_root_dir",
                str(tmp_path), "--trainer.logger", "false", "--ckpt_path", str(ckpt)])
    val = cli.trainer.callback_metrics
    assert float(val["val/e_field"]) == pytest.approx(metrics["e_field"], rel=1e-12)
    assert float(val["val/c_hat"]) == pytest.approx(metrics["c_hat"], rel=1e-12)


class Oscillator(System):
    """A damped linear oscillator defined outside the library."""

    state_names = ("q", "v")
    cases = ("A",)
    reexcite_interval = (3.0, 5.0)

    def __init__(self, stiffness: float = 4.0, damping: float = 0.3) -> None:
        self.k, self.c = stiffness, damping

    def _field(self, c):
        k = self.k

        class Linear(VectorField):
            n_states = 2

            def forward(self, x):
                return torch.stack((x[:, 1], -k * x[:, 0] - c * x[:, 1]), dim=1)

            def jacobian(self, x):
                jac = x.new_zeros(x.shape[0], 2, 2)
                jac[:, 0, 1], jac[:, 1, 0], jac[:, 1, 1] = 1.0, -k, -c
                return jac

        return Linear()

    def true_field(self):
        return self._field(self.c)

    def build_known_field(self, case):
        return self._field(0.0)

    def initial_state(self):
        return np.array([1.0, 0.0])

    def reexcite(self, rng):
        return np.array([rng.uniform(-1, 1), rng.uniform(-2, 2)])

    def damping_terms(self, case):
        return ((1, 1, self.c),)

    def init_args(self):
        return {"stiffness": self.k, "damping": self.c}


def test_a_plant_defined_in_a_test_file_trains_from_yaml(tmp_path):
    cfg = tmp_path / "osc.yaml"
    cfg.write_text(
        "data:\n  class_path: torch_ude.training.StreamDataModule\n  init_args:\n"
        "    system:\n      class_path: tests.torch_ude.training.test_module.Oscillator\n"
        "      init_args: {stiffness: 9.0}\n    case: A\n")
    metrics = _fit(tmp_path, "--config", str(cfg), "--trainer.max_steps", "1500", "--model.ema_decay", "0.99")
    assert metrics["plant"] == "Oscillator"
    assert abs(metrics["c_hat"] - 0.3) < 0.05


def _fit_api(tmp_path, max_steps, ckpt_path=None, checkpoint_every=None):
    dm = StreamDataModule(SinglePendulum(), duration=8.0, noise=0.01, seed=4)
    # one chunk per training step, so that Lightning's every_n_train_steps lands on the checkpoint's step
    model = JetMatchingModule(stream=StreamSettings(capacity=256, calibration_s=1.0), chunks_per_step=1)
    callbacks = []
    if checkpoint_every:
        callbacks.append(L.pytorch.callbacks.ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=checkpoint_every,
                                                             save_top_k=-1, filename="{step}"))
    trainer = L.Trainer(max_steps=max_steps, logger=False, enable_progress_bar=False, enable_model_summary=False,
                        callbacks=callbacks, enable_checkpointing=bool(callbacks), default_root_dir=tmp_path,
                        num_sanity_val_steps=0, limit_val_batches=0)
    trainer.fit(model, dm, ckpt_path=ckpt_path)
    return model


def test_an_interrupted_and_resumed_run_equals_an_uninterrupted_one(tmp_path):
    full = _fit_api(tmp_path / "a", 250, checkpoint_every=120)
    ckpt = tmp_path / "a" / "ckpt" / "step=120.ckpt"
    assert ckpt.is_file()
    resumed = _fit_api(tmp_path / "b", 250, ckpt_path=ckpt)
    for p, q in zip(full.averaged_field().parameters(), resumed.averaged_field().parameters()):
        assert torch.equal(p, q)
    assert full.stream.counters == resumed.stream.counters
    assert json.loads((tmp_path / "a" / "metrics.json").read_text())["e_field"] == \
        json.loads((tmp_path / "b" / "metrics.json").read_text())["e_field"]


def test_a_checkpoint_with_per_tensor_adam_state_is_refused_with_a_clear_error(tmp_path):
    _fit_api(tmp_path / "a", 130, checkpoint_every=120)
    ckpt = torch.load(tmp_path / "a" / "ckpt" / "step=120.ckpt", weights_only=False)
    group = ckpt["optimizer_states"][0]["param_groups"][0]
    assert group["params"] == [0]  # one flat weight vector
    group["params"] = list(range(6))  # as an optimizer over the six tensors of the 2-16-16-2 network held it
    old = tmp_path / "old.ckpt"
    torch.save(ckpt, old)
    with pytest.raises(ValueError, match="holds 6 per-tensor parameters.*cannot be resumed"):
        _fit_api(tmp_path / "b", 250, ckpt_path=old)


def test_faulty_sensor_samples_are_rejected_and_weights_stay_finite(tmp_path):
    dm = StreamDataModule(SinglePendulum(), duration=10.0, noise=0.01, seed=1,
                          faults=SensorFaults(nan_rate=0.002, inf_rate=0.001, drop_rate=0.002, spike_rate=0.002))
    model = JetMatchingModule(stream=StreamSettings(capacity=256, calibration_s=1.0), ema_decay=0.99)
    trainer = L.Trainer(max_steps=600, logger=False, enable_progress_bar=False, enable_checkpointing=False,
                        default_root_dir=tmp_path, num_sanity_val_steps=0, limit_val_batches=0)
    trainer.fit(model, dm)
    c = model.stream.counters
    assert c["nonfinite_samples"] > 0 and c["nonfinite"] > 0 and c["gaps"] > 0 and c["misfit"] > 0
    assert all(torch.isfinite(p).all() for p in model.field.parameters())
    assert torch.isfinite(model.stream.buffer.data).all()
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["e_field_visited"] < 0.08  # the known model alone: about 0.12


def test_cli_overrides_reach_the_components():
    cli = main(["--config", "configs/pendulum_case_a.yaml", "--data.noise", "0.02", "--seed_everything", "3"],
               run=False)
    assert cli.datamodule.noise == 0.02 and cli.datamodule.seed == 3
    assert cli.trainer.max_steps == 8000 and isinstance(cli.model, JetMatchingModule)


def test_impossible_configs_are_clear_errors():
    with pytest.raises(ValueError, match="smaller than the minibatch"):
        JetMatchingModule(stream=StreamSettings(capacity=32), batch_size=64)
    with pytest.raises(ValueError, match="m must be an integer"):
        JetMatchingModule(stream=StreamSettings(m=0))
    with pytest.raises(ValueError, match="weight_decay must be >= 0"):
        JetMatchingModule(weight_decay=-1e-3)
    with pytest.raises(ValueError, match="fs / train_rate"):
        StreamDataModule(SinglePendulum(), train_rate=33.0)
    with pytest.raises(ValueError, match="case must be one of"):
        StreamDataModule(SinglePendulum(), case="Z")
    with pytest.raises(ValueError, match="fs"):
        StreamDataModule(SinglePendulum(), fs=-1.0)


@pytest.mark.parametrize("granularity", ["replay_updates", "chunks_per_step"])
def test_replay_and_chunk_granularity_do_not_change_the_updates(tmp_path, granularity, monkeypatch):
    fields, streams, pushes = [], [], []
    push = StreamEstimator.push

    def counted(self, *args, **kwargs):
        pushes[-1] += 1
        return push(self, *args, **kwargs)

    monkeypatch.setattr(StreamEstimator, "push", counted)
    for k in (1, 25):
        pushes.append(0)
        dm = StreamDataModule(SinglePendulum(), duration=6.0, noise=0.01, seed=2)
        model = JetMatchingModule(stream=StreamSettings(capacity=256, calibration_s=1.0),
                                  **{"chunks_per_step": 1, granularity: k})
        trainer = L.Trainer(max_steps=320, logger=False, enable_progress_bar=False, enable_checkpointing=False,
                            default_root_dir=tmp_path / str(k), num_sanity_val_steps=0, limit_val_batches=0)
        trainer.fit(model, dm)
        assert model.stats["updates"] == 320
        fields.append(model.averaged_field())
        streams.append(model.stream)
    assert all(torch.equal(p, q) for p, q in zip(fields[0].parameters(), fields[1].parameters()))
    assert streams[0].counters == streams[1].counters and torch.equal(streams[0].buffer.data, streams[1].buffer.data)
    if granularity == "chunks_per_step":  # chunks before the buffer could fill were pushed together
        assert pushes[1] < pushes[0] - 25


def test_console_script_exits_with_status_zero(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    script = Path(sys.executable).with_name("torch-ude")
    assert script.is_file(), "the torch-ude console script is not installed next to the interpreter"
    proc = subprocess.run([str(script), "fit", "--config", "configs/pendulum_case_a.yaml", *SHORT,
                           "--trainer.max_steps", "20", "--trainer.default_root_dir", str(tmp_path),
                           "--trainer.logger", "false"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "metrics.json").is_file()


# ----- issue 12: never a silent wrong model, never a lost run -----------------------------------
def _trainer(tmp_path, max_steps, **kwargs):
    return L.Trainer(max_steps=max_steps, logger=False, enable_progress_bar=False, enable_model_summary=False,
                     default_root_dir=tmp_path, num_sanity_val_steps=0, limit_val_batches=0,
                     **{"enable_checkpointing": False, **kwargs})


def _stale_outputs(folder):
    """An earlier, finished run's files in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "field.pt").write_text("an earlier run's model")
    (folder / "field.json").write_text("{}")
    (folder / "metrics.json").write_text('{"status": "finished", "e_field": 0.001}')


def test_a_buffer_that_never_fills_trains_on_what_it_holds_and_says_so(tmp_path):
    dm = StreamDataModule(SinglePendulum(), duration=4.0, noise=0.01, seed=3)
    model = JetMatchingModule(stream=StreamSettings(capacity=4096, calibration_s=1.0))
    with pytest.warns(UserWarning, match=r"sample buffer \d+/4096 full; replay trains on the \d+ jets it holds"):
        _trainer(tmp_path, 150).fit(model, dm)
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["status"] == "finished" and metrics["updates"] == 150
    assert metrics["buffer_full"] is False and 64 <= metrics["buffer_fill"] < 4096
    assert metrics["buffer_fill"] == model.stream.buffer.fill and metrics["buffer_capacity"] == 4096
    assert (tmp_path / "field.pt").is_file()


@pytest.mark.parametrize("settings,reason", [
    # the calibration phase loses most of its samples to long dropouts and never finishes
    ({"duration": 1.5, "faults": SensorFaults(dropout_rate=0.01, dropout_length=200)}, "calibration phase finished"),
    # 0.1 s of stream after calibration: fewer jets than one minibatch
    ({"duration": 1.1}, r"0 updates: the sample buffer holds \d+ jets, fewer than one minibatch"),
])
def test_a_run_without_a_trained_model_fails_and_leaves_no_model(tmp_path, settings, reason):
    _stale_outputs(tmp_path)
    dm = StreamDataModule(SinglePendulum(), noise=0.01, seed=3, **settings)
    model = JetMatchingModule(stream=StreamSettings(capacity=4096, calibration_s=1.0))
    with pytest.raises(RuntimeError, match=reason):
        _trainer(tmp_path, 100).fit(model, dm)
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["status"] == "failed" and re.search(reason, metrics["reason"]) and metrics["updates"] == 0
    assert not (tmp_path / "field.pt").exists() and not (tmp_path / "field.json").exists()


def test_a_run_without_replay_whose_buffer_never_fills_fails_through_the_cli(tmp_path, capsys, monkeypatch):
    _stale_outputs(tmp_path)
    monkeypatch.setattr("sys.argv", ["torch-ude", "fit", "--config", "configs/pendulum_case_a.yaml", *SHORT,
                                     "--data.duration", "4", "--model.stream.capacity", "4096",
                                     "--model.replay", "false", "--trainer.default_root_dir", str(tmp_path),
                                     "--trainer.logger", "false"])
    with pytest.raises(SystemExit) as exit_:
        console()
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert re.search(r"torch-ude: error: the run made 0 updates: the stream ended with the sample buffer "
                     r"\d+/4096 full and model.replay is false", err) and "Traceback" not in err
    assert json.loads((tmp_path / "metrics.json").read_text())["status"] == "failed"
    # no model, no checkpoint (the run folder's lock file stays, unlocked: torch_ude.training.run_folder)
    assert sorted(p.name for p in tmp_path.iterdir()) == [LOCK_FILE, "config.yaml", "metrics.json"]


def test_outputs_record_the_run_and_replace_an_earlier_runs(tmp_path):
    _stale_outputs(tmp_path)
    seen = {}

    class Spy(L.Callback):
        def on_train_start(self, trainer, pl_module):
            seen["files"] = sorted(p.name for p in tmp_path.iterdir())
            seen["metrics"] = json.loads((tmp_path / "metrics.json").read_text())

    dm = StreamDataModule(SinglePendulum(), duration=4.0, noise=0.01, seed=7)
    model = JetMatchingModule(stream=StreamSettings(capacity=256, calibration_s=1.0))
    _trainer(tmp_path, 60, callbacks=[Spy()]).fit(model, dm)
    # while running: the earlier model is gone and metrics.json says so
    assert seen["files"] == ["metrics.json"] and seen["metrics"]["status"] == "running"
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    _, sidecar = load_field(tmp_path)
    for record in (seen["metrics"], metrics, {**sidecar["extra"], **sidecar}):
        assert record["seed"] == 7 and record["library_version"] == torch_ude.__version__
        assert record["torch_version"] == torch.__version__ and record["started"]
        assert record["config"]["model"]["stream"]["capacity"] == 256
        assert record["config"]["data"]["duration"] == 4.0 and record["config"]["max_steps"] == 60
        assert record["config"]["data"]["system"]["class_path"] == "torch_ude.systems.pendulum.SinglePendulum"
    assert metrics["status"] == "finished" and metrics["started"] == seen["metrics"]["started"]
    assert not list(tmp_path.glob(".*.tmp"))


class LrRecorder(JetMatchingModule):
    """Records the learning rate each update uses."""

    def _update(self, opt, sched):
        self.__dict__.setdefault("lrs", []).append(opt.param_groups[0]["lr"])
        super()._update(opt, sched)


def test_extending_a_finished_run_follows_the_schedule_of_the_new_horizon(tmp_path):
    def fit(max_steps, ckpt_path=None):
        dm = StreamDataModule(SinglePendulum(), duration=4.0, noise=0.01, seed=5)
        model = LrRecorder(stream=StreamSettings(capacity=256, calibration_s=1.0), lr=5e-3, lr_min=5e-5)
        trainer = _trainer(tmp_path / str(max_steps), max_steps, enable_checkpointing=True)
        trainer.fit(model, dm, ckpt_path=ckpt_path)
        return model, trainer

    first, trainer = fit(200)
    ckpt = trainer.checkpoint_callback.best_model_path
    extended, _ = fit(500, ckpt)
    assert extended.stats["updates"] == 500 and len(extended.lrs) == 300
    cosine = [5e-5 + (5e-3 - 5e-5) * (1 + math.cos(math.pi * k / 500)) / 2 for k in range(200, 500)]
    assert extended.lrs == pytest.approx(cosine, rel=1e-10, abs=0)
    # without the recomputation the rate would climb back from lr_min towards lr
    assert first.lrs[-1] < 1e-4 and extended.lrs[0] > 2e-3
    with pytest.raises(ValueError, match=r"max_steps = 200 does not exceed the 200 updates the checkpoint has made"):
        fit(200, ckpt)


def test_settings_that_cannot_work_fail_before_any_simulation(tmp_path):
    with pytest.raises(ValueError, match=r"substeps \(RK4 steps per sample\) must be an integer >= 1; got 0"):
        StreamDataModule(SinglePendulum(), substeps=0)
    with pytest.raises(TypeError, match="faults must be a torch_ude.systems.SensorFaults"):
        StreamDataModule(SinglePendulum(), faults={"nan_rate": 0.1})
    dm = StreamDataModule(SinglePendulum(), duration=2.0)
    model = JetMatchingModule(stream=StreamSettings(calibration_s=3.0))
    trainer = _trainer(tmp_path, 10)
    with pytest.raises(ValueError, match=r"calibration_s = 3 s is not shorter than the stream \(data.duration = 2 s\)"):
        trainer.fit(model, dm)
    assert dm._sim is None and not any(tmp_path.iterdir())  # nothing was simulated or written

"""The baseline under the torch-ude CLI (short runs) and its shared initial field."""
import json
import math

import lightning as L
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from baselines.initialization import initial_field, stream_calibration
from baselines.training import ShootingDataModule, ShootingModule
from tests.baselines.helpers import Explosive
from torch_ude import HybridField, SinglePendulum, load_field, simulate
from torch_ude.calibration import calibrate
from torch_ude.cli import main
from torch_ude.training import PeriodicCheckpoint
from torch_ude.training.outputs import METRIC_KEYS

SHORT = ["--data.duration", "6", "--data.steps", "5", "--data.n_windows", "8", "--trainer.max_steps", "20",
         "--trainer.enable_progress_bar", "false", "--trainer.callbacks.init_args.every_n_updates", "10",
         "--trainer.log_every_n_steps", "5"]


def _fit(tmp_path, *extra, config="configs/baseline_pendulum_case_a.yaml"):
    args = ["fit", "--config", config, *SHORT, "--trainer.default_root_dir", str(tmp_path),
            "--trainer.logger.init_args.save_dir", str(tmp_path), *extra]
    main(args)
    return json.loads((tmp_path / "metrics.json").read_text())


def test_short_run_writes_the_shared_outputs_and_logs(tmp_path):
    metrics = _fit(tmp_path)
    assert set(METRIC_KEYS) <= set(metrics)
    assert metrics["updates"] == 20 and metrics["skipped_steps"] == 0 and metrics["wall_s"] > 0
    assert metrics["sigma_hat"] is None and metrics["m"] is None
    assert metrics["tape_bytes"] == 5 * 8 * (4 * 34 + 2) * 8
    # state: tape, windows (6 observations and a start of 8 windows), weights and shooting states
    # with their gradients, two Adam moments, the rollback copy, and 7 step counters (4 or 8 bytes each)
    trained = (354 + 8 * 2) * 8
    observed = (5 + 1) * 8 * 2 * 8 + 8 * 8
    assert 0 < metrics["state_bytes"] - (metrics["tape_bytes"] + observed + 5 * trained) <= 7 * 8
    assert metrics["e_field_visited"] < 0.2
    module, meta = load_field(tmp_path)
    assert meta["case"] == "A" and meta["extra"]["trainer"] == "rk4_shooting"
    assert meta["extra"]["config"]["model"]["fit_states"] is True
    x = torch.tensor([[0.3, -1.0]])
    assert module(x).shape == (1, 2)
    events = next(tmp_path.rglob("events.out.tfevents.*"))
    acc = EventAccumulator(str(events.parent))
    acc.Reload()
    assert {"train/loss", "train/lr", "train/skipped", "eval/e_field", "eval/c_hat"} <= set(acc.Tags()["scalars"])
    assert "eval/residual" in acc.Tags()["images"]


def test_noise_adaptive_weight_decay_follows_the_stream_calibration(tmp_path):
    metrics = _fit(tmp_path, "--trainer.max_steps", "2", "--model.weight_decay", "0.1",
                   "--model.weight_decay_full_at", "0.02")
    rec = simulate(SinglePendulum(), 6.0, noise=0.01, seed=0)
    sigma_rel = stream_calibration(rec).sigma_rel
    assert 0.008 < sigma_rel < 0.012
    assert metrics["weight_decay"] == pytest.approx(0.1 * (sigma_rel / 0.02) ** 2, rel=1e-12)
    with pytest.raises(ValueError, match="weight_decay_full_at must be positive"):
        _fit(tmp_path, "--model.weight_decay_full_at", "0")


def test_the_linear_option_reaches_the_baseline_field(tmp_path):
    metrics = _fit(tmp_path, "--trainer.max_steps", "3", "--model.linear", "true")
    assert metrics["updates"] == 3
    module, meta = load_field(tmp_path)
    assert meta["linear"] is True and meta["num_parameters"] == 354 + 4


def test_double_pendulum_config_runs(tmp_path):
    metrics = _fit(tmp_path, "--data.duration", "4", "--trainer.max_steps", "3",
                   config="configs/baseline_double_pendulum_case_a.yaml")
    assert metrics["plant"] == "DoublePendulum" and metrics["updates"] == 3
    assert len(metrics["c_hat_channels"]) == 2


def test_bad_data_settings_fail_with_a_clear_message(tmp_path):
    with pytest.raises(ValueError, match="must divide the stream rate"):
        _fit(tmp_path, "--data.rate", "300")


def test_the_initial_field_is_jet_matchings_for_the_same_seed():
    system = SinglePendulum()
    rec = simulate(system, 4.0, noise=0.01, seed=5)
    field = initial_field(system, "A", rec, 5)
    ref = HybridField.from_seed(system.known_field("A"), 5)
    cal = calibrate(torch.as_tensor(rec.y[:3000]), 1000.0, torch.as_tensor(rec.segment[:3000]))
    for p, q in zip(field.parameters_list(), ref.parameters_list()):
        assert torch.equal(p, q)
    assert torch.equal(field.in_scale, cal.x_rms) and torch.equal(field.out_scale, cal.s1)


class ExplosiveModelPendulum(SinglePendulum):
    """The single pendulum whose known model blows up (x' = 10 x^2 within 0.1 s for x0 = 1.2)."""

    def build_known_field(self, case):
        return Explosive(gain=10.0)


def test_a_run_whose_rollouts_all_diverge_fails_at_the_iteration_limit_without_a_model(tmp_path):
    dm = ShootingDataModule(ExplosiveModelPendulum(), duration=4.0, steps=40, n_windows=4, seed=0)
    model = ShootingModule()
    trainer = L.Trainer(max_steps=6, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=tmp_path)
    (tmp_path / "field.pt").write_text("an earlier run's model")
    with pytest.raises(RuntimeError, match="0 accepted iterations: all 6 were rejected"):
        trainer.fit(model, datamodule=dm)
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["status"] == "failed" and "0 accepted iterations" in metrics["reason"]
    assert metrics["updates"] == 0 and metrics["skipped_steps"] == 6
    assert not (tmp_path / "field.pt").exists() and not (tmp_path / "field.json").exists()
    assert all(bool(torch.isfinite(p).all()) for p in model.field.parameters_list())



class LrRecorder(ShootingModule):
    """Records the learning rate of the network each iteration uses."""

    def training_step(self, batch, batch_idx):
        self.__dict__.setdefault("lrs", []).append(self.adam.optimizer.param_groups[0]["lr"])
        return super().training_step(batch, batch_idx)


def _fit_baseline(root, max_steps, ckpt_path=None):
    dm = ShootingDataModule(SinglePendulum(), duration=4.0, steps=5, n_windows=8, seed=2)
    model = LrRecorder()
    trainer = L.Trainer(max_steps=max_steps, logger=False, enable_progress_bar=False, enable_model_summary=False,
                        default_root_dir=root, num_sanity_val_steps=0, limit_val_batches=0,
                        callbacks=[PeriodicCheckpoint(every_n_updates=10, dirpath=root / "ckpt", save_top_k=-1)])
    trainer.fit(model, datamodule=dm, ckpt_path=ckpt_path)
    return model


def test_a_resumed_run_equals_an_uninterrupted_one_and_extends_on_the_new_schedule(tmp_path):
    full = _fit_baseline(tmp_path / "full", 30)
    resumed = _fit_baseline(tmp_path / "resumed", 30, ckpt_path=tmp_path / "full" / "ckpt" / "step=10.ckpt")
    for p, q in zip([*full.field.parameters_list(), full.objective.shooting_states],
                    [*resumed.field.parameters_list(), resumed.objective.shooting_states]):
        assert torch.equal(p, q)
    assert resumed.lrs == full.lrs[10:]
    assert json.loads((tmp_path / "full" / "metrics.json").read_text())["final_loss"] == \
        json.loads((tmp_path / "resumed" / "metrics.json").read_text())["final_loss"]
    # extending the finished 30-iteration run to 50: from iteration 30 on, the 50-iteration schedule
    extended = _fit_baseline(tmp_path / "extended", 50, ckpt_path=tmp_path / "full" / "ckpt" / "step=30.ckpt")
    assert extended.trainer.global_step == 50 and len(extended.lrs) == 20
    lr, final = extended.lr, extended.lr_final
    cosine = [final + (lr - final) * 0.5 * (1.0 + math.cos(math.pi * k / 50)) for k in range(30, 50)]
    assert extended.lrs == pytest.approx(cosine, rel=1e-12, abs=0)
    with pytest.raises(ValueError, match="max_steps = 30 does not exceed the 30 iterations the checkpoint has made"):
        _fit_baseline(tmp_path / "again", 30, ckpt_path=tmp_path / "full" / "ckpt" / "step=30.ckpt")

"""PEMModule: one-process smoke run with TensorBoard and run files; 2-process DDP (gloo) equals 1 process."""
import json

import lightning as L
import pytest
import torch
from lightning.pytorch.loggers import TensorBoardLogger
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from mhe import SingleTrackVehicle
from mhe.racing import perturbed_values
from mhe.training import PEMModule, RacingWindows


def _module(tmp_path, **options):
    physics = SingleTrackVehicle(perturbed_values(0.1, seed=2, fixed={"Er": 0.0}))
    return PEMModule(physics=physics, measured=[0, 2], dt=0.02, process_std=[0.005, 0.005, 0.1],
                     measurement_std=[0.0005, 0.002], arrival_mean=[1.5, 0.0, 0.0], arrival_std=[1.0, 0.3, 3.0],
                     lr=0.02, lr_min=0.002, build_dir=str(tmp_path / "build"), **options)


def _data():
    return RacingWindows(steps=120, horizon=6, stride=10, windows=5)  # odd: the DDP sampler pads


def _fit(tmp_path, name, options=None, **trainer):
    root = tmp_path / name
    t = L.Trainer(max_steps=3, max_epochs=-1, accelerator="cpu", default_root_dir=str(root), enable_checkpointing=False,
                  logger=TensorBoardLogger(str(root), name="tb"), log_every_n_steps=1, enable_progress_bar=False,
                  enable_model_summary=False, **trainer)
    t.fit(_module(tmp_path, **(options or {})), datamodule=_data())
    return root, json.loads((root / "metrics.json").read_text())


def test_one_process_run_logs_to_tensorboard_and_writes_run_files(tmp_path):
    root, metrics = _fit(tmp_path, "one", devices=1)
    assert metrics["updates"] == 3 and metrics["failed_windows_total"] == 0 and metrics["e_field"] is None
    assert metrics["failed_trial_windows_total"] == 0
    assert set(metrics["rel_errors"]) == set(SingleTrackVehicle().params.free_names)
    events = next(root.glob("tb/version_0/events.*"))
    acc = EventAccumulator(str(events))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert {"train/J", "param/Bf", "param/mean_rel_error", "solver/ipopt_iterations", "train/n_failed"} <= set(tags)
    field = torch.jit.load(str(root / "field.pt"))
    out = field(torch.tensor([[1.5, 0.0, 0.5]], dtype=torch.float64), torch.tensor([[0.1, 0.4]], dtype=torch.float64))
    assert out.shape == (1, 3) and bool(torch.isfinite(out).all())
    assert json.loads((root / "field.json").read_text())["format"] == "torch-ude-mhe-model"


@pytest.mark.parametrize("optimizer", ["adam", "gauss_newton"])
def test_two_process_ddp_equals_one_process(optimizer, tmp_path):
    _, one = _fit(tmp_path, "one", {"optimizer": optimizer}, devices=1)
    _, two = _fit(tmp_path, "two", {"optimizer": optimizer}, devices=2, strategy="ddp_spawn")
    assert two["updates"] == one["updates"] == 3
    assert two["failed_trial_windows_total"] == one["failed_trial_windows_total"]
    assert abs(two["J_final"] - one["J_final"]) <= 1e-9 * abs(one["J_final"])
    for name, value in one["parameters"].items():
        assert abs(two["parameters"][name] - value) <= 1e-9 * max(abs(value), 1e-12), name


def test_checkpoint_keeps_the_solver_state_and_the_counters(tmp_path):
    saved = _module(tmp_path, optimizer="gauss_newton")
    saved.totals.update(failed=3, failed_trials=5, skipped=1, updates=7)
    saved.lm.mu, saved.losses = 0.25, [2.0, 1.5]
    checkpoint: dict = {}
    saved.on_save_checkpoint(checkpoint)
    resumed = _module(tmp_path, optimizer="gauss_newton")
    resumed.on_load_checkpoint(checkpoint)
    assert resumed.totals == {"failed": 3, "failed_trials": 5, "skipped": 1, "updates": 7}
    assert resumed.lm.mu == 0.25 and resumed.losses == [2.0, 1.5]

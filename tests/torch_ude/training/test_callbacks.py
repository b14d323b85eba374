"""Callbacks: periodic checkpoints that follow the update count, resuming a killed run, resident memory."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import lightning as L
import pytest
import torch

from torch_ude.cli import main
from torch_ude.stream import StreamSettings
from torch_ude.systems import SinglePendulum
from torch_ude.training import JetMatchingModule, PeriodicCheckpoint, ResidentMemory, StreamDataModule

SHORT = ["--data.duration", "12", "--model.stream.capacity", "512", "--model.stream.calibration_s", "1.0",
         "--trainer.enable_progress_bar", "false", "--trainer.logger", "false"]


def test_checkpoints_follow_the_update_count_through_replay_jumps(tmp_path):
    # replay makes 25 updates per training step, so the count jumps over most multiples of 60
    dm = StreamDataModule(SinglePendulum(), duration=4.0, noise=0.01, seed=1)
    model = JetMatchingModule(stream=StreamSettings(capacity=256, calibration_s=1.0))
    periodic = PeriodicCheckpoint(every_n_updates=60, dirpath=tmp_path / "ckpt", save_top_k=-1)
    trainer = L.Trainer(max_steps=400, logger=False, enable_progress_bar=False, enable_model_summary=False,
                        default_root_dir=tmp_path, num_sanity_val_steps=0, limit_val_batches=0,
                        callbacks=[periodic])
    trainer.fit(model, dm)
    steps = sorted(int(p.stem.split("=")[1]) for p in (tmp_path / "ckpt").glob("step=*.ckpt"))
    # one checkpoint in each period (the first update count at or after its multiple), one at the end
    assert [s // 60 for s in steps[:-1]] == list(range(1, 400 // 60 + 1)) and steps[-1] == 400
    assert any(s % 60 for s in steps)  # ModelCheckpoint(every_n_train_steps=60) would have missed those
    assert (tmp_path / "ckpt" / "last.ckpt").is_file()
    with pytest.raises(ValueError, match="every_n_updates must be an integer >= 1"):
        PeriodicCheckpoint(every_n_updates=0)


def _weights(cli):
    model = cli.model
    return [p.detach().clone() for p in (*model.field.parameters(), *model.averaged_field().parameters())]


def test_a_run_killed_after_a_periodic_checkpoint_resumes_to_the_uninterrupted_weights(tmp_path):
    callbacks = tmp_path / "checkpoint_every_100.yaml"
    callbacks.write_text("trainer:\n  callbacks:\n    - class_path: torch_ude.training.PeriodicCheckpoint\n"
                         "      init_args:\n        every_n_updates: 100\n")
    args = ["fit", "--config", "configs/pendulum_case_a.yaml", "--config", str(callbacks), *SHORT,
            "--trainer.max_steps", "3000"]
    killed = tmp_path / "killed"
    killed.mkdir()
    (killed / "field.pt").write_text("an earlier run's model")  # must not survive as if it were this run's
    script = Path(sys.executable).with_name("torch-ude")
    proc = subprocess.Popen([str(script), *args, "--trainer.default_root_dir", str(killed)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    last = killed / "checkpoints" / "last.ckpt"
    deadline = time.monotonic() + 300
    while not last.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL, "the run ended before it was killed; lengthen it"
    assert last.is_file()
    assert json.loads((killed / "metrics.json").read_text())["status"] == "running"
    assert not (killed / "field.pt").exists()

    resumed = main([*args, "--trainer.default_root_dir", str(killed), "--ckpt_path", str(last)])
    full = main([*args, "--trainer.default_root_dir", str(tmp_path / "full")])
    assert resumed.model.stats["updates"] == full.model.stats["updates"] == 3000
    assert all(torch.equal(p, q) for p, q in zip(_weights(resumed), _weights(full)))
    metrics = json.loads((killed / "metrics.json").read_text())
    assert metrics["status"] == "finished" and (killed / "field.pt").is_file()
    assert metrics["e_field"] == json.loads((tmp_path / "full" / "metrics.json").read_text())["e_field"]


def test_resident_memory_samples_the_stream_time_memory_and_updates(tmp_path):
    dm = StreamDataModule(SinglePendulum(), duration=4.0, noise=0.01, seed=1)
    model = JetMatchingModule(stream=StreamSettings(capacity=256, calibration_s=1.0), replay=False)
    memory = ResidentMemory(every_n_batches=2)  # every 2 s of the stream (a training step reads 1 s)
    trainer = L.Trainer(max_steps=100, logger=False, enable_progress_bar=False, enable_model_summary=False,
                        enable_checkpointing=False, default_root_dir=tmp_path, num_sanity_val_steps=0,
                        limit_val_batches=0, callbacks=[memory])
    trainer.fit(model, dm)
    assert [s["stream_s"] for s in memory.samples] == [0.999, 2.999, 3.999]  # the last: the step the stream ended
    assert all(s["rss_mb"] > 10 for s in memory.samples)
    updates = [s["updates"] for s in memory.samples]
    assert updates[0] == 0 and updates == sorted(updates) and updates[-1] > 0
    with pytest.raises(ValueError, match="every_n_batches must be an integer >= 1"):
        ResidentMemory(every_n_batches=0)

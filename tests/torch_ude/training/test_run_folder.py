"""The run folder of ``torch-ude fit`` (issue 36, items 1 and 2): periodic checkpoints by default, one run per
folder, and a killed run (SIGKILL) resumed by its own command."""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import torch_ude
from torch_ude.cli import main
from torch_ude.export import same_weights
from torch_ude.training import PeriodicCheckpoint
from torch_ude.training.run_folder import LOCK_FILE, RunFolderLock, settings_differ
from tests.torch_ude.helpers import forced_pendulum_log, write_csv
from tests.torch_ude.training.killer import ARMED

REPO = Path(torch_ude.__file__).resolve().parents[1]
SCRIPT = Path(sys.executable).with_name("torch-ude")
SHORT = ["--config", "configs/pendulum_case_a.yaml", "--data.duration", "12", "--model.stream.capacity", "512",
         "--model.stream.calibration_s", "1.0", "--trainer.max_steps", "1300", "--trainer.enable_progress_bar", "false",
         "--trainer.callbacks.init_args.every_n_updates", "500"]
KILL = ["--trainer.callbacks+", "tests.torch_ude.training.killer.KillAt", "--trainer.callbacks.step", "1100"]


def _fit(*args, expect=0):
    """``torch-ude fit ARGS`` in a fresh process from the repository; its exit status and stderr. `KillAt` is armed
    when the process is expected to die by SIGKILL."""
    env = dict(os.environ, PYTHONPATH=str(REPO), TORCH_UDE_TRACEBACK="", **{ARMED: str(int(expect == -signal.SIGKILL))})
    proc = subprocess.run([str(SCRIPT), "fit", *map(str, args)], capture_output=True, text=True, cwd=REPO, env=env)
    assert proc.returncode == expect, proc.stderr[-3000:]
    return proc.stderr


def _notes(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("torch-ude:")]


def _status(folder: Path) -> str:
    return json.loads((folder / "metrics.json").read_text())["status"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("whole")
    _fit(*SHORT, "--trainer.default_root_dir", folder)
    return folder


def test_the_command_of_a_killed_run_resumes_it_to_the_uninterrupted_weights(tmp_path, uninterrupted):
    _fit(*SHORT, *KILL, "--trainer.default_root_dir", tmp_path, expect=-signal.SIGKILL)
    assert _status(tmp_path) == "running" and not (tmp_path / "field.pt").exists()
    err = _fit(*SHORT, *KILL, "--trainer.default_root_dir", tmp_path)
    assert _notes(err) == [f"torch-ude: the run in {tmp_path} did not finish (its metrics.json says \"running\" and no "
                           f"process holds the folder): resuming from {tmp_path}/tensorboard/version_0/checkpoints/"
                           f"last.ckpt at update 1012; add --fresh to start over instead."]
    assert _status(tmp_path) == "finished" and same_weights(tmp_path, uninterrupted)


def test_fresh_starts_a_killed_run_over_and_other_settings_are_refused(tmp_path, uninterrupted):
    _fit(*SHORT, *KILL, "--trainer.default_root_dir", tmp_path, expect=-signal.SIGKILL)
    err = _fit(*SHORT, *KILL, "--trainer.default_root_dir", tmp_path, "--model.lr", "0.001", expect=2)
    assert _notes(err)[0] == (
        f"torch-ude: error: the run in {tmp_path} did not finish (its metrics.json says \"running\" and no process "
        f"holds the folder), but this command's settings differ from that run's in model.init_args.lr (its settings "
        f"are in {tmp_path}/tensorboard/version_0/config.yaml); rerun its command to resume it, add --fresh to start "
        f"over in this folder, or give this run its own folder with --trainer.default_root_dir.")
    err = _fit(*SHORT, "--trainer.default_root_dir", tmp_path, "--fresh")
    assert _notes(err)[0].startswith(f"torch-ude: the run in {tmp_path} did not finish (its metrics.json says "
                                     f"\"running\" and no process holds the folder); --fresh: starting over (its "
                                     f"checkpoints stay, the newest is ")
    assert _status(tmp_path) == "finished" and same_weights(tmp_path, uninterrupted)


def test_a_run_killed_before_its_first_checkpoint_does_not_resume_an_earlier_finished_run(tmp_path, uninterrupted):
    _fit(*SHORT, "--trainer.default_root_dir", tmp_path)  # a finished run: its last.ckpt stays in the folder
    early = [*KILL[:-1], "300"]
    _fit(*SHORT, *early, "--trainer.default_root_dir", tmp_path, expect=-signal.SIGKILL)
    err = _fit(*SHORT, *early, "--trainer.default_root_dir", tmp_path)
    assert _notes(err) == [f"torch-ude: the run in {tmp_path} did not finish (its metrics.json says \"running\" and "
                           f"no process holds the folder) and left no complete checkpoint: starting over."]
    assert _status(tmp_path) == "finished" and same_weights(tmp_path, uninterrupted)


def test_a_run_killed_twice_resumes_where_it_stood(tmp_path, uninterrupted):
    """Killed at update 1100 (checkpoint at 1012), resumed and killed again at 1300 before its next checkpoint
    (every 500: 1500): the third run resumes from 1012, the checkpoint the second one had resumed from."""
    longer = [*SHORT, "--trainer.max_steps", "1600"]
    _fit(*longer, *KILL, "--trainer.default_root_dir", tmp_path, expect=-signal.SIGKILL)
    later = [*KILL[:-1], "1300"]
    _fit(*longer, *later, "--trainer.default_root_dir", tmp_path / "x", expect=0)  # (a whole run to compare with)
    _fit(*longer, *later, "--trainer.default_root_dir", tmp_path, expect=-signal.SIGKILL)
    err = _fit(*longer, *later, "--trainer.default_root_dir", tmp_path)
    assert f"resuming from {tmp_path}/tensorboard/version_0/checkpoints/last.ckpt at update 1012;" in _notes(err)[0]
    assert _status(tmp_path) == "finished" and same_weights(tmp_path, tmp_path / "x")


def _holder(folder: Path) -> subprocess.Popen:
    """A process that holds the folder's lock as a running fit does, until it is killed."""
    code = ("import sys, time; from torch_ude.training.run_folder import RunFolderLock; "
            "RunFolderLock(sys.argv[1]).acquire('torch-ude fit (test)'); print('held', flush=True); time.sleep(120)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(folder)], stdout=subprocess.PIPE, text=True, cwd=REPO)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_folder_in_use_is_refused_in_one_line_and_free_again_when_its_run_is_killed(tmp_path):
    holder = _holder(tmp_path)
    try:
        err = _fit(*SHORT, "--trainer.default_root_dir", tmp_path, expect=2)
        notes = _notes(err)
        assert len(notes) == 2 and notes[0].startswith(
            f"torch-ude: error: the run folder {tmp_path} is in use by another torch-ude run (process {holder.pid} on ")
        assert notes[0].endswith("; wait for it to end, or give this run its own folder with "
                                 "--trainer.default_root_dir.")
        assert not (tmp_path / "metrics.json").exists()  # the refused run touched nothing
    finally:
        holder.kill()
        holder.wait()
    _fit(*SHORT, "--trainer.default_root_dir", tmp_path)  # the lock went with the killed process
    assert _status(tmp_path) == "finished" and (tmp_path / LOCK_FILE).exists()


def test_two_locks_on_one_folder_exclude_each_other_until_released(tmp_path):
    first = RunFolderLock(tmp_path).acquire("first")
    with pytest.raises(RuntimeError, match=rf"^the run folder {tmp_path} is in use by another torch-ude run \(process "
                                           rf"{os.getpid()} on .*, started .*\); wait for it to end"):
        RunFolderLock(tmp_path).acquire("second")
    first.release()
    RunFolderLock(tmp_path).acquire("third").release()


def test_a_killed_real_log_run_left_a_checkpoint_and_resumes(tmp_path):
    """A recorded-log config with no checkpoint settings at all (as every real-log config was, with
    ``enable_checkpointing: false``): the CLI checkpoints every 1000 updates by itself."""
    logs = []
    for seed in (0, 1):
        write_csv(tmp_path / f"log{seed}.csv", forced_pendulum_log(duration=12.0, fs=250.0, noise=2e-3, jitter=0.05,
                                                                    seed=seed))
        logs.append(str(tmp_path / f"log{seed}.csv"))
    config = {"seed_everything": 0,
              "trainer": {"max_steps": 1300, "accelerator": "cpu", "devices": 1, "logger": False,
                          "enable_progress_bar": False, "num_sanity_val_steps": 0},
              "model": {"class_path": "torch_ude.training.JetMatchingModule",
                        "init_args": {"stream": {"calibration_s": 3.0, "capacity": 1024}}},
              "data": {"class_path": "torch_ude.training.RecordedDataModule",
                       "init_args": {"known": {"class_path": "torch_ude.systems.TorquePendulumModel"}, "files": logs,
                                     "fs": 250.0, "time": "time", "states": ["position", "velocity"],
                                     "inputs": ["torque"]}}}
    (tmp_path / "logs.yaml").write_text(yaml.safe_dump(config))
    run, whole = tmp_path / "run", tmp_path / "whole"
    _fit("--config", tmp_path / "logs.yaml", "--trainer.default_root_dir", whole)
    kill = ["--trainer.callbacks+", "tests.torch_ude.training.killer.KillAt", "--trainer.callbacks.step", "1100"]
    _fit("--config", tmp_path / "logs.yaml", "--trainer.default_root_dir", run, *kill, expect=-signal.SIGKILL)
    names = sorted(p.name for p in run.rglob("*.ckpt"))
    assert len(names) == 2 and names[0] == "last.ckpt" and names[1].startswith("step=")
    crossed = int(names[1].removeprefix("step=").removesuffix(".ckpt"))
    assert 1000 <= crossed < 1100  # the checkpoint after the replay chunk that crossed 1000 updates, before the kill
    err = _fit("--config", tmp_path / "logs.yaml", "--trainer.default_root_dir", run, *kill)
    assert "resuming from" in _notes(err)[0] and f"at update {crossed};" in _notes(err)[0]
    assert _status(run) == "finished" and same_weights(run, whole)


def test_every_fit_checkpoints_periodically_unless_told_not_to(tmp_path):
    config = yaml.safe_load((REPO / "configs" / "dfki_pendulum.yaml").read_text())
    assert "enable_checkpointing" not in config["trainer"] and "callbacks" not in config["trainer"]
    plain = yaml.safe_load((REPO / "configs" / "pendulum_case_a.yaml").read_text())
    del plain["trainer"]["callbacks"], plain["trainer"]["enable_checkpointing"]
    (tmp_path / "plain.yaml").write_text(yaml.safe_dump(plain))
    cli = main(["--config", str(tmp_path / "plain.yaml"), "--trainer.default_root_dir", str(tmp_path)], run=False)
    (callback,) = cli.trainer.checkpoint_callbacks
    assert type(callback) is PeriodicCheckpoint and callback.every == 1000
    err = _fit(*SHORT, "--trainer.default_root_dir", tmp_path / "off", "--trainer.enable_checkpointing", "false",
               "--trainer.callbacks", "[]", "--trainer.max_steps", "100")
    assert ("torch-ude: trainer.enable_checkpointing is false: this run saves no checkpoint, so a killed run cannot "
            "resume; drop that setting to checkpoint periodically.") in _notes(err)
    assert not list((tmp_path / "off").rglob("*.ckpt"))


def test_settings_differ_names_every_changed_key_but_the_resumable_ones():
    saved = {"model": {"init_args": {"lr": 0.005, "stream": {"m": None}}}, "trainer": {"max_steps": 100},
             "ckpt_path": None}
    same = {"model": {"init_args": {"lr": 0.005, "stream": {"m": None}}}, "trainer": {"max_steps": 200},
            "ckpt_path": "x.ckpt", "fresh": False}
    assert settings_differ(saved, same) == []
    other = {"model": {"init_args": {"lr": 0.001, "stream": {"m": 5}}}, "trainer": {"max_steps": 100}}
    assert settings_differ(saved, other) == ["model.init_args.lr", "model.init_args.stream.m"]

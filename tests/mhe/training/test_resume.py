"""A PEM-MHE run killed with SIGKILL is resumed by its own command and takes the iterates of an uninterrupted run
(issue 36, item 1): ``torch-ude fit`` checkpoints after every iteration (the iterate, the loop's optimizer, damping,
counters and warm starts, the arrival cost) and the rerun command resumes from the newest checkpoint."""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import torch

from mhe.training.resume import restore_warm_state, warm_state
from tests.torch_ude.training.killer import ARMED

REPO = Path(__file__).resolve().parents[3]
SCRIPT = Path(sys.executable).with_name("torch-ude")
TINY = ["--config", "configs/mhe_racing_physics_gn.yaml", "--trainer.enable_progress_bar", "false",
        "--trainer.logger", "false", "--data.problem.recording.init_args.steps", "120", "--data.problem.windows", "5",
        "--data.problem.mhe.horizon", "6", "--data.problem.arrival.box", "null", "--trainer.max_steps", "4"]


def _fit(root: Path, build: Path, *extra: str, expect: int = 0) -> str:
    env = dict(os.environ, PYTHONPATH=str(REPO), TORCH_UDE_TRACEBACK="", **{ARMED: str(int(expect == -signal.SIGKILL))})
    proc = subprocess.run([str(SCRIPT), "fit", *TINY, "--trainer.default_root_dir", str(root),
                           "--model.solver.build_dir", str(build), *extra], capture_output=True, text=True, cwd=REPO,
                          env=env)
    assert proc.returncode == expect, proc.stderr[-3000:]
    return proc.stderr


def test_a_killed_pem_run_resumes_to_the_iterates_of_an_uninterrupted_one(tmp_path):
    build = tmp_path / "build"
    _fit(tmp_path / "whole", build)
    kill = ["--trainer.callbacks+", "tests.torch_ude.training.killer.KillAt", "--trainer.callbacks.step", "3"]
    _fit(tmp_path / "run", build, *kill, expect=-signal.SIGKILL)
    run = tmp_path / "run"
    assert json.loads((run / "metrics.json").read_text())["status"] == "running"
    assert sorted(p.name for p in run.rglob("*.ckpt")) == ["last.ckpt", "step=2.ckpt"]  # one per iteration
    err = _fit(run, build, *kill)
    assert (f"torch-ude: the run in {run} did not finish (its metrics.json says \"running\" and no process holds the "
            f"folder): resuming from {run}/checkpoints/last.ckpt at update 2; add --fresh to start over instead.") in err
    whole, resumed = (json.loads((tmp_path / d / "metrics.json").read_text()) for d in ("whole", "run"))
    assert resumed["status"] == "finished" and resumed["steps"] == whole["steps"] == 4
    assert resumed["parameters"] == whole["parameters"] and resumed["J_final"] == whole["J_final"]


def test_the_warm_starts_go_through_a_checkpoint_unchanged(tmp_path):
    class Loop:
        starts = {3: (torch.arange(4.0).numpy(), torch.ones(2).numpy()), 5: None}
        _solved = None

    saved = warm_state(Loop)
    torch.save({"warm": saved}, tmp_path / "w.pt")
    loaded = torch.load(tmp_path / "w.pt", weights_only=True)["warm"]  # (a checkpoint loads with weights_only)
    again = type("Again", (), {"starts": {}, "_solved": "stale"})
    restore_warm_state(again, loaded)
    assert again.starts.keys() == {3, 5} and again.starts[5] is None and again._solved is None
    assert all((a == b).all() for a, b in zip(again.starts[3], Loop.starts[3]))

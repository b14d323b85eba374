"""The training-side residual check (benchmarks.mhe.iac_residual_check): one run per seed written."""
import json
from pathlib import Path

from benchmarks.mhe.iac_residual_check import main
from tests.mhe.datasets import data_file

ROOT = Path(__file__).resolve().parents[3]
DATA = "iac/LVMS_23_01_04_B.csv"
GRAY_CONFIG = "configs/mhe_iac_gray.yaml"
TINY = ["--data.problem.recording.init_args.part", "[0.0, 0.05]", "--trainer.logger", "false"]


def test_main_writes_one_run_per_seed(tmp_path, monkeypatch):
    data_file(DATA)
    monkeypatch.chdir(ROOT)
    out = tmp_path / "check.json"
    main(["--config", GRAY_CONFIG, "--seeds", "0", "1", "--steps", "5", "--out", str(out), *TINY])
    saved = json.loads(out.read_text())
    assert [r["seed"] for r in saved["runs"]] == [0, 1] and saved["overrides"] == TINY
    assert saved["runs"][0]["channels"] == [0, 1, 2]

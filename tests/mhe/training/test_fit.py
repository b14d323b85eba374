"""A config's PEM-MHE run in this process (`mhe.training.fit_pem`) and the held-out choice of its outer loop
(`mhe.training.held_out_curve`), on the leaking tank."""
import json

import pytest

from mhe import OuterSettings, SolverSettings
from mhe.training import PEMExperiment, fit_pem, held_out_curve
from tests.mhe.helpers import leak_problem


def experiment(tmp_path, max_steps: int, windows: int | None = None) -> PEMExperiment:
    """The physics-only leaking tank (``a`` started at 0.6, the plant's 0.5) under Gauss-Newton."""
    problem = leak_problem(inflow=0.0, noise=0.01, a=0.6).replace(residual=None, windows=windows)
    return PEMExperiment(problem, OuterSettings(optimizer="gauss_newton"),
                         SolverSettings(build_dir=str(tmp_path / "build")), max_steps)


def test_a_fit_writes_the_run_files_and_hands_back_what_a_table_needs(tmp_path, capsys):
    exp = experiment(tmp_path, 2)
    out = fit_pem(exp, tmp_path / "run", 1, lambda est: {"a": float(est.model.physics.params()["a"])})
    result = out["result"]
    assert [h["iteration"] for h in out["history"]] == list(range(result.counters.steps))
    assert out["history"][-1]["a"] == pytest.approx(out["values"]["a"]) and abs(out["values"]["a"] - 0.5) < 0.05
    assert out["row"]["steps"] == result.counters.steps and out["row"]["training_s"] == result.wall_s
    assert out["row"]["arrival"] == out["arrival"] and out["residual"] is None and "noise_fit" not in out["row"]
    assert len(out["warm"]) == len(exp.problem.windows) and all(w is not None for w in out["warm"])
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["status"] == "finished"
    assert "   0 J=" in capsys.readouterr().out  # a progress line per iteration with log_every=1


def test_held_out_selection_fits_all_but_every_kth_block_and_scores_the_held_out_blocks(tmp_path):
    sel = held_out_curve(experiment(tmp_path, 2, windows=5), every_k=2, block=2, starts=1, every=1, log_every=1)
    # 5 windows in blocks of 2: blocks 0 (windows 0, 1), 1 (2, 3), 2 (4); every 2nd block (windows 2, 3) held out
    assert sel["fit_windows"] == 3 and sel["held_out_windows"] == 2
    curve = sel["curve"]
    assert [c["iteration"] for c in curve] == [-1, 0, 1] and [h["iteration"] for h in sel["history"]] == [0, 1]
    assert all(c["held_out"] > 0 and c["held_out_failed"] == 0 for c in curve)
    assert curve[1]["held_out"] != curve[0]["held_out"]  # the held-out error follows the fitted alpha


def test_held_out_selection_needs_two_blocks_per_cycle_and_a_block_of_one_window_or_more(tmp_path):
    exp = experiment(tmp_path, 1, windows=5)
    with pytest.raises(ValueError, match=r"every_k \(every k-th block held out\) must be >= 2"):
        held_out_curve(exp, every_k=1, block=2, starts=1, every=1, log_every=1)
    with pytest.raises(ValueError, match=r"block \(consecutive windows per block\) must be >= 1"):
        held_out_curve(exp, every_k=2, block=0, starts=1, every=1, log_every=1)

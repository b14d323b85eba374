"""``python -m benchmarks.baseline.gradcheck --store``: the run's worst errors per K go into its summary in the format
RESULTS.md shows, and the summary's text stays (issue 34, item 3)."""
import json
import shutil

import pytest

from benchmarks import results_md
from benchmarks.baseline import gradcheck


@pytest.fixture
def summaries(tmp_path, monkeypatch):
    folder = tmp_path / "summaries"
    shutil.copytree(results_md.SUMMARIES, folder)
    monkeypatch.chdir(tmp_path)  # results/baseline_gradcheck is written here
    monkeypatch.setattr(gradcheck, "SUMMARIES", folder)
    return folder


def _row(plant, case, k, theta, states):
    return {"plant": plant, "case": case, "K": k, "theta_vs_complex_step": theta, "states_vs_complex_step": states}


def test_the_table_holds_the_worst_of_both_gradients_per_k():
    rows = [_row("single", "A", 3, 1e-16, 4e-15), _row("double", "C", 3, 2e-16, 1e-16),
            _row("single", "A", 1, 3e-16, 1e-16), _row("double", "C", 1, 1e-16, 2.04e-16)]
    table = gradcheck.table(rows)
    assert table["columns"] == ["K", "worst relative error vs complex step (4 gradients: 2 plants x 2 cases x "
                                     "theta/states)"]
    assert table["rows"] == [["1", "3.0e-16"], ["3", "4.0e-15"]]


def test_store_writes_the_run_s_table_and_keeps_the_text(summaries, capsys):
    before = json.loads((summaries / "baseline_gradcheck.json").read_text())
    gradcheck.main(["--steps", "1", "--windows", "1", "--store"])
    saved = json.loads((summaries.parent / "results" / "baseline_gradcheck" / "baseline_gradcheck.json").read_text())
    after = json.loads((summaries / "baseline_gradcheck.json").read_text())
    assert {k: v for k, v in after.items() if k != "tables"} == {k: v for k, v in before.items() if k != "tables"}
    assert after["tables"] == [gradcheck.table(saved["rows"])]
    (_, worst), = after["tables"][0]["rows"]
    assert len(saved["rows"]) == 4 and 0.0 < float(worst) < 1e-12  # the adjoint is exact to rounding
    assert "stored in" in capsys.readouterr().out


def test_without_store_the_summary_is_left_alone(summaries, monkeypatch, capsys):
    monkeypatch.setattr(gradcheck, "condition", lambda plant, case, k, n, seed: {
        **_row(plant, case, k, 1e-16, 1e-16), "theta_vs_autograd": 0.0, "states_vs_autograd": 0.0})
    before = (summaries / "baseline_gradcheck.json").read_text()
    gradcheck.main(["--steps", "1", "--windows", "1"])
    assert (summaries / "baseline_gradcheck.json").read_text() == before
    assert "stored in" not in capsys.readouterr().out

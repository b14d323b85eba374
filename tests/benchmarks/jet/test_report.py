"""``python -m benchmarks.jet.report --store``: the noise-sweep and ablation tables go into their summaries in the
format RESULTS.md shows, the summaries' text stays, and the page renders them (issue 34, item 3)."""
import json
import shutil

import pytest

from benchmarks import results_md
from benchmarks.jet import report


def _stats(mean, std, lo=None, hi=None):
    return {"mean": mean, "std": std, "min": mean if lo is None else lo, "max": mean if hi is None else hi}


@pytest.fixture
def tree(tmp_path, monkeypatch):
    results, summaries = tmp_path / "results", tmp_path / "summaries"
    shutil.copytree(results_md.SUMMARIES, summaries)
    runs = [{"noise": 0.01, "variant": "v2", "m": 34}, {"noise": 0.01, "variant": "v2", "m": 35}]
    v2 = {"e_field_visited": _stats(0.001234, 0.00021), "e_field": _stats(0.0025, 0.0004),
          "c_hat": _stats(0.399, 0.001, 0.3974, 0.40031)}
    v1 = {"e_field_visited": _stats(0.0165, 0.0009), "e_field": _stats(0.02, 0.004), "c_hat": _stats(0.38381, 0.01)}
    (results / "jet_noise_sweep").mkdir(parents=True)
    (results / "jet_noise_sweep" / "jet_noise_sweep.json").write_text(json.dumps(
        {"runs": runs, "summary": {"v2@0.01": v2, "v1@0.01": v1}}))
    (results / "jet_ablation").mkdir()
    (results / "jet_ablation" / "jet_ablation.json").write_text(json.dumps(
        {"table": [{"name": "v1", "e_field_visited": _stats(0.0165, 0.0009), "e_field": _stats(0.0244, 0.004),
                    "c_hat": _stats(0.38384, 0.01)}]}))
    monkeypatch.setattr(report, "RESULTS", results)
    monkeypatch.setattr(report, "SUMMARIES", summaries)
    return summaries


def test_store_writes_the_tables_as_the_page_shows_them_and_keeps_the_text(tree, capsys):
    before = json.loads((tree / "jet_noise_sweep.json").read_text())
    report.main(["--store"])
    after = json.loads((tree / "jet_noise_sweep.json").read_text())
    assert {k: v for k, v in after.items() if k != "tables"} == {k: v for k, v in before.items() if k != "tables"}
    (table,) = after["tables"]
    assert table["columns"] == before["tables"][0]["columns"]  # the page's columns
    assert table["rows"] == [["1 %", "0.00123 +- 0.00021", "0.00250 +- 0.00040", "0.3974-0.4003", "34/35", "-",
                              "0.01650 +- 0.00090", "0.3838", "0.0022", "0.009"]]
    (ablation,) = json.loads((tree / "jet_ablation.json").read_text())["tables"]
    assert ablation["rows"] == [["v1", "0.01650 +- 0.00090", "0.02440 +- 0.00400", "0.3838"]]
    anchors = results_md.notebook_anchors((results_md.ROOT / results_md.NOTEBOOK).read_text())
    page = results_md.render(results_md.load_headline(tree), results_md.load_sections(tree), anchors)
    assert "| 1 % | 0.00123 +- 0.00021 |" in page
    assert "stored in" in capsys.readouterr().out


def test_without_store_the_summaries_are_left_alone(tree, capsys):
    before = {p.name: p.read_text() for p in tree.iterdir()}
    report.main([])
    assert {p.name: p.read_text() for p in tree.iterdir()} == before
    out = capsys.readouterr().out
    assert "| 1 % | 0.00123 +- 0.00021 |" in out and "stored in" not in out

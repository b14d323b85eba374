"""RESULTS.md is what its stored summaries give, and malformed summaries are refused by name."""
import json
import shutil

import pytest

from benchmarks import results_md


def test_the_committed_results_md_is_what_the_summaries_give():
    assert results_md.main(["--check"]) == 0


def test_results_md_stays_short_and_every_section_points_into_the_notebook():
    text = (results_md.ROOT / "RESULTS.md").read_text()
    assert len(text.splitlines()) <= 700
    sections = results_md.load_sections()
    assert len(sections) == text.count("](docs/results_notebook.md#")
    anchors = set(results_md.notebook_anchors((results_md.ROOT / results_md.NOTEBOOK).read_text()).values())
    for s in sections:
        assert results_md.notebook_anchors(f"## {s['details']}")[s["details"]] in anchors


@pytest.fixture
def folder(tmp_path):
    out = tmp_path / "summaries"
    shutil.copytree(results_md.SUMMARIES, out)
    return out


def _edit(path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("change, message", [
    (lambda d: d.pop("reading"), "missing key 'reading'"),
    (lambda d: d.update(extra=1), "unknown key 'extra'"),
    (lambda d: d.update(order="10"), "'order' must be a int"),
    (lambda d: d["tables"][0]["rows"][0].pop(), "row 0 must be"),
    (lambda d: d["tables"][0].update(note="x"), "table 0 is an object"),
    (lambda d: d.update(commands=[1]), "'commands' must be a list of strings"),
])
def test_a_malformed_summary_is_refused_by_file_and_key(folder, change, message):
    _edit(folder / "jet_noise_sweep.json", change)
    with pytest.raises(ValueError, match=message) as err:
        results_md.load_sections(folder)
    assert "jet_noise_sweep.json" in str(err.value)


def test_two_sections_with_one_order_and_a_details_heading_that_does_not_exist(folder):
    order = json.loads((folder / "jet_ablation.json").read_text())["order"]
    _edit(folder / "jet_noise_sweep.json", lambda d: d.update(order=order))
    with pytest.raises(ValueError, match=f"two summaries have order {order}"):
        results_md.load_sections(folder)
    _edit(folder / "jet_noise_sweep.json", lambda d: d.update(order=-1, details="No such heading"))
    with pytest.raises(ValueError, match="names no heading"):
        results_md.render(results_md.load_headline(folder), results_md.load_sections(folder),
                          results_md.notebook_anchors("# A page\n```\n# No such heading\n```\n"))


def test_a_headline_row_of_the_wrong_length_is_refused(folder):
    _edit(folder / "headline.json", lambda d: d["rows"][3].append("x"))
    with pytest.raises(ValueError, match="headline.json: row 3 must be 5 strings"):
        results_md.load_headline(folder)


def test_stored_tables_replace_the_tables_and_keep_the_text(folder, tmp_path):
    before = json.loads((folder / "jet_ablation.json").read_text())
    table = {"columns": ["step", "e_field"], "rows": [["v1", "0.0165"], ["v2", "0.0019"]], "caption": "rerun"}
    results_md.store_tables("jet_ablation", [table], folder)
    after = json.loads((folder / "jet_ablation.json").read_text())
    assert after["tables"] == [table]
    assert {k: v for k, v in after.items() if k != "tables"} == {k: v for k, v in before.items() if k != "tables"}
    out = tmp_path / "RESULTS.md"
    assert results_md.main(["--summaries", str(folder), "--out", str(out)]) == 0
    assert "| v2 | 0.0019 |" in out.read_text() and "rerun:" in out.read_text()
    assert results_md.main(["--summaries", str(results_md.SUMMARIES), "--out", str(out), "--check"]) == 1
    with pytest.raises(FileNotFoundError, match="no summary"):
        results_md.store_tables("no_such_benchmark", [table], folder)
    with pytest.raises(ValueError, match="row 0 must be 2 strings"):
        results_md.store_tables("jet_ablation", [{"columns": ["a", "b"], "rows": [["1"]]}], folder)

"""benchmarks.jet.timing: the 'before' tree of the side-by-side comparison and its options."""
import shutil
import subprocess
from pathlib import Path

import pytest

from benchmarks.jet import timing as jet_timing

ROOT = Path(__file__).resolve().parents[3]
needs_git = pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                               reason="needs git and the repository's history (a git clone)")


@needs_git
def test_export_tree_writes_the_commit_files(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    tree = jet_timing.export_tree("HEAD", tmp_path / "tree")
    head = subprocess.run(["git", "show", "HEAD:torch_ude/update.py"], capture_output=True, text=True, check=True)
    assert (tree / "torch_ude" / "update.py").read_text() == head.stdout
    assert (tree / jet_timing.CONFIG).is_file()


@needs_git
def test_the_before_commit_has_the_runner_it_needs(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    tree = jet_timing.export_tree(jet_timing.BEFORE, tmp_path / "before")
    assert "def main(args: list[str] | None = None" in (tree / "torch_ude" / "cli.py").read_text()  # RUN_ONE's
    assert (tree / jet_timing.CONFIG).is_file()


@needs_git
def test_export_tree_bad_commit(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(ValueError, match="cannot export commit 'no-such-commit'"):
        jet_timing.export_tree("no-such-commit", tmp_path / "x")


def test_repeats_must_be_positive():
    with pytest.raises(SystemExit):
        jet_timing.main(["compare", "--repeats", "0"])

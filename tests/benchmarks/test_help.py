"""Every benchmark runs as ``python -m benchmarks.SUBJECT.NAME`` with ``--help``, and none imports the tests.

Issue 34: benchmarks/ is grouped by subject (jet, baseline, mhe, device, real, peers); the top level holds only
the shared helper `benchmarks.common` and the page writer `benchmarks.results_md`.
"""
import importlib
import re
from pathlib import Path

import pytest

FOLDER = Path(__file__).resolve().parents[2] / "benchmarks"
SUBJECTS = ("jet", "baseline", "mhe", "device", "real", "peers")
TOP = ("common", "results_md")


def _dotted(path: Path) -> str:
    return ".".join(path.relative_to(FOLDER).with_suffix("").parts)


MODULES = sorted(_dotted(p) for p in FOLDER.rglob("*.py") if p.stem != "__init__" and "__pycache__" not in p.parts)
SCRIPTS = [m for m in MODULES
           if 'if __name__ == "__main__":' in (FOLDER / f"{m.replace('.', '/')}.py").read_text()]


def _source(name: str) -> str:
    return (FOLDER / f"{name.replace('.', '/')}.py").read_text()


def test_benchmarks_are_grouped_by_subject():
    folders = sorted(p.name for p in FOLDER.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert folders == sorted(SUBJECTS)
    assert sorted(m for m in MODULES if "." not in m) == sorted(TOP)
    for subject in SUBJECTS:
        assert (FOLDER / subject / "__init__.py").is_file(), subject
        assert any(m.startswith(f"{subject}.") for m in SCRIPTS), subject


@pytest.mark.parametrize("name", SCRIPTS)
def test_help(name, capsys):
    module = importlib.import_module(f"benchmarks.{name}")
    with pytest.raises(SystemExit) as done:
        module.main(["--help"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("usage:")
    assert f"python -m benchmarks.{name}" in module.__doc__  # the docstring shows the command


@pytest.mark.parametrize("name", MODULES)
def test_imports_no_tests_and_runs_one_way(name):
    source = _source(name)
    assert not re.search(r"^\s*(from|import) tests\b", source, re.M)
    assert "python benchmarks/" not in source
    importlib.import_module(f"benchmarks.{name}")


def _imports(name: str) -> set[str]:
    source = _source(name)
    found = set()
    for m in MODULES:
        package, _, leaf = m.rpartition(".")
        dotted = re.escape(m)
        if re.search(rf"(from benchmarks\.|import benchmarks\.){dotted}\b", source) or (
                package and re.search(rf"from benchmarks\.{re.escape(package)} import [^\n]*\b{leaf}\b", source)) or (
                not package and re.search(rf"from benchmarks import [^\n]*\b{leaf}\b", source)):
            found.add(m)
    return found - {name}


def test_the_import_scan_sees_the_shared_helper():
    """The scan the two tests below rely on finds ``from benchmarks.common import ...`` where a script has it."""
    scripts = [m for m in SCRIPTS if "from benchmarks.common import" in _source(m)]
    assert scripts and all("common" in _imports(m) for m in scripts)


def test_every_helper_module_is_used_by_a_script():
    """Modules without a command are helpers; each is imported by a script, directly or through another helper."""
    reached, todo = set(), list(SCRIPTS)
    while todo:
        for m in _imports(todo.pop()) - reached:
            reached.add(m)
            todo.append(m)
    helpers = set(MODULES) - set(SCRIPTS)
    assert helpers and helpers <= reached, sorted(helpers - reached)


def test_a_benchmark_imports_no_other_benchmark_but_the_shared_helpers():
    """Issue 34: what a script or a user needs lives in the packages; `benchmarks.common` is the one helper, and a
    benchmark that stores its tables calls `benchmarks.results_md.store_tables`."""
    shared = {"common", "results_md"}
    for name in MODULES:
        assert _imports(name) <= shared, name

"""Every benchmark runs as ``python -m benchmarks.NAME`` with ``--help``, and none imports the tests."""
import importlib
import re
from pathlib import Path

import pytest

FOLDER = Path(__file__).resolve().parents[2] / "benchmarks"
MODULES = sorted(p.stem for p in FOLDER.glob("*.py") if p.stem != "__init__")
SCRIPTS = [m for m in MODULES if 'if __name__ == "__main__":' in (FOLDER / f"{m}.py").read_text()]


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
    source = (FOLDER / f"{name}.py").read_text()
    assert not re.search(r"^\s*(from|import) tests\b", source, re.M)
    assert "python benchmarks/" not in source
    importlib.import_module(f"benchmarks.{name}")


def _imports(name: str) -> set[str]:
    source = (FOLDER / f"{name}.py").read_text()
    return {m for m in MODULES if re.search(rf"(from benchmarks\.|from \.|import benchmarks\.){m}\b", source)}


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
    """Issue 34: what a script or a user needs lives in the packages; `benchmarks.common` is the one helper."""
    shared = {"common"}
    for name in MODULES:
        assert _imports(name) <= shared, name

"""The package: ``import mhe`` builds nothing, its public API fits one screen without test data or internals, and the
example of docs/mhe.md runs."""
import contextlib
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

import mhe

ROOT = Path(__file__).resolve().parents[2]


def test_import_builds_nothing(tmp_path):
    code = ("import sys, mhe; print(sorted(m for m in ('casadi', 'lightning', 'l4casadi', 'mhe.training', 'mhe.problems.racing') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert out.stdout.strip() == "[]"
    assert list(tmp_path.iterdir()) == []  # no build folder, no generated code


def test_each_public_name_loads_its_module_on_first_use():
    code = ("import sys, mhe; before = 'mhe.outer.free_run' in sys.modules; import mhe.problems.two_tank; "
            "print(before, callable(mhe.simulate_closed_loop), "
            "mhe.simulate_free_run.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert out.stdout.split() == ["False", "True", "mhe.outer.free_run"]
    assert set(mhe.__all__) <= set(dir(mhe))
    with pytest.raises(AttributeError, match="no attribute 'KKTPoint'"):
        mhe.KKTPoint


def test_public_api_fits_one_screen_and_leaves_internals_out():
    names = mhe.__all__
    assert len(names) == len(set(names)) <= 31 and all(hasattr(mhe, n) for n in names)  # + simulate_free_run (issue 33)
    internals = {"KKTPoint", "StageLayout", "CasadiDynamics", "MHEProblem", "OuterValues", "LevenbergMarquardt",
                 "kkt_blocks", "refine", "lower_cost", "cold_solve", "block_tridiagonal_solve",
                 "BAYESRACE_TRUTH", "BAYESRACE_BOUNDS", "IDENTIFIED", "vehicle_policy", "perturbed_values"}
    assert not internals & set(dir(mhe))
    assert len(Path(mhe.__file__).read_text().splitlines()) <= 40


def test_the_python_examples_of_docs_mhe_run(tmp_path, monkeypatch):
    racing, pendulum = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "mhe.md").read_text(), re.S)
    monkeypatch.chdir(ROOT)
    code = racing.replace('"--trainer.logger", "false"]',
                          f'"--trainer.logger", "false", "--model.solver.build_dir", "{tmp_path}"]')
    assert code != racing
    for block in (code, pendulum):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block, "docs/mhe.md", "exec"), {"__name__": "docs_example"})
        assert out.getvalue().strip().splitlines()[-1].startswith("PEM-MHE: mean relative parameter error")

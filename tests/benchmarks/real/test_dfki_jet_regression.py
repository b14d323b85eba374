"""benchmarks.real.dfki_jet_regression on the real logs (skipped without the DFKI files; the fit itself:
tests/torch_ude/test_jet_regression.py)."""
import json
from pathlib import Path

import pytest

from benchmarks.real.dfki_jet_regression import main

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT.parent / "shared" / "data" / "dfki_pendulum"


@pytest.mark.skipif(not DATA.is_dir(), reason=f"the DFKI pendulum files are not at {DATA} (see ../shared/data/README.md)")
def test_the_real_logs_fit_scores_each_spacing(tmp_path, monkeypatch):
    import benchmarks.common as common
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    config = tmp_path / "dfki.yaml"
    text = (ROOT / "configs" / "dfki_pendulum.yaml").read_text().replace("../shared/data/dfki_pendulum", str(DATA))
    config.write_text(text)
    main(["--config", str(config), "--spacings", "2"])
    out = json.loads((tmp_path / "dfki_jet_regression" / "dfki_jet_regression.json").read_text())
    (row,) = out["fits"]
    assert row["spacing"] == 2 and row["windows"] > 5000
    # the torque gain the logs need: far from the lab's J = 0.0626 (issue 18), and a finite score
    assert row["parameters"]["inertia"] > 0.1 and 0 < row["open_loop_1s_nrmse"] < 1.0

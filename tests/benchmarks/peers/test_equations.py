"""The residual-equations benchmark reads the peers' jet runs and scores the recovered terms."""
import json

import pytest

from benchmarks.common import trainer_job
from benchmarks.peers.equations import main
from torch_ude import HybridField, SinglePendulum, export_field
from torch_ude.systems import PendulumField


def test_recovered_terms_of_existing_runs_are_scored_against_the_truth(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plant = SinglePendulum()
    for seed, damping in ((0, 0.40), (1, 0.38)):
        # a "trained" field that is the damped pendulum itself: its residual on Case A is -c omega
        field = HybridField.from_seed(PendulumField(9.81, 1.0, damping), seed, last_layer_gain=0.0)
        root = tmp_path / trainer_job("case_a", "jet", 0.01, seed, tmp_path / "results/peers")["root"]
        export_field(field, root, plant, "A")
        (root / "metrics.json").write_text(json.dumps({"status": "finished"}))
    main(["--plants", "case_a", "--case-a-noise", "0.01", "--seeds", "0", "1", "--bootstrap", "4"])
    out = json.loads((tmp_path / "results/residual_equations/residual_equations.json").read_text())
    term = out["summary"]["case_a@0.01"]["omega: omega"]
    assert term["true"] == -0.4 and term["min"] == pytest.approx(-0.40) and term["max"] == pytest.approx(-0.38)
    assert term["max_abs_relative_error"] == pytest.approx(0.05)
    run = out["runs"][0]
    assert run["equations"][1].startswith("omega' residual = -0.4000(+-0.0000) omega")
    assert run["command"].startswith("python -m torch_ude.sparse ") and "--library 'theta' 'omega'" in run["command"]


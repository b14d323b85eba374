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


def test_the_direct_regression_reads_a_friction_law_from_a_log_without_a_network(tmp_path):
    import numpy as np
    import yaml
    from scipy.integrate import solve_ivp

    from benchmarks.peers.equations import direct_regression

    j, mcx, g, fv, off = 6.259e-2, 1.022e-1, 9.81, 0.02, -0.05  # viscous friction and an offset, no Coulomb
    t = np.arange(0.0, 20.0, 0.01)

    def tau(s):
        return 0.4 * np.sin(2.1 * s) + 0.3 * np.sin(5.3 * s + 1.0)

    def rhs(s, x):
        return [x[1], (tau(s) - mcx * g * np.sin(x[0]) - fv * x[1] - off) / j]

    sol = solve_ivp(rhs, (0.0, t[-1]), [0.3, 0.0], t_eval=t, rtol=1e-10, atol=1e-10)
    np.savetxt(tmp_path / "log.csv", np.column_stack([t, sol.y.T, tau(t)]), delimiter=",",
               header="time,position,velocity,torque", comments="")
    known = {"class_path": "torch_ude.systems.TorquePendulumModel",
             "init_args": {"inertia": j, "mass_com": mcx, "gravity": g}}
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"data": {"init_args": {
        "known": known, "files": [str(tmp_path / "log.csv")], "time": "time", "states": ["position", "velocity"],
        "inputs": ["torque"], "fs": 100.0}}}))
    out = direct_regression(config, threshold=0.05, bootstrap=5)
    coef = dict(zip(out["terms"], out["coefficients"]))
    assert coef["velocity"] == pytest.approx(-fv / j, rel=0.02) and coef["1"] == pytest.approx(-off / j, rel=0.02)
    assert coef["atan(100*velocity)"] == coef["torque"] == coef["sin(position)"] == 0.0
    assert out["r2"] > 0.99 and out["samples"] == 2000

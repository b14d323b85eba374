"""The peers benchmark: same streams, torchdiffeq's gradient, PySINDy's fit, and a tiny end-to-end run."""
import json

import numpy as np
import pytest
import torch

from baselines import ShootingObjective, initial_field, observe, shooting_windows, stream_calibration
from benchmarks.peer_runs import peer_stream, run_measured
from benchmarks.peer_sindy import SindySettings, choose, sindy_fit
from benchmarks.peer_torchdiffeq import TorchdiffeqObjective
from benchmarks.peers import SINDY, _summary, main
from torch_ude import FrictionPendulum, SinglePendulum
from torch_ude.metrics import evaluate_field


def test_the_peer_stream_is_the_jet_matching_stream():
    dm, rec = peer_stream("friction", 0.02, 3, duration=2.0)
    assert isinstance(dm.system, FrictionPendulum) and dm.case == "A" and dm.seed == 3 and dm.noise == 0.02
    chunks = []
    while dm.live:
        chunks.append(dm.next_chunk())
    assert np.array_equal(torch.cat([c["y"] for c in chunks]).numpy(), rec.y)
    assert np.array_equal(torch.cat([c["segment"] for c in chunks]).numpy(), rec.segment)


@pytest.mark.parametrize("mode", ["backprop", "adjoint"])
def test_torchdiffeq_gradient_matches_the_hand_written_discrete_adjoint(mode):
    _, rec = peer_stream("case_a", 0.01, 0, duration=4.0)
    cal = stream_calibration(rec)
    field = initial_field(SinglePendulum(), "A", rec, 0, cal=cal)
    windows = shooting_windows(observe(rec, 50.0), 6, 5)
    ours = ShootingObjective(field, windows, cal.x_rms).gradient()
    theirs = TorchdiffeqObjective(field, windows, cal.x_rms, mode).gradient()
    # torchdiffeq's "rk4" is Kutta's 3/8 rule, ours the classical one: equal to O(h^5) per step
    assert float(theirs.loss) == pytest.approx(float(ours.loss), rel=1e-6)
    for a, b in zip(theirs.grads, ours.grads):
        assert float((a - b).norm()) <= 1e-5 * float(b.norm()) + 1e-12
    assert float((theirs.state_grad - ours.state_grad).norm()) <= 1e-5 * float(ours.state_grad.norm())
    with pytest.raises(ValueError, match=r"mode must be one of \['backprop', 'adjoint'\]"):
        TorchdiffeqObjective(field, windows, cal.x_rms, "continuous")


def test_pysindy_finds_the_case_a_damping_with_a_smoothed_derivative():
    dm, rec = peer_stream("case_a", 0.01, 0, duration=10.0)
    settings = SindySettings("residual", "savgol", 101, 0.1, 3)
    field, info = sindy_fit(dm.system, dm.case, rec, settings)
    metrics = evaluate_field(field, dm.system, dm.case, dm.evaluation_states())
    assert metrics["c_hat"] == pytest.approx(0.40, abs=0.01) and metrics["e_field_visited"] < 0.005
    equation = field.equations()[1]
    assert info["wall_s"] > 0 and equation.startswith("omega' residual = ") and " omega" in equation
    best, tried = choose(dm.system, dm.case, rec, dm.evaluation_states(), "whole", "default", thresholds=(0.1, 1.0),
                         degrees=(3,))
    assert len(tried) == 2 and best in [t["settings"] for t in tried] and best.window is None


def test_a_failed_run_names_the_run_and_the_error():
    stream = peer_stream("case_a", 0.01, 0, duration=2.0)
    with pytest.raises(RuntimeError, match=r"the torchdiffeq run .*'plant': 'SinglePendulum', 'noise': 0.01, "
                                           r"'seed': 0.* failed: ValueError: mode must be one of"):
        run_measured("torchdiffeq", stream=stream, options={"mode": "continuous", "iterations": 1})


TINY = ["--plants", "friction", "--friction-noise", "0.01", "--seeds", "0", "--duration", "6", "--updates", "20",
        "--iterations", "2", "--windows", "51", "--thresholds", "0.1", "--degrees", "3", "--name", "tiny"]


def _check_output(folder, variants):
    out = json.loads((folder / "tiny.json").read_text())
    assert {r["variant"] for r in out["runs"]} == variants
    for r in out["runs"]:
        assert 0 < r["e_field_visited"] < 1 and r["wall_s"] > 0 and r["peak_rss_mb"] >= 0
    assert out["summary"]["friction@0.01"]["best_sindy"] in SINDY
    assert out["sindy_settings"]["friction@0.01"]["sindy_residual_savgol"]["window"] == 51
    assert (folder / "tiny.png").stat().st_size > 0
    return out


def test_tiny_end_to_end_run_of_the_peers_reuses_finished_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = [*TINY, "--methods", "sindy", "torchdiffeq", "--adjoint-seeds"]
    main(argv)
    _check_output(tmp_path / "results/tiny", {*SINDY, "torchdiffeq_backprop"})
    monkeypatch.setattr("benchmarks.peers.run_measured", lambda *a, **k: pytest.fail("a finished run was rerun"))
    main(argv)


@pytest.mark.slow
def test_tiny_end_to_end_run_of_every_method(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    main([*TINY, "--methods", "jet", "rk4", "sindy", "torchdiffeq"])
    variants = {"jet", "rk4", *SINDY, "torchdiffeq_backprop", "torchdiffeq_adjoint"}
    out = _check_output(tmp_path / "results/tiny", variants)
    assert set(out["summary"]["friction@0.01"]["ratios"]) == {
        "jet_over_best_sindy", "jet_over_torchdiffeq", "jet_time_over_torchdiffeq"}


def test_tiny_end_to_end_run_of_physics_only_pem_mhe(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    main([*TINY, "--methods", "pem", "--pem-gray-noise"])
    out = json.loads((tmp_path / "results/tiny/tiny.json").read_text())
    assert {r["variant"] for r in out["runs"]} == {"pem_theta", "pem_theta_omega"}
    for r in out["runs"]:
        assert 0 < r["e_field_visited"] < 1 and r["steps"] >= 1 and r["J"] > 0
    with pytest.raises(ValueError, match="add 'jet' to --methods"):
        main([*TINY, "--methods", "pem"])


@pytest.mark.slow
def test_tiny_end_to_end_run_of_gray_box_pem_mhe_cold_and_warm(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    main([*TINY, "--methods", "jet", "pem", "--pem-gray-steps", "2", "--pem-gray-noise", "0.01"])
    out = json.loads((tmp_path / "results/tiny/tiny.json").read_text())
    assert {r["variant"] for r in out["runs"]} == {"jet", "pem_theta", "pem_theta_omega", "pem_gray_theta",
                                                   "pem_gray_theta_warm"}
    assert "pem_warm_time_to_cold_J_over_cold_time" in out["summary"]["friction@0.01"]["ratios"]


def test_summary_statistics_best_pysindy_and_ratios():
    def run(variant, seed, e, wall):
        return {"plant": "friction", "noise": 0.01, "seed": seed, "variant": variant, "e_field_visited": e,
                "e_field": 2 * e, "c_hat": 0.5, "wall_s": wall, "peak_rss_mb": 1.0}

    runs = [run("jet", 0, 0.01, 10.0), run("jet", 1, 0.03, 30.0), run("sindy_whole_default", 0, 0.08, 0.1),
            run("sindy_residual_savgol", 0, 0.05, 0.2), run("torchdiffeq_backprop", 0, 0.04, 100.0)]
    s = _summary(runs)["friction@0.01"]
    assert s["variants"]["jet"]["e_field_visited"]["mean"] == pytest.approx(0.02)
    assert s["best_sindy"] == "sindy_residual_savgol"
    assert s["ratios"] == pytest.approx({"jet_over_best_sindy": 0.4, "jet_over_torchdiffeq": 0.5,
                                         "jet_time_over_torchdiffeq": 0.2})

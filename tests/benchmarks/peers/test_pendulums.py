"""The peers benchmark: tiny end-to-end runs and the summary (the peers themselves: tests/baselines/peers)."""
import json

import pytest

from baselines.peers import SINDY_VARIANTS
from benchmarks.peers.pendulums import _summary, main


TINY = ["--plants", "friction", "--friction-noise", "0.01", "--seeds", "0", "--duration", "6", "--updates", "20",
        "--iterations", "2", "--windows", "51", "--thresholds", "0.1", "--degrees", "3", "--name", "tiny"]


def _check_output(folder, variants):
    out = json.loads((folder / "tiny.json").read_text())
    assert {r["variant"] for r in out["runs"]} == variants
    for r in out["runs"]:
        assert 0 < r["e_field_visited"] < 1 and r["wall_s"] > 0 and r["peak_rss_mb"] >= 0
    assert out["summary"]["friction@0.01"]["best_sindy"] in SINDY_VARIANTS
    assert out["sindy_settings"]["friction@0.01"]["sindy_residual_savgol"]["window"] == 51
    assert (folder / "tiny.png").stat().st_size > 0
    return out


def test_tiny_end_to_end_run_of_the_peers_reuses_finished_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = [*TINY, "--methods", "sindy", "torchdiffeq", "--adjoint-seeds"]
    main(argv)
    _check_output(tmp_path / "results/tiny", {*SINDY_VARIANTS, "torchdiffeq_backprop"})
    monkeypatch.setattr("benchmarks.peers.pendulums.run_measured",
                        lambda *a, **k: pytest.fail("a finished run was rerun"))
    main(argv)


@pytest.mark.slow
def test_tiny_end_to_end_run_of_every_method(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    main([*TINY, "--methods", "jet", "rk4", "sindy", "torchdiffeq"])
    variants = {"jet", "rk4", *SINDY_VARIANTS, "torchdiffeq_backprop", "torchdiffeq_adjoint"}
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

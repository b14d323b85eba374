"""PEM–MHE as a peer on the jet-matching streams (baselines.peers.pem)."""
import pytest

from baselines.peers import config_stream
from baselines.peers.pem import PEMSettings, pem_fit, reach_ratio
from torch_ude.metrics import evaluate_field
from tests.baselines.peers.helpers import CASE_A


def test_physics_only_pem_mhe_from_theta_alone_finds_the_damping_of_a_clean_stream(tmp_path):
    dm, _ = config_stream(CASE_A, 0.0, 0, duration=12.0)
    field, info = pem_fit(dm, PEMSettings(measured=(0,), build_dir=str(tmp_path)))
    metrics = evaluate_field(field, dm.system, dm.case, dm.evaluation_states())
    assert metrics["c_hat"] == pytest.approx(0.40, abs=1e-3)
    assert metrics["e_field_visited"] < 1e-3
    assert info["steps"] == len(info["history"]) >= 1 and info["failed_solves"] == 0 and info["windows"] > 5


def test_settings_are_checked():
    with pytest.raises(ValueError, match="variant must be one of"):
        PEMSettings(variant="grey")
    with pytest.raises(ValueError, match="needs the gray-box variant"):
        PEMSettings(variant="physics", start="runs/x")


def test_reach_ratio_is_the_warm_runs_time_to_the_cold_runs_final_cost():
    cold = {"J": 1.0, "wall_s": 100.0, "history": [(10.0, 5.0), (100.0, 1.0)]}
    warm = {"history": [(5.0, 2.0), (20.0, 1.005), (30.0, 0.9)]}
    assert reach_ratio(warm, cold) == pytest.approx(0.2)
    assert reach_ratio({"history": [(5.0, 2.0)]}, cold) is None

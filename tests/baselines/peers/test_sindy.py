"""PySINDy on a jet-matching stream: the fit and the seed-0 choice of its settings."""
import pytest

from baselines.peers import SINDY_VARIANTS, SindySettings, choose, choose_variants, config_stream, sindy_fit
from torch_ude.metrics import evaluate_field
from tests.baselines.peers.helpers import CASE_A


def test_pysindy_finds_the_case_a_damping_with_a_smoothed_derivative():
    dm, rec = config_stream(CASE_A, 0.01, 0, duration=10.0)
    settings = SindySettings("residual", "savgol", 101, 0.1, 3)
    field, info = sindy_fit(dm.system, dm.case, rec, settings)
    metrics = evaluate_field(field, dm.system, dm.case, dm.evaluation_states())
    assert metrics["c_hat"] == pytest.approx(0.40, abs=0.01) and metrics["e_field_visited"] < 0.005
    equation = field.equations()[1]
    assert info["wall_s"] > 0 and equation.startswith("omega' residual = ") and " omega" in equation
    best, tried = choose(dm.system, dm.case, rec, dm.evaluation_states(), "whole", "default", thresholds=(0.1, 1.0),
                         degrees=(3,))
    assert len(tried) == 2 and best in [t["settings"] for t in tried] and best.window is None


def test_choose_variants_chooses_every_variant_json_ready():
    dm, rec = config_stream(CASE_A, 0.01, 0, duration=6.0)
    out = choose_variants(dm.system, dm.case, rec, dm.evaluation_states(), windows=(51,), thresholds=(0.1,),
                          degrees=(3,))
    assert list(out) == list(SINDY_VARIANTS) == ["sindy_residual_default", "sindy_residual_savgol",
                                                 "sindy_whole_default", "sindy_whole_savgol"]
    for name, choice in out.items():
        mode, diff = name.removeprefix("sindy_").split("_")
        assert choice["settings"] == {"mode": mode, "differentiation": diff, "window": 51 if diff == "savgol" else None,
                                      "threshold": 0.1, "degree": 3}
        assert [t["settings"] for t in choice["tried"]] == [choice["settings"]]
        assert choice["tried"][0]["e_field_visited"] > 0

"""The noise-decomposition benchmark: the true-state diagnostic and the variant table, on a tiny run."""
import json

import pytest
import yaml

import benchmarks.jet.noise_decomposition as bench


def test_variant_overrides_fix_the_reference_tap_spacing_and_lambda2():
    block = bench._V2["stream"]
    args = bench.variant_overrides(bench.DECOMPOSITION["clean_same_m"], {"m": 47, "lambda2": 0.0}, block)
    stream = json.loads(args[args.index("--model.stream") + 1])
    assert (stream["m"], stream["snr_gate"], stream["lambda2"]) == (47, False, 0.0)
    assert args[args.index("--model.weight_decay_full_at") + 1] == "null"


def test_stream_changes_keep_the_chosen_configs_own_stream_block():
    block = yaml.safe_load(open(bench.CONFIGS["double_A"]))["model"]["init_args"]["stream"]
    assert block["capacity"] != bench._V2["stream"]["capacity"]
    remedy = bench.variant_overrides(bench.REMEDIES["tap_average"], {"m": 8, "lambda2": 0.0}, block)
    assert json.loads(remedy[-1]) == {**block, "tap_average": True}
    longer = bench.variant_overrides(bench.DECOMPOSITION["stream_2x"], {"m": 8, "lambda2": 0.0}, block)
    assert json.loads(longer[-1])["capacity"] == 2 * block["capacity"]
    assert bench.variant_overrides(bench.REMEDIES["reference"], {"m": 8, "lambda2": 0.0}, block) == []


def test_true_state_runs_share_the_noisy_calibration_and_read_the_clean_states(tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "RESULTS", tmp_path)
    bench.main(["--levels", "0.05", "--seeds", "0", "--variants", "reference", "true_x", "--duration", "8",
                "--max-steps", "60"])
    folder = tmp_path / bench.NAME / "duration_8.0_steps_60"
    ref = json.loads((folder / "reference_0.05_0" / "metrics.json").read_text())
    true_x = json.loads((folder / "true_x_0.05_0" / "metrics.json").read_text())
    assert true_x["updates"] == ref["updates"] == 60
    # the clean channels ride after the noisy ones and leave m, lambda2 and the noisy sigma as they were
    sigma = true_x["calibration"]["sigma"]
    assert len(sigma) == 4 and max(sigma[2:]) < 1e-6 < min(sigma[:2])
    assert sigma[:2] == pytest.approx(ref["calibration"]["sigma"], rel=1e-12)
    assert (true_x["m"], true_x["lambda2"]) == (ref["m"], ref["lambda2"])
    assert true_x["counters"]["accepted"] == ref["counters"]["accepted"]
    # seeds other than the default 0-2 get their own table file
    table = json.loads((folder / "decomposition_seeds_0.json").read_text())
    assert set(table["summary"]["0.05"]) == {"reference", "true_x"}
    assert table["summary"]["0.05"]["reference"]["change_vs_reference"] == 0.0


def test_unknown_variants_are_refused_with_the_choices():
    with pytest.raises(SystemExit, match="unknown --variants \\['typo'\\].*choose from"):
        bench.main(["--variants", "typo"])

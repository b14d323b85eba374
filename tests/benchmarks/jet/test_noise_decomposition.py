"""The noise-decomposition benchmark: the variants' overrides and the table, on a tiny run."""
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


def test_a_table_of_other_seeds_gets_its_own_file_and_compares_with_the_reference(tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "RESULTS", tmp_path)
    bench.main(["--levels", "0.05", "--seeds", "0", "--variants", "reference", "--duration", "8", "--max-steps", "60"])
    folder = tmp_path / bench.NAME / "duration_8.0_steps_60"
    assert json.loads((folder / "reference_0.05_0" / "metrics.json").read_text())["updates"] == 60
    # seeds other than the default 0-2 get their own table file
    table = json.loads((folder / "decomposition_seeds_0.json").read_text())
    assert set(table["summary"]["0.05"]) == {"reference"}
    assert table["summary"]["0.05"]["reference"]["change_vs_reference"] == 0.0


def test_the_true_state_variant_runs_the_librarys_oracle():
    args = bench.variant_overrides(bench.DECOMPOSITION["true_x"], {"m": 8, "lambda2": 0.0}, bench._V2["stream"])
    assert args == ["--model.class_path", "torch_ude.training.TrueStateModule",
                    "--data.class_path", "torch_ude.training.TrueStateDataModule"]


def test_unknown_variants_are_refused_with_the_choices():
    with pytest.raises(SystemExit, match="unknown --variants \\['typo'\\].*choose from"):
        bench.main(["--variants", "typo"])

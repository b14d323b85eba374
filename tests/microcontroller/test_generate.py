"""The header generator: stamps, tables, settings it refuses at generation time, fine-tuning."""
import json

import pytest
import torch

from microcontroller.generate import main, spec_from_config, spec_from_run, write_headers
from torch_ude import HybridField, __version__
from torch_ude.export import export_field
from torch_ude.savgol import SavitzkyGolay

CONFIG = "configs/pendulum_case_a.yaml"


def test_headers_carry_the_stamp_sizes_and_tables(tmp_path):
    spec = spec_from_config(CONFIG, ["--model.stream.capacity", "2048"])
    cfg, data = (p.read_text() for p in write_headers(spec, tmp_path))
    for text in (cfg, data):
        assert f"torch-ude {__version__}" in text and f"torch {torch.__version__}" in text
        assert spec.config_hash() in text and "microcontroller.generate" in text
    assert "#define TU_CAPACITY             2048" in cfg and "#define TU_NUM_PARAMS           354" in cfg
    row = SavitzkyGolay().rows[1]
    assert f"{float(row[0].float()):.9g}f" in data
    # a different setting is a different hash
    assert spec_from_config(CONFIG, ["--model.stream.capacity", "1024"]).config_hash() != spec.config_hash()


@pytest.mark.parametrize("overrides, match", [
    (["--model.stream.capacity", "32"], "smaller than the minibatch size"),
    (["--model.stream.half_width", "2"], "2M\\+1 >= P\\+2"),
    (["--data.train_rate", "300"], "fs / train_rate must be a positive integer"),
    (["--model.stream.calibration_s", "20.0"], "keys segments of its record modulo"),
    (["--model.stream.tap_average", "true"], "tap_average .* is not in the C port yet"),
    (["--model.linear", "true"], "model.linear .* is not in the C port"),
])
def test_impossible_settings_are_errors_at_generation_time(overrides, match):
    with pytest.raises(ValueError, match=match):
        spec_from_config(CONFIG, overrides)


def test_a_plant_without_a_c_field_is_refused(tmp_path):
    cfg = tmp_path / "osc.yaml"
    cfg.write_text(
        "data:\n  class_path: torch_ude.training.StreamDataModule\n  init_args:\n"
        "    system:\n      class_path: tests.torch_ude.training.test_module.Oscillator\n    case: A\n")
    with pytest.raises(ValueError, match="implements the known fields of SinglePendulum and DoublePendulum"):
        spec_from_config(CONFIG, ["--config", str(cfg)])


def test_command_line_reports_errors_in_one_line(tmp_path, capsys):
    assert main(["--config", CONFIG, "--out", str(tmp_path), "--model.stream.capacity", "32"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("microcontroller.generate: error:") and "minibatch" in err
    assert main(["--config", CONFIG, "--out", str(tmp_path)]) == 0
    assert (tmp_path / "tu_config.h").is_file() and (tmp_path / "tu_model_data.h").is_file()


def test_a_trained_run_is_fine_tuned_with_its_weights_and_scales(tmp_path):
    spec = spec_from_config(CONFIG, [])
    field = spec.field
    with torch.no_grad():
        field.mlp.weight0.add_(0.25)
    field.set_scales(torch.tensor([0.7, 2.1], dtype=torch.float64), torch.tensor([2.2, 5.4], dtype=torch.float64))
    extra = {"seed": 5, "config": {"model": {"stream": {"capacity": 512}, "batch_size": 32},
                                   "data": {"fs": 1000.0, "train_rate": 25.0}, "max_steps": 700}}
    export_field(field, tmp_path, spec.system, "A", extra=extra)
    tuned = spec_from_run(tmp_path)
    assert tuned.pretrained and tuned.seed == 5 and tuned.stream.capacity == 512 and tuned.max_steps == 700
    assert torch.equal(tuned.field.mlp.weight0, field.mlp.weight0)
    assert torch.equal(tuned.field.in_scale, field.in_scale)
    cfg = (write_headers(tuned, tmp_path / "gen")[0]).read_text()
    assert "#define TU_PRETRAINED           1" in cfg
    with pytest.raises(ValueError, match="describes DoublePendulum"):
        spec_from_run(tmp_path, "configs/double_pendulum_case_a.yaml")
    (tmp_path / "field.json").write_text(json.dumps({**json.loads((tmp_path / "field.json").read_text()),
                                                     "extra": {}}))
    with pytest.raises(ValueError, match="records no run settings"):
        spec_from_run(tmp_path)


def test_a_run_with_the_linear_term_is_refused(tmp_path):
    spec = spec_from_config(CONFIG, [])
    field = HybridField.from_seed(spec.system.known_field("A"), 0, linear=True)
    export_field(field, tmp_path, spec.system, "A", extra={"seed": 0})
    with pytest.raises(ValueError, match=r"has the residual's linear term \(field.json: \"linear\": true\)"):
        spec_from_run(tmp_path)

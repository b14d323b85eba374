"""The header generator: stamps, tables, settings it refuses at generation time (one line each),
the target's RAM budget, fine-tuning a run and the run folders it refuses."""
import json
import re
import shutil

import pytest
import torch
import yaml

from microcontroller.build import ROOT, BuildError, build
from microcontroller.generate import main, spec_from_config, spec_from_run, spec_from_settings, write_headers
from microcontroller.memory import default_ram_budget, member_sizes, static_bytes
from tests.microcontroller.helpers import position_log
from torch_ude import HybridField, __version__
from torch_ude.cli import main as cli_main, user_error
from torch_ude.export import export_field
from torch_ude.position_only import VelocityFromPosition
from torch_ude.savgol import SavitzkyGolay, savgol_rows

CONFIG = "configs/pendulum_case_a.yaml"
POINT = ["--model.stream.tap_average", "false"]  # the paper's point taps (the Python default is box-averaged)


def test_headers_carry_the_stamp_sizes_and_tables(tmp_path):
    spec = spec_from_config(CONFIG, [*POINT, "--model.stream.capacity", "2048"])
    cfg, data, code = (p.read_text() for p in write_headers(spec, tmp_path))
    for text in (cfg, data, code):
        assert f"torch-ude {__version__}" in text and f"torch {torch.__version__}" in text
        assert spec.config_hash() in text and "microcontroller.generate" in text
    assert "#define TU_CAPACITY             2048" in cfg and "#define TU_NUM_PARAMS           354" in cfg
    row = SavitzkyGolay().rows[1]
    assert f"{float(row[0].float()):.9g}f" in data
    # a different setting is a different hash
    assert spec_from_config(CONFIG, [*POINT, "--model.stream.capacity", "1024"]).config_hash() != spec.config_hash()


def test_box_averaged_taps_are_generated_with_their_tables(tmp_path):
    """tap_average true (the Python default) is no longer refused: the box rows of every m up to m_max are in flash."""
    spec = spec_from_config(CONFIG, ["--model.stream.tap_average", "true", "--model.stream.m_max", "20"])
    cfg, data, _ = (p.read_text() for p in write_headers(spec, tmp_path))
    assert re.search(r"#define TU_TAP_AVERAGE\s+1\b", cfg) and re.search(r"#define TU_BOX_TABLES\s+20\b", cfg)
    row = SavitzkyGolay(bin_width=20).rows[1]
    assert f"{float(row[0].float()):.9g}f" in data


@pytest.mark.parametrize("overrides, match", [
    (["--model.stream.capacity", "32"], "smaller than the minibatch size"),
    (["--model.stream.half_width", "2"], "2M\\+1 >= P\\+2"),
    (["--data.train_rate", "300"], "fs / train_rate must be a positive integer"),
    (["--model.stream.calibration_s", "20.0"], "keys segments of its record modulo"),
    # issue 31's trust features the device does not learn yet are refused by name (periodic and invariant
    # states, the input map, the envelope and trainable physical parameters it learns:
    # test_the_input_map_is_generated_and_hashed, test_the_envelope_is_generated_and_hashed,
    # test_physical_parameters_are_generated_only_where_trained): the refit of the physics after the residual check
    # rejects a residual (the device refits a physics-alone run, physics_first 1)
    (["--data.system.trainable", "{damping: [0.0, 1.0]}"], r"refit of the physical parameters after the residual "
                                                            r"check .*model.physics_refit: false"),
])
def test_impossible_settings_are_errors_at_generation_time(overrides, match):
    with pytest.raises(ValueError, match=match):
        spec_from_config(CONFIG, [*POINT, *overrides])


def test_command_line_reports_errors_in_one_line(tmp_path, capsys):
    # issue 36: LightningCLI's warning about `args`, "Seed set to 0" and jsonargparse's Union dump
    # used to surround the real cause
    assert main(["--config", "configs/pendulum_case_a_c.yaml", "--out", str(tmp_path), "--model.stream.capacity",
                 "32"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("microcontroller.generate: error: the buffer capacity B = 32") and "minibatch" in err
    assert err.count("\n") == 1, err
    assert main(["--config", CONFIG, "--out", str(tmp_path), *POINT]) == 0
    assert all((tmp_path / name).is_file() for name in ("tu_config.h", "tu_model_data.h", "tu_plant_code.h"))
    assert capsys.readouterr().err == ""


def test_an_unknown_reservoir_precision_is_refused_in_one_line(tmp_path, capsys):
    assert main(["--config", "configs/pendulum_case_a_c.yaml", "--out", str(tmp_path),
                 "--model.stream.reservoir_precision", "bfloat16"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("microcontroller.generate: error: stream.reservoir_precision must be one of 'float32', "
                          "'float16'; got 'bfloat16'.") and err.count("\n") == 1, err
    assert not (tmp_path / "tu_config.h").exists()


def test_float16_storage_halves_the_reservoir_and_keeps_float32_hashes():
    half = spec_from_config("configs/pendulum_case_a_c.yaml")  # the device config stores float16
    paper = spec_from_config("configs/pendulum_case_a_c.yaml", ["--model.stream.reservoir_precision", "float32"])
    assert "reservoir_precision" not in paper.settings()["stream"]  # float32 builds keep their hashes
    assert half.settings()["stream"]["reservoir_precision"] == "float16" and half.config_hash() != paper.config_hash()
    # the reservoir B x 3 rows x 2 channels shrinks from 4 to 2 bytes a value; the calibration record
    # (3 s at 1 kHz: 42,000 bytes) then outgrows it and sets the union's size
    assert static_bytes(paper) == 61_352 and static_bytes(half) == 61_352 - 2048 * 3 * 2 * 4 + 42_000 == 54_200
    assert static_bytes(half) <= 56_000


def test_the_cli_reports_the_c_ports_errors_in_one_line(tmp_path):
    with pytest.raises(ValueError) as info:
        cli_main(["fit", "--config", "configs/pendulum_case_a_c.yaml", "--model.hidden", "[]", "--trainer.max_steps",
                  "1", "--trainer.default_root_dir", str(tmp_path), "--trainer.enable_progress_bar", "false"])
    err = user_error(info.value)  # what `torch-ude` prints as its one line
    assert err is not None and "model.hidden is [], no hidden layer" in str(err) and "[16, 16]" in str(err)


@pytest.mark.parametrize("config, overrides", [
    (CONFIG, [*POINT, "--model.stream.capacity", "256", "--model.stream.calibration_s", "1.0", "--model.stream.m_max", "50"]),
    ("configs/double_pendulum_case_a.yaml", [*POINT, "--model.stream.capacity", "2048", "--model.stream.m_max", "50"]),
    (CONFIG, ["--model.stream.tap_average", "true", "--model.stream.capacity", "2048"]),  # box taps: a longer ring
    (CONFIG, [*POINT, "--model.stream.capacity", "16", "--model.stream.lambda2", "0", "--model.stream.calibration_s", "0.601",
              "--model.batch_size", "4", "--model.stream.gate_history", "5"]),
    # float16 storage (issue 32, item 4): the paper's device configuration, where the calibration record is
    # then the larger member of the union, and a larger reservoir, where the reservoir is
    ("configs/pendulum_case_a_c.yaml", []),  # (its reservoir_precision: float16)
    ("configs/pendulum_case_a_c.yaml", ["--model.stream.capacity", "4096"]),
    ("configs/pendulum_case_a_c.yaml", ["--model.stream.reservoir_precision", "float32"]),
    ("configs/pendulum_case_a_c.yaml", ["--model.envelope", "true"]),  # the envelope's span: 2 ch floats more
    ("configs/double_pendulum_case_a.yaml", [*POINT, "--model.stream.capacity", "1000", "--model.stream.m_max", "50",
                                             "--model.stream.lambda2", "0",
                                             "--model.stream.reservoir_precision", "float16"]),
])
def test_the_generator_knows_the_trainers_size_and_the_compiler_checks_the_budget(config, overrides, tmp_path):
    spec = spec_from_config(config, overrides)
    sizes = member_sizes(write_headers(spec, tmp_path / "gen")[0].parent)
    assert static_bytes(spec) == sizes["total"]
    write_headers(spec, tmp_path / "fits", ram_budget=sizes["total"])
    build(tmp_path / "fits", "static")
    cfg = write_headers(spec, tmp_path / "short", ram_budget=sizes["total"])[0]
    text = cfg.read_text()
    assert re.search(rf"#define TU_RAM_BUDGET +{sizes['total']} ", text)
    cfg.write_text(re.sub(r"(#define TU_RAM_BUDGET +)\d+", lambda m: f"{m.group(1)}{sizes['total'] - 1}", text))
    with pytest.raises(BuildError, match="tu_trainer_fits_the_ram_budget"):
        build(tmp_path / "short", "static")
    with pytest.raises(ValueError, match=f"needs {sizes['total']:,} bytes of static RAM"):
        write_headers(spec, tmp_path / "none", ram_budget=sizes["total"] - 1)


def test_a_reservoir_beyond_the_targets_ram_is_refused_with_the_size_it_needs(tmp_path, capsys):
    big = [*POINT, "--model.stream.capacity", "10000000"]
    need = static_bytes(spec_from_config(CONFIG, big))
    assert main(["--config", CONFIG, "--out", str(tmp_path / "a"), *big]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"needs {need:,} bytes of static RAM" in err
    assert f"budget of {default_ram_budget():,} bytes" in err and "lower model.stream.capacity to at most" in err
    assert not (tmp_path / "a").exists()
    # the largest capacity it names fits; a target with more RAM takes the big one
    most = int(re.search(r"at most ([\d,]+)", err).group(1).replace(",", ""))
    assert static_bytes(spec_from_config(CONFIG, [*POINT, "--model.stream.capacity", str(most)])) <= default_ram_budget()
    assert main(["--config", CONFIG, "--out", str(tmp_path / "b"), *big, "--ram-budget", str(need)]) == 0
    assert f"#define TU_RAM_BUDGET           {need}" in (tmp_path / "b" / "tu_config.h").read_text()


def test_a_trained_run_is_fine_tuned_with_its_weights_and_scales(tmp_path):
    spec = spec_from_config(CONFIG, POINT)
    field = spec.field
    with torch.no_grad():
        field.mlp.weight0.add_(0.25)
    field.set_scales(torch.tensor([0.7, 2.1], dtype=torch.float64), torch.tensor([2.2, 5.4], dtype=torch.float64))
    extra = {"seed": 5, "config": {"model": {"stream": {"capacity": 512, "tap_average": False}, "batch_size": 32},
                                   "data": {"fs": 1000.0, "train_rate": 25.0}, "max_steps": 700}}
    export_field(field, tmp_path, spec.system, "A", extra=extra)
    tuned = spec_from_run(tmp_path)
    assert tuned.pretrained and tuned.seed == 5 and tuned.stream.capacity == 512 and tuned.max_steps == 700
    assert torch.equal(tuned.field.mlp.weight0, field.mlp.weight0)
    assert torch.equal(tuned.field.in_scale, field.in_scale)
    cfg = (write_headers(tuned, tmp_path / "gen")[0]).read_text()
    assert "#define TU_PRETRAINED           1" in cfg
    with pytest.raises(ValueError, match="describes DoublePendulum"):
        spec_from_run(tmp_path, "configs/double_pendulum_case_a.yaml", POINT)
    (tmp_path / "field.json").write_text(json.dumps({**json.loads((tmp_path / "field.json").read_text()),
                                                     "extra": {}}))
    with pytest.raises(ValueError, match="records no run settings"):
        spec_from_run(tmp_path)


@pytest.fixture()
def run_folder(tmp_path):
    """An exported single-pendulum run with its settings, as `torch-ude fit` leaves it."""
    spec = spec_from_config(CONFIG, POINT)
    extra = {"seed": 5, "config": {"model": {"stream": {"capacity": 512, "tap_average": False}, "batch_size": 32},
                                   "data": {"fs": 1000.0, "train_rate": 25.0}, "max_steps": 700}}
    export_field(spec.field, tmp_path / "run", spec.system, "A", extra=extra)
    return tmp_path / "run"


def _one_line_error(capsys, run, *more) -> str:
    assert main(["--run", str(run), "--out", str(run.parent / "gen"), *more]) == 2
    err = capsys.readouterr().err
    assert err.startswith("microcontroller.generate: error:") and err.count("\n") == 1, err
    return err


def test_a_truncated_or_broken_run_folder_is_one_line_naming_the_file(run_folder, tmp_path, capsys):
    assert main(["--run", str(run_folder), "--out", str(tmp_path / "ok")]) == 0
    capsys.readouterr()
    pt, sidecar = run_folder / "field.pt", run_folder / "field.json"
    good_pt, good_json = pt.read_bytes(), sidecar.read_text()
    pt.write_bytes(good_pt[: len(good_pt) // 2])
    err = _one_line_error(capsys, run_folder)
    assert f"{pt} is not a readable TorchScript field" in err and "truncated" in err
    pt.write_bytes(good_pt)
    sidecar.write_text(good_json[:-20])
    err = _one_line_error(capsys, run_folder)
    assert f"{sidecar} is not valid JSON" in err
    # field.pt of another plant beside this run's field.json
    other = spec_from_config("configs/double_pendulum_case_a.yaml", POINT)
    export_field(other.field, tmp_path / "double", other.system, "A", extra={"seed": 0})
    sidecar.write_text(good_json)
    shutil.copy(tmp_path / "double" / "field.pt", pt)
    err = _one_line_error(capsys, run_folder)
    assert f"{pt} holds a network of layers [4, 16, 16, 4]" in err and "SinglePendulum case A with layers [2, 16, 16, 2]" in err
    assert "different runs" in err


def test_recorded_log_and_mhe_run_folders_are_refused_in_one_line(run_folder, capsys):
    sidecar = run_folder / "field.json"
    good = json.loads(sidecar.read_text())
    # what the jet-matching trainer on a recorded log writes: its plant is the log's RecordedPlant
    sidecar.write_text(json.dumps({**good, "case": "RECORDED", "plant": {
        "class_path": "torch_ude.training.recorded.RecordedPlant", "init_args": {"states": ["q", "qdot"]}}}))
    err = _one_line_error(capsys, run_folder)
    assert f"{sidecar}: the run trained plant 'torch_ude.training.recorded.RecordedPlant'" in err
    assert "recorded log" in err and "Python trainer" in err
    # a PEM-MHE run's sidecar (mhe.training.outputs)
    sidecar.write_text(json.dumps({"format": "torch-ude-mhe-model", "physics": "KinematicBicycle", "dt": 0.04}))
    err = _one_line_error(capsys, run_folder)
    assert f"{sidecar} describes a PEM-MHE model, not a jet-matching field" in err
    # an input map that names a state the plant lacks
    sidecar.write_text(json.dumps({**good, "periodic": [2]}))
    err = _one_line_error(capsys, run_folder)
    assert f"{sidecar}: periodic index 2 is out of range: the plant has 2 states" in err and "Export the run" in err


def test_the_linear_term_is_generated_and_a_run_with_it_is_fine_tuned_with_its_l(tmp_path):
    spec = spec_from_config(CONFIG, [*POINT, "--model.linear", "true"])
    cfg = (write_headers(spec, tmp_path / "gen")[0]).read_text()
    assert "#define TU_LINEAR               1" in cfg and "#define TU_NUM_PARAMS           358" in cfg  # 354 + 2 x 2
    assert spec.config_hash() != spec_from_config(CONFIG, POINT).config_hash()
    field = spec.field
    with torch.no_grad():
        field.mlp.linear_weight.copy_(torch.tensor([[0.5, -0.25], [1.5, 2.0]]))
    extra = {"seed": 0, "config": {"model": {"stream": {"tap_average": False}, "linear": True},
                                   "data": {"fs": 1000.0, "train_rate": 25.0}, "max_steps": 700}}
    export_field(field, tmp_path / "run", spec.system, "A", extra=extra)
    tuned = spec_from_run(tmp_path / "run")
    assert tuned.field.linear and torch.equal(tuned.field.mlp.linear_weight, field.mlp.linear_weight)


def test_the_input_map_is_generated_and_hashed(tmp_path):
    """Periodic and invariant states (issue 32, item 2): the configuration carries the map, the hash covers it,
    and a field without one keeps the settings (and hash) of a build before the map existed."""
    plain = spec_from_config(CONFIG, POINT)
    assert "input_map" not in plain.settings()
    spec = spec_from_config(CONFIG, [*POINT, "--model.periodic", "true"])
    assert spec.settings()["input_map"] == {"periodic": [0], "invariant": []}
    assert spec.config_hash() != plain.config_hash() and spec.state_hash() != plain.state_hash()
    assert list(spec.field.mlp.sizes) == [3, 16, 16, 2]  # qdot / s, sin q, cos q
    cfg, data, _ = (p.read_text() for p in write_headers(spec, tmp_path / "periodic"))
    assert re.search(r"#define TU_INPUT_MAP\s+1\b", cfg)
    assert ".input_map = 1, .n_plain = 1, .n_periodic = 1, .plain = {1}, .periodic = {0},  /* invariant: [] */" in data
    cfg, data, _ = (p.read_text() for p in write_headers(plain, tmp_path / "plain"))
    assert "TU_INPUT_MAP" not in cfg and ".input_map" not in data
    # one image, two maps: the build has the map code, each configuration its own map
    other = spec_from_config(CONFIG, [*POINT, "--model.periodic", "true", "--model.stream.capacity", "1024"])
    cfg, data, _ = (p.read_text() for p in write_headers([plain, other], tmp_path / "both"))
    assert re.search(r"#define TU_INPUT_MAP\s+1\b", cfg) and data.count(".input_map = 1") == 1
    # a run that read its angle as (sin, cos) is fine-tuned with its map; a config of another map is refused
    extra = {"seed": 0, "config": {"model": {"stream": {"tap_average": False}, "periodic": True},
                                   "data": {"fs": 1000.0, "train_rate": 25.0}, "max_steps": 700}}
    export_field(spec.field, tmp_path / "run", spec.system, "A", extra=extra)
    tuned = spec_from_run(tmp_path / "run")
    assert tuned.field.input_map.periodic == (0,) and tuned.settings()["input_map"] == spec.settings()["input_map"]
    with pytest.raises(ValueError, match=r"input map \{'periodic': \[0\], 'invariant': \[\]\}, but .* input map none"):
        spec_from_run(tmp_path / "run", CONFIG, POINT)


def test_the_envelope_is_generated_and_hashed(tmp_path):
    """The trust envelope (issue 32, item 2): a configuration with one records the span of its jets (TU_ENVELOPE,
    2 ch floats more), the hash covers it, and one without keeps the settings, hash and headers of before."""
    plain = spec_from_config(CONFIG, POINT)
    assert not plain.envelope and "envelope" not in plain.settings()
    spec = spec_from_config(CONFIG, [*POINT, "--model.envelope", "true", "--model.envelope_margin", "0.25"])
    assert spec.envelope and spec.envelope_margin == 0.25 and spec.settings()["envelope"] is True
    assert spec.config_hash() != plain.config_hash() and spec.state_hash() != plain.state_hash()
    assert static_bytes(spec) == static_bytes(plain) + 2 * 2 * 4
    cfg = write_headers(spec, tmp_path / "envelope")[0].read_text()
    assert re.search(r"#define TU_ENVELOPE\s+1\b", cfg)
    assert "TU_ENVELOPE" not in write_headers(plain, tmp_path / "plain")[0].read_text()


def test_physical_parameters_are_generated_only_where_trained(tmp_path):
    """Trainable physical parameters (issue 32): the known field and the gradient's physical part are functions of
    theta, the configuration holds theta's bounds and the physics-first updates, and the settings hash covers
    them; a configuration without them has none of it (no TU_PHYSICAL)."""
    trained = ["--data.system.trainable", "{damping: [0.0, 1.0]}", "--model.physics_refit", "false"]
    spec = spec_from_config(CONFIG, [*POINT, *trained])
    cfg, data, code = (p.read_text() for p in write_headers(spec, tmp_path / "a"))
    assert re.search(r"#define TU_PHYSICAL\s+1\b", cfg) and re.search(r"#define TU_NUM_PHYSICAL\s+1\b", cfg)
    assert "tu_plant_physical_0(const float *x, const float *u, const float *theta" in code
    assert ".field_p = tu_plant_field_0" in data and ".theta_low = {0.0f}, .theta_high = {2.0f}" in data
    assert f".physics_updates = {int(0.25 * spec.max_steps)}," in data
    assert "tu_plant_sensitivity_0(const float *x, const float *u, const float *theta" in code
    assert ".sensitivity = tu_plant_sensitivity_0" in data and ".refit_evaluations = 0," in data
    first = spec_from_config(CONFIG, [*POINT, *trained, "--model.physics_first", "0.5"])
    assert first.config_hash() != spec.config_hash() and first.state_hash() != spec.state_hash()
    # a physics-alone run refits at its end (physics_refit, the default), which the hash covers
    alone = spec_from_config(CONFIG, [*POINT, *trained[:2], "--model.physics_first", "1"])
    unrefitted = spec_from_config(CONFIG, [*POINT, *trained, "--model.physics_first", "1"])
    assert alone.config_hash() != unrefitted.config_hash()
    assert ".refit_evaluations = 50," in write_headers(alone, tmp_path / "c")[1].read_text()
    plain = write_headers(spec_from_config(CONFIG, POINT), tmp_path / "b")
    assert not any("PHYSICAL" in p.read_text() or "theta" in p.read_text() for p in plain)


def test_a_position_only_log_derives_its_velocity_on_the_device(tmp_path):
    """data.velocity_from_position (issue 32, item 2): the device receives the positions and the inputs and derives
    the velocities (TU_VELOCITY, the row fs D1 in float32 in flash, a ring of 2M + 2 pushed samples); the hash covers
    the window; a configuration that streams every state has none of it (its headers: test_c_trainer.py's cases)."""
    config, _ = position_log(tmp_path, 12.0, 3)
    spec = spec_from_config(config, POINT)
    assert spec.velocity == VelocityFromPosition(3, 2) and spec.push_channels() == 2  # the angle, the torque
    assert spec.settings()["velocity_from_position"] == {"half_width": 3, "order": 2}
    wider = spec_from_config(config, [*POINT, "--data.velocity_from_position.half_width", "4"])
    assert wider.config_hash() != spec.config_hash() and wider.state_hash() != spec.state_hash()
    cfg, data, _ = (p.read_text() for p in write_headers(spec, tmp_path / "gen"))
    assert re.search(r"#define TU_VELOCITY\s+1\b", cfg) and re.search(r"#define TU_VEL_RING_MAX\s+8\b", cfg)
    assert re.search(r"#define TU_PUSH_CH\s+2\b", cfg) and re.search(r"#define TU_CH\s+3\b", cfg)
    assert ".positions = 1, .velocity_half_width = 3, .velocity_row = tu_velocity_row_0," in data
    table = re.search(r"tu_velocity_row_0\[7\] = \{([^}]*)\}", data).group(1)
    row = torch.tensor([float(v.strip(" ()f")) for v in table.split(",")], dtype=torch.float32)
    assert torch.equal(row, (savgol_rows(3, 2, 1)[1] * spec.fs).to(torch.float32))
    host = spec_from_settings(spec.system, spec.case, spec.field, False, {"stream": spec.stream},
                              {"fs": spec.fs, "train_rate": spec.train_rate, "recorded": True}, spec.max_steps,
                              spec.seed, "host-derived")
    assert static_bytes(spec) == static_bytes(host) + 8 + 8 * 3 * 4 + 4 * 4  # tick, ring of 2M + 2, four counts
    assert not any("VELOCITY" in p.read_text() or "velocity_row" in p.read_text()
                   for p in write_headers(host, tmp_path / "host"))
    with pytest.raises(TypeError, match=r"^data.velocity_from_position must be null or \{half_width, order\}; got "):
        spec_from_settings(spec.system, spec.case, spec.field, False, {}, {"fs": spec.fs, "train_rate": 25.0,
                           "velocity_from_position": {"width": 3}}, 10, 0, "a bad setting")
    with pytest.raises(ValueError, match=r"^velocity_from_position.half_width must be >= 1; got 0.$"):
        spec_from_settings(spec.system, spec.case, spec.field, False, {}, {"fs": spec.fs, "train_rate": 25.0,
                           "velocity_from_position": {"half_width": 0}}, 10, 0, "a bad setting")


def test_calibration_replay_gives_the_record_its_own_memory(tmp_path):
    """model.stream.calibration_replay (issue 32, item 2): the record streams again once calibrated, so it cannot share
    the reservoir's memory: TU_CAL_REPLAY gives it its own and keeps its ticks; the hash covers the setting, and a
    configuration without it keeps the hash, headers and memory of before (the record in a union with the
    reservoir)."""
    plain = spec_from_config(CONFIG, POINT)
    spec = spec_from_config(CONFIG, [*POINT, "--model.stream.calibration_replay", "true"])
    assert "calibration_replay" not in plain.settings()["stream"] and spec.settings()["stream"]["calibration_replay"]
    assert spec.config_hash() != plain.config_hash() and spec.state_hash() != plain.state_hash()
    cfg, data, _ = (p.read_text() for p in write_headers(spec, tmp_path / "replay"))
    assert re.search(r"#define TU_CAL_REPLAY\s+1\b", cfg) and ".calibration_replay = 1," in data
    assert not any("REPLAY" in p.read_text() or "replay" in p.read_text() for p in write_headers(plain, tmp_path / "p"))
    cal_len, ch = spec.stream.calibration_ticks(spec.fs), 2
    record = cal_len * ch * 4 + -(-2 * cal_len // 4) * 4 + cal_len * 4
    reservoir = spec.stream.capacity * 3 * ch * 4
    assert static_bytes(plain) - max(reservoir, record) == static_bytes(spec) - reservoir - record - 8 * cal_len
    sizes = member_sizes(tmp_path / "replay")
    assert sizes["total"] == static_bytes(spec) and sizes["calibration_record"] == record


def test_the_stream_settings_of_the_dfki_pendulum_config_go_to_the_device(tmp_path):
    """configs/dfki_pendulum.yaml's stream settings (every tick a window, calibration replay, B = 8192, a tighter
    gate) are generated, within the Cortex-M4F firmware's RAM (on the simulated pendulum's 1 kHz: its own logs need
    ../shared/data)."""
    config = yaml.safe_load((ROOT.parent / "configs" / "dfki_pendulum.yaml").read_text())
    stream = config["model"]["init_args"]["stream"]
    assert stream["calibration_replay"] is True and stream["stride"] == 1
    overrides = [arg for key, value in stream.items() for arg in (f"--model.stream.{key}", json.dumps(value))]
    spec = spec_from_config(CONFIG, [*POINT, *overrides])
    assert spec.stream.calibration_replay and spec.stream.capacity == stream["capacity"]
    cfg = write_headers(spec, tmp_path / "gen", ram_budget=default_ram_budget())[0].read_text()
    assert re.search(r"#define TU_CAL_REPLAY\s+1\b", cfg)

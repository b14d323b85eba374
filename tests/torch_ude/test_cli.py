"""The torch-ude console script: one-line errors, exit status 2, config files checked first."""
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

import torch_ude
from torch_ude.cli import console, fit_config, jet_matching_run, main, one_line, user_error
from torch_ude.systems import SinglePendulum
from torch_ude.training.overrides import nest_override_values, short_parse_error

CONFIG = "configs/pendulum_case_a.yaml"


def _console(monkeypatch, capsys, *args):
    """Run the console script in-process; returns (exit status, stderr)."""
    monkeypatch.setattr("sys.argv", ["torch-ude", *args])
    with pytest.raises(SystemExit) as exit_:
        console()
    return exit_.value.code, capsys.readouterr().err


@pytest.mark.parametrize("override,message", [
    (["--model.weight_decay", "-1"], "weight_decay must be >= 0; got -1.0."),
    (["--data.substeps", "0"], "substeps (RK4 steps per sample) must be an integer >= 1; got 0. Use 1, or more for "
                               "a plant whose dynamics are fast at the sample rate."),
    (["--data.case", "Z"], "case must be one of ['A', 'B', 'C'] for SinglePendulum; got 'Z'."),
])
def test_a_constructor_error_is_one_line_first_and_exit_status_2(monkeypatch, capsys, override, message):
    status, err = _console(monkeypatch, capsys, "fit", "--config", CONFIG, *override)
    assert status == 2
    lines = [line for line in err.splitlines() if line.startswith("torch-ude:")]
    assert lines[0] == f"torch-ude: error: {message}" and "TORCH_UDE_TRACEBACK=1" in lines[1]
    assert "Traceback" not in err and len(err.splitlines()) <= 4


def test_the_traceback_is_shown_on_request(monkeypatch):
    monkeypatch.setenv("TORCH_UDE_TRACEBACK", "1")
    monkeypatch.setattr("sys.argv", ["torch-ude", "fit", "--config", CONFIG, "--model.weight_decay", "-1"])
    with pytest.raises(ValueError) as err:
        console()
    assert user_error(err.value).args[0] == "weight_decay must be >= 0; got -1.0."


def test_an_error_outside_the_project_keeps_its_traceback():
    def third_party():
        raise ValueError("raised by someone else's code")

    try:
        third_party()
    except ValueError as err:
        assert user_error(err) is None


@pytest.mark.parametrize("content,message", [
    (b"", r"is empty \(or holds only comments\)"),
    (b"# nothing but a comment\n", r"is empty \(or holds only comments\)"),
    (b"\x89PNG\r\n\x1a\n\x00\xff", r"is not a text \(YAML\) file: byte 0x89 at position 0 is not UTF-8"),
    (b"trainer: [1\n", r"is not valid YAML at line 2, column 1"),
    (b"- 1\n- 2\n", r"must hold a mapping of settings \(key: value lines\); it holds a list"),
    (b"data:\n  init_args:\n    problem:\n      init_args:\n        recording:\n          class_path: mhe.racing.RacingSimulation\n",
     r"names mhe\.racing\.RacingSimulation at data\.init_args\.problem\.init_args\.recording, and there is no module "
     r"mhe\.racing \(a run saved before mhe/ was put in rooms"),
])
def test_a_bad_config_file_is_one_line_naming_the_file(tmp_path, monkeypatch, capsys, content, message):
    bad = tmp_path / "run.yaml"
    bad.write_bytes(content)
    with pytest.raises(ValueError, match=rf"^the config file {re.escape(str(bad))} {message}"):
        main(["fit", "--config", CONFIG, "--config", str(bad)], run=False)
    status, err = _console(monkeypatch, capsys, "fit", f"--config={bad}")
    assert status == 2 and err.splitlines()[0].startswith(f"torch-ude: error: the config file {bad} ")


def test_argument_errors_keep_jsonargparse_message(monkeypatch, capsys):
    status, err = _console(monkeypatch, capsys, "fit", "--config", CONFIG, "--trainer.max_stepz", "3")
    assert status == 2 and "unrecognized arguments: --trainer.max_stepz 3" in err


def test_the_installed_script_exits_with_status_2_on_an_error(tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    script = Path(sys.executable).with_name("torch-ude")
    proc = subprocess.run([str(script), "fit", "--config", str(empty)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0] == (f"torch-ude: error: the config file {empty} is empty (or holds only "
                                           "comments); put the run's settings in it, e.g. start from "
                                           "configs/pendulum_case_a.yaml.")


def test_a_missing_or_truncated_checkpoint_is_one_line_naming_the_file(tmp_path):
    missing = tmp_path / "nowhere.ckpt"
    with pytest.raises(ValueError, match=rf"^the checkpoint {re.escape(str(missing))} given as --ckpt_path does "
                                         r"not exist"):
        main(["fit", "--config", CONFIG, "--ckpt_path", str(missing)], run=False)
    truncated = tmp_path / "last.ckpt"
    with zipfile.ZipFile(truncated, "w") as archive:
        archive.writestr("archive/data.pkl", b"x" * 5000)
    truncated.write_bytes(truncated.read_bytes()[:3000])
    with pytest.raises(ValueError, match=rf"^the checkpoint {re.escape(str(truncated))} is not a complete "
                                         r"checkpoint file \(it is truncated or corrupt\)"):
        main(["fit", "--config", CONFIG, f"--ckpt_path={truncated}"], run=False)


# ----- issue 36: parse errors in one line, overrides that behave as in YAML ------------------------------------------

def test_a_value_jsonargparse_rejects_is_one_line_naming_the_setting(monkeypatch, capsys):
    status, err = _console(monkeypatch, capsys, "fit", "--config", CONFIG, "--model.stream.capacity", "many")
    assert status == 2 and "usage:" not in err and len(err.splitlines()) == 2
    assert err.splitlines()[0] == ("torch-ude: error: model.stream.capacity: expected an int, got many; fix this "
                                   "setting in the config or on the command line (torch-ude fit --help lists the "
                                   "settings and their types).")


@pytest.mark.parametrize("message, short", [
    ("unrecognized arguments: --x 3", "unrecognized arguments: --x 3"),
    ('Parser key "trainer.max_steps":\n  Expected a <class \'int\'>. Got value: abc',
     "trainer.max_steps: expected an int, got abc"),
    ('Parser key "data":\n  Does not validate against any of the Union subtypes\n  Subtypes: [A, B]\n  Errors:\n'
     '    - Problem with given class_path \'x.Y\':\n        Parser key "known":\n'
     '          - Expected a dot import path string: Nope\n'
     '          - Import path x.Y does not correspond to a subclass of VectorField\n'
     "    - Expected a <class 'NoneType'>\n  Given value type: <class 'str'>\n  Given value: Nope",
     "data.known: expected a dot import path string: Nope"),
])
def test_short_parse_error_keeps_the_setting_and_the_innermost_reason(message, short):
    assert short_parse_error(message) == short


def _single_pendulum_config(tmp_path) -> Path:
    config = yaml.safe_load(Path(CONFIG).read_text())
    config["data"]["init_args"]["system"] = {"class_path": "torch_ude.systems.SinglePendulum",
                                             "init_args": {"length": 2.0, "damping": 0.3}}
    path = tmp_path / "long.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_class_changed_on_the_command_line_takes_its_own_defaults(tmp_path, capsys):
    config = _single_pendulum_config(tmp_path)
    cli = main(["--config", str(config), "--data.system.class_path", "torch_ude.systems.FrictionPendulum"], run=False)
    plant = cli.datamodule.system
    # (jsonargparse passed the SinglePendulum's length on: FrictionPendulum took length 2.0 without a word)
    assert type(plant).__name__ == "FrictionPendulum" and plant.length == 1.0
    note = capsys.readouterr().err
    assert ("torch-ude: data.system is FrictionPendulum on the command line, not SinglePendulum: the settings given for "
            "SinglePendulum (length: 2.0) are not passed to it") in note
    cli = main(["--config", str(config), "--data.system", "FrictionPendulum", "--data.system.length", "1.5"], run=False)
    assert type(cli.datamodule.system).__name__ == "FrictionPendulum" and cli.datamodule.system.length == 1.5
    cli = main(["--config", str(config), "--data.system.class_path", "torch_ude.systems.SinglePendulum"], run=False)
    assert cli.datamodule.system.length == 2.0 and cli.datamodule.system.damping == 0.3  # same class: kept


class _SamePendulum(SinglePendulum):
    """A specialization that keeps SinglePendulum's constructor."""


def test_a_subclass_with_the_same_constructor_keeps_the_settings(tmp_path, capsys):
    config = _single_pendulum_config(tmp_path)
    cli = main(["--config", str(config), "--data.system.class_path", f"{__name__}._SamePendulum"], run=False)
    assert type(cli.datamodule.system).__name__ == "_SamePendulum" and cli.datamodule.system.length == 2.0
    assert "not passed to it" not in capsys.readouterr().err


def test_nested_null_and_nan_on_the_command_line_are_the_yaml_values():
    args = ["fit", "--data.problem.arrival.box", "[[0.0, 15.0], null]", "--model.x=[.nan]", "--data.fs", "100"]
    assert nest_override_values(args) == ["fit", "--data", "{problem: {arrival: {box: [[0.0, 15.0], null]}}}",
                                          "--model", "{x: [.nan]}", "--data.fs", "100"]


def test_an_error_of_a_file_reader_the_project_calls_is_one_line_naming_the_file(tmp_path):
    cut = tmp_path / "cut.npz"
    cut.write_bytes(b"PK\x03\x04 not a whole archive")
    code = compile("import numpy\ndef read(path):\n    return numpy.load(path)\n",
                   str(Path(torch_ude.__file__).parent / "reader_under_test.py"), "exec")
    space: dict = {}
    exec(code, space)  # a function whose frames belong to the project's package
    with pytest.raises(Exception) as err:
        space["read"](cut)
    assert user_error(err.value) is err.value
    assert one_line(err.value).startswith(f"the file {cut} could not be read (reader_under_test.read called zipfile, "
                                          f"which raised BadZipFile: File is not a zip file); check that the file")


def test_fit_config_runs_a_config_into_its_folder_and_reuses_a_finished_run(tmp_path):
    root = tmp_path / "run"
    short = ["--data.duration", "8", "--model.stream.capacity", "256", "--model.stream.calibration_s", "1.0",
             "--trainer.max_steps", "30"]
    metrics = fit_config(CONFIG, root, 3, short)
    assert metrics["updates"] == 30 and metrics["e_field"] > 0
    assert (root / "field.pt").is_file() and list(root.glob("**/events.out.tfevents.*"))  # outputs and logs in root
    (root / "metrics.json").write_text('{"e_field": 1.0}')
    assert fit_config(CONFIG, root, 3, short, reuse=True) == {"e_field": 1.0}


def test_fit_run_returns_the_metrics_the_data_and_the_exported_field(tmp_path):
    config = yaml.safe_load(Path(CONFIG).read_text())
    config["data"]["init_args"]["duration"] = 8.0
    config["model"]["init_args"]["stream"] |= {"capacity": 256, "calibration_s": 1.0}
    config["trainer"]["max_steps"] = 30
    (tmp_path / "short.yaml").write_text(yaml.safe_dump(config))
    metrics, dm, field = jet_matching_run(tmp_path / "short.yaml", 3, tmp_path / "run")
    assert metrics["updates"] == 30 and metrics["process_wall_s"] >= metrics["wall_s"] > 0
    assert isinstance(dm.system, SinglePendulum) and field.num_parameters() > 0
    assert (tmp_path / "run" / "field.pt").is_file() and not list(tmp_path.glob("**/events.out.tfevents.*"))

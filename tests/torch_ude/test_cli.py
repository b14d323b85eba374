"""The torch-ude console script: one-line errors, exit status 2, config files checked first."""
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from torch_ude.cli import console, main, user_error

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

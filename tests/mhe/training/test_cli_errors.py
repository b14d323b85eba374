"""Ordinary mistakes in a PEM-MHE run are one line naming the setting or file (issue 36, items 3 and 6)."""
import re
from pathlib import Path

import numpy as np
import pytest

from mhe.data.logs import read_csv
from torch_ude.cli import console, main

CONFIG = "configs/mhe_racing_physics_gn.yaml"
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def _in_the_repository(monkeypatch):
    monkeypatch.chdir(REPO)


def _console(monkeypatch, capsys, *args):
    monkeypatch.setattr("sys.argv", ["torch-ude", "fit", "--config", CONFIG, *map(str, args)])
    with pytest.raises(SystemExit) as done:
        console()
    err = capsys.readouterr().err
    assert done.value.code == 2 and "Traceback" not in err and "usage:" not in err
    lines = [line for line in err.splitlines() if line.startswith("torch-ude:")]
    assert len(lines) == 2 and "TORCH_UDE_TRACEBACK=1" in lines[1]
    return lines[0]


@pytest.mark.parametrize("key", ["mhe.process_std", "mhe.measurement_std", "arrival.std"])
def test_a_nan_standard_deviation_in_the_config_is_one_line_naming_it(tmp_path, monkeypatch, capsys, key):
    section, name = key.split(".")
    values = {"mhe.process_std": "[.nan, 0.005, 0.1]", "mhe.measurement_std": "[.nan, 0.002]",
              "arrival.std": "[.nan, 0.3, 3.0]"}[key]
    (tmp_path / "nan.yaml").write_text(f"data:\n  init_args:\n    problem:\n      {section}:\n        {name}: {values}\n")
    line = _console(monkeypatch, capsys, "--config", tmp_path / "nan.yaml", "--trainer.default_root_dir", tmp_path)
    assert line == (f"torch-ude: error: data.problem.{key}[0] is nan, not a finite number (1 such setting in the "
                    f"problem); set a finite value in the config (a standard deviation must be a positive number).")
    assert not (tmp_path / "metrics.json").exists()  # (the process_std one used to run and finish with J = nan)


def test_a_value_of_the_wrong_type_on_the_command_line_is_one_line(tmp_path, monkeypatch, capsys):
    line = _console(monkeypatch, capsys, "--data.problem.arrival.std", "[nan, 0.3, 3.0]")
    assert line == ("torch-ude: error: data.problem.arrival.std: expected a float, got nan; fix this setting in the "
                    "config or on the command line (torch-ude fit --help lists the settings and their types).")


def test_a_list_with_null_on_the_command_line_is_the_yaml_list(tmp_path):
    cli = main(["--config", CONFIG, "--data.problem.arrival.box", "[[0.0, 15.0], null, null]"], run=False)
    (tmp_path / "box.yaml").write_text("data:\n  init_args:\n    problem:\n      arrival:\n"
                                       "        box: [[0.0, 15.0], null, null]\n")
    yaml_cli = main(["--config", CONFIG, "--config", str(tmp_path / "box.yaml")], run=False)
    assert cli.datamodule.problem.arrival == yaml_cli.datamodule.problem.arrival
    assert cli.datamodule.problem.arrival.box == ((0.0, 15.0), None, None)
    assert cli.datamodule.problem.arrival.std == (1.0, 0.3, 3.0)  # the config's other arrival settings stay


def test_a_truncated_recording_is_one_line_naming_the_file(tmp_path, monkeypatch, capsys):
    np.savez(tmp_path / "whole.npz", time=np.arange(10.0))
    data = (tmp_path / "whole.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[: len(data) // 2])
    line = _console(monkeypatch, capsys, "--config", "configs/mhe_bayesrace_physics_gn.yaml",
                    "--data.problem.recording.init_args.path", tmp_path / "cut.npz",
                    "--trainer.default_root_dir", tmp_path / "run", "--model.solver.build_dir", tmp_path / "build")
    assert re.fullmatch(rf"torch-ude: error: {re.escape(str(tmp_path / 'cut.npz'))} is not a complete \.npz archive "
                        r"\(BadZipFile: .*\); the file is truncated or of another format: write it again with "
                        r"numpy\.savez\.", line)


@pytest.mark.parametrize("content, names", [
    ("\ufeff# t,vx\n0,1\n0.02,1\n", ["t", "vx"]),
    ('"t","vx"\n"0","1"\n"0.02","1.5"\n', ["t", "vx"]),
])
def test_a_csv_recording_with_a_byte_order_mark_or_quoted_numbers_reads(tmp_path, content, names):
    (tmp_path / "log.csv").write_text(content, encoding="utf-8")
    cols = read_csv(tmp_path / "log.csv")
    assert list(cols) == names and np.isfinite(np.stack(list(cols.values()))).all()


@pytest.mark.parametrize("content, message", [
    ("t,vx\n", r"log.csv holds the header line and no data rows"),
    ("t;vx\n0;1\n", r"log.csv: the header line 't;vx' is separated by semicolons, not commas"),
])
def test_a_csv_recording_that_cannot_be_read_names_the_file(tmp_path, content, message):
    (tmp_path / "log.csv").write_text(content)
    with pytest.raises(ValueError, match=message):
        read_csv(tmp_path / "log.csv")

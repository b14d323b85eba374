"""The checked-in PEM-MHE configs parse; the Gauss-Newton one fits through the ``torch-ude`` CLI on a few windows."""
import json

import pytest

from torch_ude.cli import main

SHORT = ["--data.init_args.steps", "120", "--data.init_args.horizon", "6", "--data.init_args.windows", "5",
         "--trainer.logger", "false", "--trainer.enable_progress_bar", "false"]


def _fit_gn(tmp_path, *extra):
    # 5 short windows span vx in [0.70, 1.47] m/s only, so s_bar_vx starts inside that data-derived box
    main(["fit", "--config", "configs/mhe_racing_physics_gn.yaml", *SHORT, "--model.init_args.arrival_mean",
          "[1.2, 0.0, 0.0]", "--trainer.default_root_dir", str(tmp_path), "--model.init_args.build_dir",
          str(tmp_path / "build"), *extra])
    return json.loads((tmp_path / "metrics.json").read_text())


def test_gauss_newton_config_fits_and_bounds_the_arrival_cost(tmp_path):
    metrics = _fit_gn(tmp_path, "--trainer.max_steps", "2")
    assert metrics["updates"] == 2 and metrics["failed_windows_total"] == 0 and metrics["stop_reason"] == ""
    config = json.loads((tmp_path / "field.json").read_text())["config"]
    assert config["optimizer"] == "gauss_newton" and config["cold_check"] and config["arrival_box"][1] == [-1.0, 1.0]
    values = metrics["parameters"]
    assert -1.2 < values["s_bar_1"] < 1.2 and 0.12 <= values["sigma_1"] <= 24.0


def test_gauss_newton_run_ends_when_a_stopping_test_fires(tmp_path):
    metrics = _fit_gn(tmp_path, "--trainer.max_steps", "30", "--model.init_args.ftol", "0.5",
                      "--model.init_args.patience", "1")
    assert metrics["stop_reason"] == "ftol" and 1 <= metrics["updates"] < 30


@pytest.mark.parametrize("name, optimizer", [("mhe_racing_physics", "adam"), ("mhe_racing_physics_gn", "gauss_newton")])
def test_configs_parse(name, optimizer, tmp_path):
    cli = main(["--config", f"configs/{name}.yaml", *SHORT, "--trainer.default_root_dir", str(tmp_path)], run=False)
    assert cli.model.hparams.optimizer == optimizer
    assert (cli.model.hparams.arrival_box is not None) == (optimizer == "gauss_newton")

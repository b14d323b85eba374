"""The checked-in PEM-MHE configs parse; the Gauss-Newton one fits through the ``torch-ude`` CLI on a few windows,
and the same config run in-process (`mhe.training.load_experiment` + `mhe.PEMIdentifier`) gives the same run."""
import dataclasses
import json
from pathlib import Path

import pytest

from mhe import PEMIdentifier
from mhe.training import load_experiment, pem_outputs, write_pem_outputs
from torch_ude.cli import main

# 5 short windows span vx in [0.70, 1.47] m/s only, so s_bar_vx starts inside that data-derived box
SHORT = ["--data.problem.recording.steps", "120", "--data.problem.mhe.horizon", "6", "--data.problem.windows", "5",
         "--data.problem.arrival.mean", "[1.2, 0.0, 0.0]", "--trainer.logger", "false"]


def _fit_gn(tmp_path, *extra):
    main(["fit", "--config", "configs/mhe_racing_physics_gn.yaml", *SHORT, "--trainer.enable_progress_bar", "false",
          "--trainer.default_root_dir", str(tmp_path), "--model.solver.build_dir", str(tmp_path / "build"), *extra])
    return json.loads((tmp_path / "metrics.json").read_text())


def test_gauss_newton_config_fits_bounds_the_arrival_cost_and_ends_with_a_summary(tmp_path, caplog):
    metrics = _fit_gn(tmp_path, "--trainer.max_steps", "2")
    assert metrics["updates"] == 2 and metrics["failed_windows_total"] == 0 and metrics["stop_reason"] == ""
    config = json.loads((tmp_path / "field.json").read_text())["extra"]["config"]
    assert config["outer"]["optimizer"] == "gauss_newton" and config["outer"]["cold_check"]
    assert config["problem"]["arrival"]["box"][1] == [-1.0, 1.0]
    values = metrics["parameters"]
    assert -1.2 < values["s_bar_1"] < 1.2 and 0.12 <= values["sigma_1"] <= 24.0
    last = caplog.records[-1].getMessage()
    assert last.startswith("PEM-MHE: mean relative parameter error") and last.endswith(f"outputs in {tmp_path}")


def test_gauss_newton_run_ends_when_a_stopping_test_fires(tmp_path):
    metrics = _fit_gn(tmp_path, "--trainer.max_steps", "30", "--model.outer.stopping.ftol", "0.5",
                      "--model.outer.stopping.patience", "1")
    assert metrics["stop_reason"] == "ftol" and 1 <= metrics["updates"] < 30


def test_a_config_run_in_process_is_the_cli_run(tmp_path):
    cli = _fit_gn(tmp_path / "cli", "--trainer.max_steps", "3")
    exp = load_experiment("configs/mhe_racing_physics_gn.yaml", [*SHORT, "--trainer.max_steps", "3",
                                                                 "--model.solver.build_dir", str(tmp_path / "b")])
    with PEMIdentifier(exp.problem, exp.max_steps, exp.outer, exp.solver) as pem:
        result = pem.fit()
    assert result.parameters == cli["parameters"] and result.loss == cli["J_final"]
    outputs = pem_outputs(tmp_path / "in_process", exp.problem, {"outer": exp.outer, "solver": exp.solver})
    outputs.start()
    assert json.loads(outputs.metrics_path.read_text())["status"] == "running"
    paths = write_pem_outputs(outputs, pem.estimator, result)
    metrics = json.loads(paths["metrics"].read_text())
    assert metrics["parameters"] == cli["parameters"] and metrics["status"] == "finished"
    sidecar = json.loads(paths["sidecar"].read_text())
    assert sidecar["extra"]["seed"] == metrics["seed"] and sidecar["torch_version"] == metrics["torch_version"]
    assert cli["status"] == "finished" and cli["trainer"] == "pem_mhe" and "library_version" in cli


@pytest.mark.parametrize("variant", sorted(Path("configs/mhe_iac_gray_variants").glob("*.yaml")), ids=lambda p: p.stem)
def test_gray_variants_change_only_what_they_hold_of_the_config_they_follow(variant, tmp_path):
    base = Path("configs/mhe_iac_gray.yaml")
    short = ["--trainer.logger", "false", "--trainer.default_root_dir", str(tmp_path)]
    full, layered = load_experiment(base, short), load_experiment([base, variant], short)
    assert layered.solver.build_dir != full.solver.build_dir  # a compiled network of another shape elsewhere
    assert layered.max_steps == full.max_steps
    a, b = full.problem.describe(), layered.problem.describe()
    changed = {k for k in a if a[k] != b[k]}
    outer = {f.name for f in dataclasses.fields(full.outer)
             if getattr(full.outer, f.name) != getattr(layered.outer, f.name)}
    assert (changed or outer) and changed <= {"residual", "stride"} and outer <= {"noise_fit", "weight_decay"}
    assert layered.problem.physics.params().keys() == full.problem.physics.params().keys()


@pytest.mark.parametrize("base, variants, changes", [
    ("configs/mhe_iac_physics_gn.yaml", ["physics.yaml"], {"recording", "physics", "mhe"}),
    ("configs/mhe_iac_gray.yaml", ["physics.yaml", "gray.yaml"], {"recording", "physics", "mhe", "arrival",
                                                                   "residual"})], ids=["physics", "gray"])
def test_the_blocked_split_changes_the_part_the_start_and_the_weights_only(base, variants, changes, tmp_path):
    short = ["--trainer.logger", "false", "--trainer.default_root_dir", str(tmp_path)]
    full = load_experiment(base, short)
    layered = load_experiment([base, *(f"configs/mhe_iac_split_blocked/{v}" for v in variants)], short)
    a, b = full.problem.describe(), layered.problem.describe()
    assert {k for k in a if a[k] != b[k]} == changes
    assert layered.solver.build_dir != full.solver.build_dir and layered.outer == full.outer
    assert layered.max_steps == full.max_steps and layered.problem.stride == full.problem.stride
    part = layered.problem.source.part
    assert part == (0.0, 0.2, 0.3, 0.5, 0.6, 0.8, 0.9, 1.0) and layered.problem.source.rest().part == (
        0.2, 0.3, 0.5, 0.6, 0.8, 0.9)
    bounds = full.problem.physics.params.bounds
    assert layered.problem.physics.params.bounds == bounds


@pytest.mark.parametrize("path", sorted(Path("configs").glob("mhe_*.yaml")), ids=lambda p: p.stem)
def test_configs_parse(path, tmp_path):
    text = path.read_text()
    real_log = "mhe.data.logs." in text or "LogsRecording" in text  # a log file has no 'steps'
    short = SHORT[2:] if real_log else SHORT
    if "mhe.problems.torque_pendulum." in text:  # the pendulum's logs keep their arrival mean (the car's 3 states do not fit)
        short = [*SHORT[2:6], *SHORT[8:]]
    exp = load_experiment(path, [*short, "--trainer.default_root_dir", str(tmp_path)])
    # Gauss-Newton: the _gn configs and the real rigs' (named after their data, as the jet configs)
    data_named = {"mhe_dfki_pendulum", "mhe_dfki_double_pendulum", "mhe_emps"}
    assert exp.outer.optimizer == ("gauss_newton" if path.stem.endswith("_gn") or path.stem in data_named else "adam")
    # a bounded arrival cost: every Gauss-Newton config, and every real log (the gray-box IAC run is Adam)
    # (the real rigs' arrival costs are unbounded, as benchmarks.real.dfki_pem's problem was: its results are kept,
    # and the EMPS and double-pendulum configs follow it)
    bounded = (exp.outer.optimizer == "gauss_newton" or real_log) and path.stem not in data_named
    assert (exp.problem.arrival.box is not None) == bounded
    assert (exp.problem.residual is not None) == ("gray" in path.stem) and exp.max_steps > 0


def test_the_two_tank_gray_variant_adds_a_residual_with_its_envelope_and_adam_only(tmp_path):
    base = load_experiment("configs/mhe_two_tank_gn.yaml", [*SHORT, "--trainer.default_root_dir", str(tmp_path)])
    gray = load_experiment(["configs/mhe_two_tank_gn.yaml", "configs/mhe_two_tank_variants/gray.yaml"],
                           [*SHORT, "--trainer.default_root_dir", str(tmp_path)])
    assert base.problem.residual is None and gray.problem.envelope_wanted and gray.problem.residual.width == 16
    assert gray.outer.optimizer == "adam" and gray.outer.criterion == "prediction"
    assert gray.problem.describe() == {**base.problem.describe(), "residual": gray.problem.describe()["residual"]}


def test_the_cli_starts_a_gray_box_from_a_physics_only_run_folder_and_refuses_another_physics(tmp_path):
    from tests.mhe.helpers import physics_run

    run, _, _ = physics_run(tmp_path)  # the leaking tank's physics: not the two-tank config's
    with pytest.raises(Exception, match="is a run of the physics 'Leak'; this problem's physics is 'TwoTanks'"):
        load_experiment(["configs/mhe_two_tank_gn.yaml", "configs/mhe_two_tank_variants/gray.yaml"],
                        ["--data.problem.start", str(run)])

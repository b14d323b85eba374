"""Table 2 on the IAC log (benchmarks.mhe.iac): a tiny end-to-end run, the configs' start and residual scales,
bad input."""
import json
from pathlib import Path

import pytest

from benchmarks.mhe.iac import CONFIG, GRAY, GRAY_CONFIG, gray_overrides, logged_state_start, main, model_at
from mhe.peers.state_pem import residual_scales
from mhe.training import load_experiment
from tests.mhe.datasets import data_file

ROOT = Path(__file__).resolve().parents[3]
DATA = "iac/LVMS_23_01_04_B.csv"
BLOCKED = "configs/mhe_iac_split_blocked/physics.yaml"
TINY = ["--data.problem.recording.init_args.part", "[0.0, 0.05]", "--data.problem.windows", "5",
        "--data.problem.arrival.mean", "[7.0, 0.0, 0.0]", "--trainer.logger", "false"]


def test_a_tiny_run_writes_both_rows_the_table_and_the_plot(tmp_path, monkeypatch):
    data_file(DATA)
    monkeypatch.chdir(ROOT)
    out = tmp_path / "out"
    main([*TINY, "--trainer.max_steps", "1", "--starts", "1", "--validation-part", "0.95", "1.0", "--out", str(out),
          "--model.solver.build_dir", str(tmp_path / "build"), "--trainer.default_root_dir", str(tmp_path / "run")])
    table = json.loads((out / "table2.json").read_text())
    rows = table["rows"]
    assert list(rows) == ["start", "EKF->PEM", "PEM-MHE (physics-only)"]
    for row in rows.values():
        assert row["train"]["windows"] == 5 and row["validation"]["windows"] == 5
        assert row["validation"]["multi_step"]["steps"] == 25 and row["validation"]["multi_step"]["rollouts"] == 5
    # one Gauss-Newton step on the PEM objective lowers the one-step error on its own windows
    assert rows["PEM-MHE (physics-only)"]["train"]["mse"] < rows["start"]["train"]["mse"]
    bounds = load_experiment(CONFIG, ["--trainer.logger", "false"]).problem.physics.params.bounds
    assert all(bounds[n].contains(v) for n, v in rows["EKF->PEM"]["values"].items() if n in bounds)
    assert rows["EKF->PEM"]["training_s"] > 0 and rows["PEM-MHE (physics-only)"]["training_s"] > 0
    assert (out / "validation.png").stat().st_size > 10_000


def test_a_config_on_another_recording_is_an_error(monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(ValueError, match=r"must read an mhe.data.logs.IACRecording; it reads BayesRaceRecording"):
        main(["--config", "configs/mhe_bayesrace_physics_gn.yaml", "--trainer.logger", "false"])


@pytest.mark.slow
@pytest.mark.parametrize("configs", [[CONFIG], [CONFIG, BLOCKED]], ids=["split_70_30", "split_blocked"])
def test_the_config_holds_the_start_and_weights_that_start_computes(configs, monkeypatch):
    data_file(DATA)
    monkeypatch.chdir(ROOT)
    problem = load_experiment(configs, ["--trainer.logger", "false"]).problem
    made = logged_state_start(problem)
    config = problem.start_values()
    for n, v in made["values"].items():
        assert v == pytest.approx(config[n], rel=1e-6, abs=1e-9), n
    # Q is a fixed point of (fit the start with Q, set Q from its residuals) to within 1 %
    assert made["process_std"] == pytest.approx(problem.mhe.process_std, rel=0.01)
    assert [float(f"{r:.2g}") for r in made["measurement_std"]] == list(problem.mhe.measurement_std)


@pytest.mark.slow
def test_a_tiny_run_with_gray_adds_the_gray_box_row_with_a_trained_network(tmp_path, monkeypatch):
    data_file(DATA)
    monkeypatch.chdir(ROOT)
    out = tmp_path / "out"
    main([*TINY, "--gray", "--trainer.max_steps", "2", "--starts", "1", "--validation-part", "0.95", "1.0",
          "--out", str(out), "--model.solver.build_dir", str(tmp_path / "build"),
          "--trainer.default_root_dir", str(tmp_path / "run")])
    rows = json.loads((out / "table2.json").read_text())["rows"]
    assert list(rows) == ["start", "EKF->PEM", "PEM-MHE (physics-only)", GRAY]
    gray = rows[GRAY]
    assert gray["train"]["windows"] == 5 and gray["validation"]["multi_step"]["rollouts"] == 5
    assert gray["steps"] == 2 and gray["failed_window_solves"] == 0 and gray["training_s"] > 0
    assert gray["residual"]["sizes"] == [5, 32, 32, 3]
    assert gray["residual"]["last_layer_weight_norm"] > 1e-3  # Adam moved the zero-initialised last layer
    assert gray["values"] != gray["start"]  # and the physics
    assert (out / "gray" / "field.pt").is_file()


def test_gray_settings_become_overrides_of_the_gray_config_only():
    assert gray_overrides(["data.problem.residual.seed=1", "--model.outer.lr=0.003", "a.b=[0, 1]"]) == [
        "--data.problem.residual.seed", "1", "--model.outer.lr", "0.003", "--a.b", "[0, 1]"]
    for bad in ("data.problem.residual.seed", "=1"):
        with pytest.raises(ValueError, match="--gray-set takes KEY=VALUE"):
            gray_overrides([bad])


def test_gray_config_without_a_residual_is_an_error(monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(ValueError, match=r"--gray-config configs/mhe_iac_physics_gn.yaml must add a neural residual"):
        main(["--gray", "--gray-config", CONFIG, "--trainer.logger", "false"])


@pytest.mark.parametrize("configs", [[GRAY_CONFIG], [GRAY_CONFIG, BLOCKED, "configs/mhe_iac_split_blocked/gray.yaml"]],
                         ids=["split_70_30", "split_blocked"])
def test_the_gray_config_holds_the_residual_scales_measured_at_its_start(configs, monkeypatch):
    data_file(DATA)
    monkeypatch.chdir(ROOT)
    problem = load_experiment(configs, ["--trainer.logger", "false"]).problem
    made = residual_scales(model_at(problem, problem.start_values()), problem.recording)
    assert [float(f"{v:.2g}") for v in made["in_scale"]] == list(problem.residual.in_scale)
    assert [float(f"{v:.2g}") for v in made["out_scale"]] == list(problem.residual.out_scale)


def test_held_out_with_fewer_than_two_blocks_per_cycle_is_an_error(monkeypatch):
    data_file(DATA)
    monkeypatch.chdir(ROOT)
    with pytest.raises(ValueError, match=r"every_k \(every k-th block held out\) must be >= 2"):
        main(["--held-out", "1", *TINY])

"""The DFKI benchmarks: the double-pendulum config reads the real logs, and a tiny end-to-end run
scores jet matching, the RK4 baseline, f_known alone and the lab's model 3.0 and compares the
residual torques with model 3.0's."""
import json
import math
from pathlib import Path

import pytest
import yaml

from baselines.matched import baseline_config
from benchmarks.common import KEYS
from benchmarks.real.dfki_pendulum import main
from torch_ude import HybridField
from torch_ude.metrics import residual_torques
from torch_ude.cli import main as cli_main
from torch_ude.systems import TorqueDoublePendulumModel
from torch_ude.training import RecordedDataModule

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT.parent / "shared" / "data" / "dfki_double_pendulum"
SINGLE = ROOT.parent / "shared" / "data" / "dfki_pendulum"
CONFIG = ROOT / "configs" / "dfki_double_pendulum.yaml"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"the DFKI double-pendulum files are not at {DATA} "
                                                          f"(see ../shared/data/README.md)")


def _module(config: dict) -> RecordedDataModule:
    data = config["data"]["init_args"]
    return RecordedDataModule(TorqueDoublePendulumModel(**data["known"]["init_args"]),
                              files=[str(DATA / Path(f).name) for f in data["files"]],
                              val_files=[str(DATA / Path(f).name) for f in data["val_files"]], time=data["time"],
                              states=data["states"], inputs=data["inputs"], fs=data["fs"],
                              train_rate=data["train_rate"], horizons=data["horizons"])


@needs_data
def test_the_config_is_model_3_1_on_trajectories_00_to_04():
    config = yaml.safe_load(CONFIG.read_text())
    data = config["data"]["init_args"]
    configured = TorqueDoublePendulumModel(**data["known"]["init_args"]).init_args()
    assert sorted(configured.pop("trainable")) == ["Ir", "b1", "b2", "cf1", "cf2"]  # what model 3.0 adds
    assert configured == TorqueDoublePendulumModel.from_lab_file(DATA / "model_3.1_parameters.yml").init_args()
    assert [Path(f).name for f in data["files"]] == [f"trajectory_0{i}.csv" for i in range(3)]
    assert [Path(f).name for f in data["val_files"]] == ["trajectory_03.csv", "trajectory_04.csv"]
    dm = _module(config)
    # 500 Hz logs with jittery stamps, decimated onto the 100 Hz grid, short gaps bridged, none split
    reports = [log.report for log in dm.train_logs + dm.val_logs]
    assert [r.decimation for r in reports] == [5] * 5
    assert all(r.rejected_nonfinite == 0 and r.segments == 1 and r.bridged > 0 for r in reports)
    assert dm.duration == pytest.approx(30.0, abs=0.1)


@needs_data
def test_the_lab_friction_is_what_the_rigid_body_model_lacks():
    dm = _module(yaml.safe_load(CONFIG.read_text()))
    lab = TorqueDoublePendulumModel.from_lab_file(DATA / "model_3.0_parameters.yml")
    out = residual_torques(HybridField.configured_physics(dm.system.known), lab, dm.system.known, dm.val_logs)
    assert out["rms_residual"] == [0.0, 0.0] and out["rms_difference"] == out["rms_reference"]
    # the Coulomb terms cf atan(100 q') dominate model 3.0's friction: |F| -> cf pi/2 = 0.146 and
    # 0.123 N m once |q'| >> 0.01 rad/s (b q' adds < 0.01 N m); its rotor inertia adds torque where
    # the joints accelerate
    for rms, cf in zip(out["rms_reference_friction"], (0.093, 0.078)):
        assert 0.5 * cf < rms < cf * math.pi / 2 + 0.01
    assert all(r > f for r, f in zip(out["rms_reference"], out["rms_reference_friction"]))


def test_missing_data_files_stop_the_benchmark(tmp_path):
    config = yaml.safe_load(CONFIG.read_text())
    config["data"]["init_args"]["files"] = [str(tmp_path / "nowhere.csv")]
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(SystemExit, match=r"the data files \[.*nowhere.csv'.* are missing"):
        main(["--config", str(tmp_path / "c.yaml")])


def _tiny_run(tmp_path: Path, monkeypatch, config_file: Path, data_dir: Path, name: str) -> dict:
    """The benchmark on ``config_file`` with its files in ``data_dir``, 40 updates, 3 baseline iterations."""
    config = yaml.safe_load(config_file.read_text())
    config["trainer"]["max_steps"] = 40
    data = config["data"]["init_args"]
    for key in ("files", "val_files"):
        data[key] = [str(data_dir / Path(f).name) for f in data[key]]
    (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(config))
    monkeypatch.chdir(tmp_path)
    main(["--config", f"{name}.yaml", "--seeds", "0", "--iterations", "3", "--windows", "4", "--steps", "5",
          "--baseline", str(baseline_config(config_file))])
    return json.loads((tmp_path / "results" / name / f"{name}.json").read_text())


@pytest.mark.skipif(not SINGLE.is_dir(), reason=f"the DFKI pendulum files are not at {SINGLE} (see ../shared/data/README.md)")
def test_a_tiny_single_pendulum_run(tmp_path, monkeypatch):
    out = _tiny_run(tmp_path, monkeypatch, ROOT / "configs" / "dfki_pendulum.yaml", SINGLE, "tiny_single")
    # the benchmark's baseline is the run `torch-ude fit --config configs/baseline_dfki_pendulum.yaml` makes (the same
    # settings overridden), to the last digit
    data = yaml.safe_load((ROOT / "configs" / "dfki_pendulum.yaml").read_text())["data"]["init_args"]
    files = {key: json.dumps([str(SINGLE / Path(f).name) for f in data[key]]) for key in ("files", "val_files")}
    cli_main(["fit", "--config", str(ROOT / "configs" / "baseline_dfki_pendulum.yaml"), "--seed_everything", "0",
              "--trainer.logger", "false", "--trainer.enable_progress_bar", "false", "--trainer.default_root_dir",
              str(tmp_path / "direct"), "--trainer.max_steps", "3", "--data.steps", "5", "--data.n_windows", "4",
              "--data.files", files["files"], "--data.val_files", files["val_files"]])
    direct = json.loads((tmp_path / "direct" / "metrics.json").read_text())
    assert all(out["rk4_baseline"][0][k] == direct[k] for k in KEYS) and direct["updates"] == 3
    assert out["lab_model"]["parameters"]["Fc"] > 0
    # the lab's friction and offset as a torque: one joint, nonzero, compared with both residuals
    for method in ("jet matching", "RK4 baseline"):
        (row,) = out["residual_torques"][method]
        assert len(row["rms_reference"]) == 1 and row["rms_reference"][0] > 0
        assert "rms_reference_friction" not in row


@pytest.mark.parametrize("name", ["dfki_pendulum", "dfki_double_pendulum", "emps"])
def test_the_linear_configs_are_the_defaults_with_the_linear_term(name, monkeypatch):
    # the default config holds the form that won on its validation files (issue 31: input-affine, trained physical
    # parameters, and for the single pendulum and EMPS those parameters alone, physics_first: 1); the _linear
    # variant is the same run with the plain linear term, a residual from the start and the known model's fixed
    # parameters
    base, linear = (yaml.safe_load((ROOT / "configs" / f"{n}.yaml").read_text()) for n in (name, f"{name}_linear"))
    assert linear["model"]["init_args"].pop("linear") is True and "input_affine" not in linear["model"]["init_args"]
    assert "trainable" not in linear["data"]["init_args"]["known"]["init_args"]
    assert linear["trainer"].pop("default_root_dir") == f"runs/{name}_linear"
    base["trainer"].pop("default_root_dir")
    assert "physics_first" not in linear["model"]["init_args"]
    for key in ("linear", "input_affine", "physics_first"):
        base["model"]["init_args"].pop(key, None)
    base["data"]["init_args"]["known"]["init_args"].pop("trainable", None)
    # the DFKI defaults train on the calibration record too and keep every jet (measured there); the _linear
    # variants keep the live stream's calibration and the device's reservoir, as the C configs built on them must
    assert "calibration_replay" not in linear["model"]["init_args"]["stream"]
    base["model"]["init_args"]["stream"].pop("calibration_replay", None)
    if name.startswith("dfki"):
        assert base["model"]["init_args"]["stream"].pop("capacity") == 8192
        assert linear["model"]["init_args"]["stream"].pop("capacity") == 2048
    if name == "dfki_pendulum":  # the single pendulum's tighter misfit gate, measured on its physics alone
        assert base["model"]["init_args"]["stream"].pop("gate_factor") == 2.0
    assert linear == base
    folder = ROOT.parent / "shared" / "data" / name
    if not folder.is_dir():
        pytest.skip(f"the config's data files are not at {folder} (see ../shared/data/README.md)")
    monkeypatch.chdir(ROOT)
    cli = cli_main(["--config", f"configs/{name}_linear.yaml"], run=False)
    assert cli.model.linear is True


@pytest.mark.skipif(not SINGLE.is_dir(), reason=f"the DFKI pendulum files are not at {SINGLE} (see ../shared/data/README.md)")
def test_a_tiny_run_with_the_linear_term_gives_the_baseline_the_same_field_form(tmp_path, monkeypatch):
    out = _tiny_run(tmp_path, monkeypatch, ROOT / "configs" / "dfki_pendulum_linear.yaml", SINGLE, "tiny_linear")
    # 4 inputs (sin q, cos q, q', tau: the angle is periodic), 2 outputs: 4-16-16-2 has 386 weights, L adds 8
    assert out["field"] == {"hidden": [16, 16], "linear": True, "input_affine": False, "num_parameters": 394}
    assert out["rk4_baseline"][0]["num_parameters"] == 394


@pytest.mark.skipif(not SINGLE.is_dir(), reason=f"the DFKI pendulum files are not at {SINGLE} (see ../shared/data/README.md)")
def test_a_tiny_input_affine_run_gives_the_baseline_the_same_field_form(tmp_path, monkeypatch):
    out = _tiny_run(tmp_path, monkeypatch, ROOT / "configs" / "dfki_pendulum_affine.yaml", SINGLE, "tiny_affine")
    # the tanh layers read (sin q, cos q, q') only: 386 weights less 16 for tau's column, L adds 8
    assert out["field"] == {"hidden": [16, 16], "linear": True, "input_affine": True, "num_parameters": 378}
    assert out["rk4_baseline"][0]["num_parameters"] == 378


@pytest.mark.parametrize("name", ["dfki_pendulum", "dfki_double_pendulum", "emps"])
def test_a_data_sets_baseline_config_trains_what_its_jet_config_does(name):
    # the benchmark runs the baseline config with the jet config's known model and field form: for the data set's
    # own config these are the baseline config's, so the benchmark's baseline row is a user's `torch-ude fit` run
    jet, base = (yaml.safe_load((ROOT / "configs" / f"{n}.yaml").read_text()) for n in (name, f"baseline_{name}"))
    assert jet["data"]["init_args"]["known"] == base["data"]["init_args"]["known"]
    for key in ("files", "val_files"):
        assert jet["data"]["init_args"][key] == base["data"]["init_args"][key]
    defaults = {"hidden": [16, 16], "linear": False, "input_affine": False}  # both modules' defaults
    for key, value in defaults.items():
        assert jet["model"]["init_args"].get(key, value) == base["model"]["init_args"].get(key, value)


@pytest.mark.parametrize("name", ["dfki_pendulum", "dfki_double_pendulum", "emps"])
def test_the_affine_configs_are_the_linear_configs_with_the_input_affine_form(name):
    linear, affine = (yaml.safe_load((ROOT / "configs" / f"{name}_{v}.yaml").read_text()) for v in ("linear", "affine"))
    assert affine["model"]["init_args"].pop("input_affine") is True
    assert affine["trainer"].pop("default_root_dir") == f"runs/{name}_affine"
    linear["trainer"].pop("default_root_dir")
    assert affine == linear


@needs_data
def test_a_tiny_run(tmp_path, monkeypatch):
    out = _tiny_run(tmp_path, monkeypatch, CONFIG, DATA, "tiny_double")
    assert out["jet_matching"][0]["updates"] == 40 and out["rk4_baseline"][0]["updates"] == 3
    assert out["lab_model"]["parameters"]["cf1"] == 0.093
    # the lab's friction and rotor inertia predict the validation runs far better than model 3.1 alone
    assert out["lab_model"]["open_loop_1s_nrmse"] < 0.25 * out["f_known_alone"]["open_loop_1s_nrmse"]
    assert set(out["residual_torques"]) == {"jet matching", "RK4 baseline"}
    assert (tmp_path / "results" / "tiny_double" / "residual_torque.png").is_file()

"""The EMPS benchmark: the IDIM-LS recomputation, the pulses already in the voltage, the full-record
simulation score, and a tiny end-to-end run on the real records."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from benchmarks.dfki_pendulum import configured_physics
from benchmarks.emps import BENCHMARK_IDIM, full_simulation, idim_ls, main, pulse_steps
from torch_ude.prediction import rk4_input_rollout
from torch_ude.recorded import RecordedLog
from torch_ude.systems import LinearAxisModel

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data" / "emps"
CONFIG = ROOT / "configs" / "emps.yaml"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"the EMPS records are not at {DATA} "
                                                          f"(see ../shared/data/README.md)")


@needs_data
def test_idim_ls_recomputes_the_benchmarks_values():
    fit = idim_ls(DATA / "DATA_EMPS.mat")
    # the benchmark's script values (Simulation_EMPS_Validation.m) within one of our standard deviations
    for key in ("M", "Fv", "Fc", "offset"):
        assert abs(fit[key] - BENCHMARK_IDIM[key]) < fit["std"][key], key
    assert fit["M"] == pytest.approx(95.10, abs=0.01) and 3.5 < fit["relative_error_percent"] < 5.0
    # the config's known model carries that mass
    known = yaml.safe_load(CONFIG.read_text())["data"]["init_args"]["known"]["init_args"]
    assert known["mass"] == pytest.approx(fit["M"], rel=1e-4) and known["gain"] == pytest.approx(fit["gtau"])


@needs_data
def test_the_validation_voltage_already_holds_the_force_pulses():
    steps = pulse_steps(DATA / "DATA_EMPS_PULSES.mat")
    # pulses of 5 (pulses_N) show as steps of about 5 V in vir, i.e. 5 gtau = 176 N, not 5 N
    assert steps["onset"]["count"] == 25 and steps["onset"]["mean_V"] == pytest.approx(5.07, abs=0.01)
    assert steps["end"]["mean_V"] == pytest.approx(-5.06, abs=0.01) and steps["onset"]["std_V"] < 0.05


def test_the_full_simulation_of_the_model_that_made_a_record_is_exact_and_a_wrong_one_is_not():
    truth = LinearAxisModel(mass=2.0, gain=1.0, viscous=3.0, coulomb=0.5, coulomb_velocity=0.05, offset=0.1)
    fs, steps = 1000.0, 3000
    t = torch.arange(steps + 1, dtype=torch.float64) / fs
    u = (2.0 * torch.sin(3.0 * t) + 0.1).unsqueeze(1)
    x = rk4_input_rollout(truth, torch.tensor([[0.0, 0.0]]), u.unsqueeze(1), 1.0 / fs)[:, 0]
    log = RecordedLog(fs=fs, names=("q", "q_dot", "u"), n_states=2,
                      segments=[torch.cat((x, u), dim=1).numpy()], starts=[0.0])
    exact = full_simulation(configured_physics(truth), log)
    assert exact["rms_q_m"] < 1e-12 and exact["r2_q"] == pytest.approx(1.0, abs=1e-12)
    wrong = full_simulation(configured_physics(LinearAxisModel(mass=2.0, gain=1.0)), log)
    q = log.segments[0][:, 0]
    err = wrong["series"]["simulated"] - q
    assert wrong["rms_q_mm"] == pytest.approx(1e3 * np.sqrt(np.mean(err**2)))
    assert wrong["r2_q"] == pytest.approx(1 - np.sum(err**2) / np.sum((q - q.mean())**2)) and wrong["r2_q"] < 0.9


def test_missing_data_files_stop_the_benchmark(tmp_path):
    config = yaml.safe_load(CONFIG.read_text())
    config["data"]["init_args"]["val_files"] = [str(tmp_path / "nowhere.mat")]
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(SystemExit, match=r"the data files \[.*nowhere.mat'.* are missing"):
        main(["--config", str(tmp_path / "c.yaml")])


@needs_data
def test_a_tiny_run(tmp_path, monkeypatch):
    config = yaml.safe_load(CONFIG.read_text())
    config["trainer"]["max_steps"] = 40
    data = config["data"]["init_args"]
    for key in ("files", "val_files"):
        data[key] = [str(DATA / Path(f).name) for f in data[key]]
    (tmp_path / "tiny_emps.yaml").write_text(yaml.safe_dump(config))
    monkeypatch.chdir(tmp_path)
    main(["--config", "tiny_emps.yaml", "--seeds", "0", "--iterations", "3", "--windows", "4", "--steps", "5",
          "--baseline", str(ROOT / "configs" / "baseline_emps.yaml")])
    folder = tmp_path / "results" / "tiny_emps"
    out = json.loads((folder / "tiny_emps.json").read_text())
    assert out["jet_matching"][0]["updates"] == 40 and out["rk4_baseline"][0]["updates"] == 3
    # IDIM-LS as a whole model simulates the validation record closely; f_known alone drifts away
    assert out["idim_ls_model"]["simulation_r2_q"] > 0.95
    assert out["f_known_alone"]["simulation_rms_q_mm"] > 10 * out["idim_ls_model"]["simulation_rms_q_mm"]
    assert out["position_only"]["sigma_v_derived_m_per_s"] < 1e-3 * out["position_only"]["velocity_rms_m_per_s"]
    row = out["jet_matching"][0]["residual_force"]
    assert len(row["rms_reference"]) == 1 and row["rms_reference"][0] > 10.0  # N: Fv v and Fc dominate
    assert (folder / "residual_force.png").is_file() and (folder / "simulation.png").is_file()

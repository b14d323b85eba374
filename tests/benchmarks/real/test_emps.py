"""The EMPS benchmark: a tiny end-to-end run on the real records (the IDIM-LS recomputation and the pulses already
in the voltage: tests/torch_ude/systems/test_linear_axis.py; the full-record simulation score:
tests/torch_ude/test_prediction.py)."""
import json
from pathlib import Path

import pytest
import yaml

from benchmarks.real.emps import main

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT.parent / "shared" / "data" / "emps"
CONFIG = ROOT / "configs" / "emps.yaml"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"the EMPS records are not at {DATA} "
                                                          f"(see ../shared/data/README.md)")


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

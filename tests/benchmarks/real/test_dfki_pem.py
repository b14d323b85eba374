"""benchmarks.real.dfki_pem: PEM–MHE on the real DFKI pendulum, scored like jet matching there."""
import json
from pathlib import Path

import pytest
import yaml

from benchmarks.real.dfki_pem import VARIANTS, main

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT.parent / "shared" / "data" / "dfki_pendulum"


def _config(tmp_path: Path, data_dir: Path) -> Path:
    config = yaml.safe_load((ROOT / "configs" / "dfki_pendulum.yaml").read_text())
    data = config["data"]["init_args"]
    for key in ("files", "val_files"):
        data[key] = [str(data_dir / Path(f).name) for f in data[key]]
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    return tmp_path / "c.yaml"


def test_the_variants_are_angle_only_or_both_and_friction_or_all():
    assert {VARIANTS[k][0] for k in VARIANTS} == {(0,), (0, 1)}
    assert VARIANTS["theta_friction"][1] == ("Fv", "Fc", "offset") and len(VARIANTS["theta_all"][1]) == 5


def test_missing_data_files_stop_the_benchmark(tmp_path):
    with pytest.raises(SystemExit, match=r"the data files \[.*energy_shaping.csv"):
        main(["--config", str(_config(tmp_path, tmp_path / "nowhere"))])


@pytest.mark.skipif(not DATA.is_dir(), reason=f"the DFKI pendulum files are not at {DATA} (see ../shared/data/README.md)")
def test_one_iteration_on_the_real_logs(tmp_path, monkeypatch):
    config = _config(tmp_path, DATA)
    monkeypatch.chdir(tmp_path)
    main(["--config", str(config), "--variants", "theta_friction", "--max-steps", "1", "--name", "tiny"])
    out = json.loads((tmp_path / "results" / "tiny" / "tiny.json").read_text())
    row = out["pem"]["theta_friction"]  # the identification itself: tests/mhe/training/test_recorded.py
    assert row["steps"] == 1 and row["parameters"]["J"] == 6.259e-2
    assert row["open_loop_1s_nrmse"] > 0 and out["lab_model"]["parameters"]["Fc"] == 0.1839
    assert "from_dfki_pendulum" not in out and (tmp_path / "results" / "tiny" / "rollouts.png").is_file()

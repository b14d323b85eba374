"""mhe.training.pem_identify: PEM-MHE on a jet-matching config's recorded logs (skipped without the DFKI files)."""
from pathlib import Path

import pytest

from mhe.training import pem_identify
from torch_ude.cli import main

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT.parent / "shared" / "data" / "dfki_pendulum"


@pytest.mark.skipif(not DATA.is_dir(),
                    reason=f"the DFKI pendulum files are not at {DATA} (see ../shared/data/README.md)")
def test_one_gauss_newton_step_on_the_real_logs_moves_the_friction_only(tmp_path, monkeypatch):
    text = (ROOT / "configs" / "dfki_pendulum.yaml").read_text().replace("../shared/data/dfki_pendulum", str(DATA))
    (tmp_path / "dfki.yaml").write_text(text)
    monkeypatch.chdir(tmp_path)
    dm = main(["--config", "dfki.yaml", "--trainer.logger", "false"], run=False).datamodule
    model, info = pem_identify(dm, (0,), ("Fv", "Fc", "offset"), 1, tmp_path / "build",
                               ROOT / "configs" / "mhe_dfki_pendulum.yaml")
    assert info["steps"] == 1 and info["windows"] > 100 and info["wall_s"] > 0
    # one Gauss-Newton step moves the friction off its start; J and m cx stay the known model's
    assert info["parameters"]["J"] == model.inertia == dm.system.known.inertia == 6.259e-2
    assert info["parameters"]["Fc"] == pytest.approx(model.coulomb) and info["parameters"]["Fc"] != pytest.approx(0.01)

"""``torch-ude score`` of a PEM-MHE model of a position-only log (issue 35): configs/mhe_emps.yaml trained by
``torch-ude fit`` leaves a field that ``score`` reads with the velocity derived from the position as the run's
recording derived it, scored as the same physics scores under jet matching's prediction errors."""
import json
from pathlib import Path

import pytest

from torch_ude.cli import main
from torch_ude.field import HybridField
from torch_ude.position_only import VelocityFromPosition, with_velocities
from torch_ude.prediction import prediction_errors
from torch_ude.recorded import read_log
from torch_ude.systems.linear_axis import LinearAxisModel

from tests.torch_ude.test_score import _run

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "mhe_emps.yaml"
EMPS = ROOT.parent / "shared" / "data" / "emps"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """configs/mhe_emps.yaml for 1 Gauss-Newton iteration on its first 6 windows."""
    if not EMPS.is_dir():
        pytest.skip(f"the EMPS records are not at {EMPS} (see ../shared/data/README.md)")
    folder = tmp_path_factory.mktemp("mhe_emps")
    main(["fit", "--config", str(CONFIG), "--trainer.max_steps", "1", "--trainer.default_root_dir", str(folder),
          "--trainer.enable_progress_bar", "false", "--data.problem.windows", "6",
          "--data.problem.recording.init_args.files", json.dumps([str(EMPS / "DATA_EMPS.mat")]),
          "--model.solver.build_dir", str(folder / "build")])
    return folder


def test_a_position_only_pem_mhe_run_is_scored_on_derived_velocities(run, monkeypatch, capsys, tmp_path):
    val = EMPS / "DATA_EMPS_PULSES.mat"
    code, out, _ = _run(monkeypatch, capsys, "score", str(run), "--files", str(val), "--fs", "1000", "--horizons",
                        "1", "--out", str(tmp_path))
    assert code == 0 and "DATA_EMPS_PULSES.mat" in out and "free 1 s" in out
    scored = json.loads((tmp_path / "score.json").read_text())
    assert scored["fs"] == 1000.0 and scored["columns"]["velocity_from_position"] == {"half_width": 5, "order": 2}
    # the identified parameters as jet matching's known model with the residual switched off, on the same log
    p = json.loads((run / "field.json").read_text())["parameters"]
    field = HybridField(LinearAxisModel(mass=p["M"], gain=35.15065188, viscous=p["Fv"], coulomb=p["Fc"],
                                        offset=p["offset"]))
    for w in field.parameters_list():
        w.detach().zero_()
    log = with_velocities(read_log(val, "t", ["qm"], ["vir"], 1000.0), VelocityFromPosition(5, 2))
    expected = prediction_errors(field, [log], [1.0])
    for key in ("one_step_nrmse", "open_loop_1s_nrmse"):
        assert scored["pooled"][key] == pytest.approx(expected[key], rel=1e-9), key
    assert 0 < scored["pooled"]["free_run_1s_nrmse"] < 0.1

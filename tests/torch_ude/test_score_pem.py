"""``torch-ude score`` of a PEM-MHE model (issue 35, items 1-3): configs/mhe_dfki_pendulum.yaml trained by
``torch-ude fit`` leaves a field that ``score`` reads, scored as benchmarks.real.dfki_pem scores it, and the
one-line refusals of a config that describes another model."""
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
import torch

from torch_ude import load_field
from torch_ude import score as score_module
from torch_ude.cli import main
from torch_ude.field import HybridField
from torch_ude.prediction import prediction_errors
from torch_ude.recorded import read_log
from torch_ude.systems.controlled import TorquePendulumModel

from tests.torch_ude.test_score import _run

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "mhe_dfki_pendulum.yaml"
DFKI = ROOT.parent / "shared" / "data" / "dfki_pendulum"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """configs/mhe_dfki_pendulum.yaml for 2 Gauss-Newton iterations on its first 8 windows."""
    if not DFKI.is_dir():
        pytest.skip(f"the DFKI pendulum logs are not at {DFKI} (see ../shared/data/README.md)")
    folder = tmp_path_factory.mktemp("mhe_dfki")
    files = [str(DFKI / f) for f in ("energy_shaping.csv", "sysid_pd.csv", "gravity_compensation.csv")]
    main(["fit", "--config", str(CONFIG), "--trainer.max_steps", "2", "--trainer.default_root_dir", str(folder),
          "--trainer.enable_progress_bar", "false", "--data.problem.windows", "8",
          "--data.problem.recording.init_args.files", json.dumps(files),
          "--model.solver.build_dir", str(folder / "build")])
    return folder


def test_a_pem_mhe_run_is_scored_as_the_benchmark_scores_its_model(run, monkeypatch, capsys, tmp_path):
    sidecar = json.loads((run / "field.json").read_text())
    assert set(sidecar["arrival"]) == {"mean", "std"} and len(sidecar["arrival"]["std"]) == 2
    code, out, _ = _run(monkeypatch, capsys, "score", str(run), "--files", str(DFKI / "ddp.csv"), "--fs", "100",
                        "--horizons", "1", "5", "--out", str(tmp_path))
    assert code == 0 and "ddp.csv" in out and "all files (pooled)" in out
    scored = json.loads((tmp_path / "score.json").read_text())
    # benchmarks.real.dfki_pem: the identified parameters as the known model with the residual switched off
    p = sidecar["parameters"]
    model = TorquePendulumModel(inertia=p["J"], mass_com=p["m_cx"], gravity=9.81, viscous=p["Fv"], coulomb=p["Fc"],
                                offset=p["offset"])
    field = HybridField(model)
    for w in field.parameters_list():
        w.detach().zero_()
    log = read_log(DFKI / "ddp.csv", "time", ["position", "velocity"], ["torque"], 100.0)
    expected = prediction_errors(field, [log], [1.0, 5.0])
    for key in ("one_step_nrmse", "open_loop_1s_nrmse", "open_loop_5s_nrmse"):
        assert scored["pooled"][key] == pytest.approx(expected[key], rel=1e-9), key
    assert scored["fs"] == 100.0 and (tmp_path / "ddp.png").is_file()


def test_a_pem_mhe_model_reads_its_own_grid_and_a_jittery_log(run, monkeypatch, capsys, tmp_path):
    d = np.genfromtxt(DFKI / "ddp.csv", delimiter=",", names=True)
    t = np.arange(d["time"][0], d["time"][-1], 1 / 616) + np.random.default_rng(0).uniform(-0.3, 0.3) / 616
    cols = [t] + [np.interp(t, d["time"], d[c]) for c in ("position", "velocity", "torque")]
    path = tmp_path / "r616.csv"
    np.savetxt(path, np.stack(cols, 1), delimiter=",", header="time,position,velocity,torque", comments="")
    code, out, _ = _run(monkeypatch, capsys, "score", str(run), "--files", str(path), "--out", str(tmp_path / "s"))
    scored = json.loads((tmp_path / "s" / "score.json").read_text())
    assert code == 0 and scored["fs"] == 50.0 and np.isfinite(scored["pooled"]["open_loop_1s_nrmse"])
    assert load_field(run).evaluate_unchecked is not None and load_field(run).n_inputs == 1


@pytest.mark.parametrize("edit, pattern", [
    (lambda c: c["data"]["init_args"]["problem"]["physics"].update(class_path="mhe.problems.two_tank.TwoTanks"), "physics"),
    (lambda c: c["data"]["init_args"]["problem"]["physics"]["init_args"].update(identify=["Fv"]),
     "identified parameters"),
    (lambda c: c["data"]["init_args"]["problem"]["recording"]["init_args"].update(states=["q", "qd"]),
     "state layout"),
    (lambda c: c["data"]["init_args"]["problem"].update(residual={"width": 8}), "residual"),
    (None, "trainer")])
def test_score_refuses_a_pem_mhe_model_under_a_config_of_another_model(run, monkeypatch, capsys, tmp_path, edit,
                                                                       pattern):
    if edit is None:  # a jet-matching config
        path = ROOT / "configs" / "dfki_pendulum.yaml"
    else:
        content = yaml.safe_load(CONFIG.read_text())
        edit(content)
        path = tmp_path / "other.yaml"
        path.write_text(yaml.safe_dump(content))
    code, _, err = _run(monkeypatch, capsys, "score", str(run), "--files", str(DFKI / "ddp.csv"), "--config",
                        str(path), "--out", str(tmp_path / "s"))
    lines = [line for line in err.splitlines() if line.startswith("torch-ude: error:")]
    assert code == 2 and len(lines) == 1 and re.search(pattern, lines[0]), err


def test_score_sends_a_pem_mhe_model_of_a_mapped_recording_to_validate(run, monkeypatch, capsys, tmp_path):
    other = tmp_path / "iac_run"
    shutil.copytree(run, other, ignore=shutil.ignore_patterns("checkpoints"))
    sidecar = json.loads((other / "field.json").read_text())
    sidecar["extra"]["config"]["problem"]["recording"] = {"class": "IACRecording", "path": "LVMS.csv"}
    (other / "field.json").write_text(json.dumps(sidecar))
    code, _, err = _run(monkeypatch, capsys, "score", str(other), "--files", str(DFKI / "ddp.csv"))
    lines = [line for line in err.splitlines() if line.startswith("torch-ude: error:")]
    assert code == 2 and len(lines) == 1 and re.search(r"IACRecording.*torch-ude validate", lines[0]), err


def test_a_pem_mhe_run_is_also_scored_by_free_run_from_estimated_states(run, monkeypatch, capsys, tmp_path):
    """issue 35 item 1: the free-run NRMSE per horizon beside the open-loop one, and a wrong parameter scores worse."""
    code, out, _ = _run(monkeypatch, capsys, "score", str(run), "--files", str(DFKI / "ddp.csv"), "--horizons", "1",
                        "5", "20", "--out", str(tmp_path))
    scored = json.loads((tmp_path / "score.json").read_text())
    assert code == 0 and "free 1 s" in out and "free 5 s" in out and "mhe 1 s" in out and "mhe 5 s" in out
    for entry in (scored["files"][0], scored["pooled"]):
        for key in ("free_run_1s", "free_run_5s", "mhe_free_run_1s"):
            assert np.isfinite(entry[f"{key}_nrmse"]) and entry[f"{key}_nrmse"] > 0, entry
        assert entry["mhe_free_run_1s_failed"] == 0
        assert entry["free_run_20s_nrmse"] is None  # ddp.csv holds 6 s: too short, reported, not dropped
        # the MHE's start needs the N = 50 samples (1 s at 50 Hz) before it: 1 s + 5 s is more than the file's 6 s
        assert entry["mhe_free_run_5s_nrmse"] is None and entry["mhe_free_run_20s_nrmse"] is None
    assert "too short" in out
    estimator = score_module.pem_run_estimator(run)
    log = score_module.read_scored_log(DFKI / "ddp.csv", score_module.columns_of(load_field(run)))
    trained = score_module.pem_free_run(estimator, [log], [1.0])["pooled"]
    assert trained["free_run_1s_nrmse"] == pytest.approx(scored["pooled"]["free_run_1s_nrmse"], rel=1e-6)
    assert trained["mhe_free_run_1s_nrmse"] == pytest.approx(scored["pooled"]["mhe_free_run_1s_nrmse"], rel=1e-6)
    params = estimator.model.physics.params
    params.assign({"m_cx": 0.5 * float(params()["m_cx"])})  # half the gravity torque: a wrong pendulum
    wrong = score_module.pem_free_run(estimator, [log], [1.0])["pooled"]
    for kind in ("free_run", "mhe_free_run"):
        assert wrong[f"{kind}_1s_nrmse"] > 1.5 * trained[f"{kind}_1s_nrmse"], (kind, wrong, trained)
    trained = trained["free_run_1s_nrmse"]
    # a horizon shorter than one step of the model is one step, not a crash (review)
    short = score_module.pem_free_run(estimator, [log], [0.001])["pooled"]["free_run_0.001s_nrmse"]
    assert np.isfinite(short) and short < trained


def test_a_pem_mhe_run_whose_estimator_cannot_be_rebuilt_is_scored_without_the_free_run(run, monkeypatch, capsys,
                                                                                        tmp_path):
    """The open-loop score stands and score.json says why the free run is missing (its checkpoint gone here)."""
    copy = tmp_path / "run"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("*.ckpt", "build"))
    code, out, _ = _run(monkeypatch, capsys, "score", str(copy), "--files", str(DFKI / "ddp.csv"), "--horizons", "1",
                        "--out", str(tmp_path / "score"))
    scored = json.loads((tmp_path / "score" / "score.json").read_text())
    assert code == 0 and "free 1 s" not in out and "the free run is not scored" in out
    assert "holds no checkpoint" in scored["free_run_skipped"] and np.isfinite(scored["pooled"]["open_loop_1s_nrmse"])


@pytest.fixture(scope="module")
def gray_run(tmp_path_factory):
    """configs/mhe_dfki_pendulum.yaml with a small residual (a recorded log: its trust envelope on by default),
    1 Adam iteration on its first 8 windows; no residual check (scored here is the residual with its envelope)."""
    if not DFKI.is_dir():
        pytest.skip(f"the DFKI pendulum logs are not at {DFKI} (see ../shared/data/README.md)")
    folder = tmp_path_factory.mktemp("mhe_dfki_gray")
    files = [str(DFKI / f) for f in ("energy_shaping.csv", "sysid_pd.csv", "gravity_compensation.csv")]
    residual = {"width": 4, "in_scale": [3.0, 5.0, 1.0], "out_scale": [0.1, 1.0], "seed": 0, "check": False}
    main(["fit", "--config", str(CONFIG), "--trainer.max_steps", "1", "--trainer.default_root_dir", str(folder),
          "--trainer.enable_progress_bar", "false", "--data.problem.windows", "8",
          "--data.problem.recording.init_args.files", json.dumps(files), "--model.outer.optimizer", "adam",
          "--model.outer.lr", "0.01", "--data.problem.residual", json.dumps(residual),
          "--model.solver.build_dir", str(folder / "build")])
    return folder


def test_a_gray_box_pem_mhe_run_is_scored_with_its_trust_envelope(gray_run, monkeypatch, capsys, tmp_path):
    """issue 33 item 5: the envelope recorded at the end of the run reaches field.pt, field.json, the share outside
    it and the free run (the estimator rebuilt from the checkpoint takes it from field.json)."""
    sidecar = json.loads((gray_run / "field.json").read_text())
    metrics = json.loads((gray_run / "metrics.json").read_text())
    env = sidecar["envelope"]
    assert env["span"]["channels"] == ["q", "qdot", "tau"] and metrics["envelope"]["windows"] == 8
    code, out, _ = _run(monkeypatch, capsys, "score", str(gray_run), "--files", str(DFKI / "ddp.csv"), "--fs", "100",
                        "--horizons", "1", "--out", str(tmp_path))
    scored = json.loads((tmp_path / "score.json").read_text())
    assert code == 0 and 0.0 <= scored["pooled"]["outside_envelope"] <= 1.0
    assert np.isfinite(scored["pooled"]["free_run_1s_nrmse"])
    state = torch.load(gray_run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)["state_dict"]
    assert state["estimator.model.residual.envelope_low"].tolist() == env["low"]  # the checkpoint has it too
    estimator = score_module.pem_run_estimator(gray_run, sidecar)
    net = estimator.model.residual
    assert [t.tolist() for t in net.envelope] == [env["low"], env["high"], env["margin"]]
    field = load_field(gray_run)
    x = torch.tensor([[0.1, 0.2], [4.0, 30.0]], dtype=torch.float64)  # the second far outside: faded to physics
    u = torch.tensor([[0.1], [5.0]], dtype=torch.float64)
    ours = estimator.model.field(x, u, torch.zeros_like(x)).detach()
    assert torch.allclose(field(x, u), ours, rtol=1e-12, atol=1e-12) and bool(field.outside(x, u)[1])
    physics = estimator.model.physics(x, u)
    assert torch.equal(ours[1], physics[1].detach())
    log = score_module.read_scored_log(DFKI / "ddp.csv", score_module.columns_of(field))
    trained = score_module.pem_free_run(estimator, [log], [1.0])["pooled"]["free_run_1s_nrmse"]
    assert trained == pytest.approx(scored["pooled"]["free_run_1s_nrmse"], rel=1e-6)


def test_the_mhe_start_of_a_free_run_reads_only_the_samples_before_it(run):
    """issue 35: the ``mhe`` columns start each window from the MHE's estimate of the N samples before it, so changing
    every sample from the start on leaves the start unchanged, while the fitted start moves with them."""
    estimator = score_module.pem_run_estimator(run)
    log = score_module.read_scored_log(DFKI / "ddp.csv", score_module.columns_of(load_field(run)))
    rows = torch.as_tensor(log.segments[0], dtype=torch.float64)
    n, at = estimator.settings.horizon, [estimator.settings.horizon, 2 * estimator.settings.horizon + 7]
    before, ok = score_module._mhe_starts(estimator, rows, log.n_states, list(estimator.model.measured), at, 1)
    changed = rows.clone()
    changed[at[0] + 1:, 0] += 0.3  # every angle after the first start (the second window's past included)
    after, ok2 = score_module._mhe_starts(estimator, changed, log.n_states, list(estimator.model.measured), at, 1)
    assert bool(ok.all()) and bool(ok2.all()) and before.shape == (2, 2)
    assert torch.equal(before[0], after[0])  # the future of the first start is never read
    assert not torch.allclose(before[1], after[1])  # the second start's past changed: its estimate moves
    assert abs(float(before[0, 0]) - float(rows[n, 0])) < 0.05  # the estimate sits at the measured angle

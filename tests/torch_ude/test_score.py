"""``torch-ude score`` (issue 35, items 1-2): a trained model scored on logs at any rate, per file and pooled,
and the one-line refusals of what it cannot score honestly."""
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from torch_ude import SinglePendulum, export_field
from torch_ude.cli import console, main
from torch_ude.recorded import RecordedLog, read_log, resample_segment
from torch_ude.score import comparison_figure
from torch_ude.systems import TorquePendulumModel
from torch_ude.training.recorded import RecordedPlant
from tests.torch_ude.helpers import random_field, variant_field

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"
DFKI = DATA / "dfki_pendulum"
needs_dfki = pytest.mark.skipif(not DFKI.is_dir(), reason=f"the DFKI pendulum logs are not at {DFKI} "
                                                          f"(see ../shared/data/README.md)")


def _run(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    """``torch-ude ARGS`` through the console script: (exit status, stdout, stderr)."""
    monkeypatch.setattr("sys.argv", ["torch-ude", *args])
    try:
        console()
        code = 0
    except SystemExit as done:
        code = done.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _refused(monkeypatch, capsys, pattern: str, *args: str) -> None:
    code, _, err = _run(monkeypatch, capsys, "score", *args)
    lines = [line for line in err.splitlines() if line.startswith("torch-ude: error:")]
    assert code == 2 and len(lines) == 1 and re.search(pattern, lines[0]), err


def _write(path: Path, t: np.ndarray, source: dict) -> str:
    """A CSV log of ``source``'s columns interpolated at the times ``t``."""
    cols = [t] + [np.interp(t, source["time"], source[c]) for c in ("position", "velocity", "torque")]
    np.savetxt(path, np.stack(cols, 1), delimiter=",", header="time,position,velocity,torque", comments="",
               fmt="%.12g")
    return str(path)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A tiny jet-matching model of the DFKI pendulum (configs/dfki_pendulum.yaml, 200 updates)."""
    if not DFKI.is_dir():
        pytest.skip(f"the DFKI pendulum logs are not at {DFKI} (see ../shared/data/README.md)")
    folder = tmp_path_factory.mktemp("dfki_run")
    files = [str(DFKI / f) for f in ("energy_shaping.csv", "sysid_pd.csv", "gravity_compensation.csv")]
    main(["fit", "--config", str(ROOT / "configs" / "dfki_pendulum.yaml"), "--trainer.max_steps", "200",
          "--trainer.default_root_dir", str(folder), "--trainer.logger", "false",
          "--trainer.enable_progress_bar", "false", "--trainer.enable_checkpointing", "false",
          "--data.files", json.dumps(files), "--data.val_files", json.dumps([str(DFKI / "ddp.csv")])])
    return folder


@pytest.fixture(scope="module")
def rates(run, tmp_path_factory):
    """The DDP swing-up (500 Hz) as a 50 Hz, a 333 Hz and a jittery 616 Hz log."""
    folder = tmp_path_factory.mktemp("rates")
    d = np.genfromtxt(DFKI / "ddp.csv", delimiter=",", names=True)
    t = d["time"]
    grid = np.arange(t[0], t[-1], 1 / 616)
    jitter = np.random.default_rng(0).uniform(-0.3, 0.3, grid.size) / 616
    return [_write(folder / "r50.csv", t[::10], d), _write(folder / "r333.csv", np.arange(t[0], t[-1], 1 / 333), d),
            _write(folder / "r616.csv", grid + jitter, d)]


@needs_dfki
def test_score_prints_a_table_per_file_and_pooled_at_50_333_and_jittery_616_hz(run, rates, monkeypatch, capsys,
                                                                              tmp_path):
    code, out, _ = _run(monkeypatch, capsys, "score", str(run), "--files", *rates, str(DFKI / "ddp.csv"),
                        "--horizons", "0.5", "1", "--out", str(tmp_path), "--per-channel")
    assert code == 0
    names = [line.split()[0] for line in out.splitlines()[2:-1] if not line.startswith(" ")]
    assert names == ["r50.csv", "r333.csv", "r616.csv", "ddp.csv", "all"]
    assert sum(line.strip().startswith(("position", "velocity")) for line in out.splitlines()) == 10
    record = json.loads((tmp_path / "score.json").read_text())
    files = record["files"]
    rates_hz = [1 / f["report"]["dt_median"] for f in files]
    assert np.allclose(rates_hz[:3], [50, 333, 616], rtol=0.02)
    # 333 and 616 Hz are not multiples of the model's 100 Hz: filtered before decimation; 50 Hz is interpolated
    assert [f["report"]["antialiased"] for f in files] == [False, True, True, False]
    assert [f["report"]["decimation"] for f in files] == [1, 4, 7, 5]
    for f in files:
        assert f["report"]["samples"] == pytest.approx(600, abs=2)  # 6 s on the 100 Hz grid, whatever the rate
        assert np.isfinite([f["one_step_nrmse"], f["open_loop_0.5s_nrmse"], f["open_loop_1s_nrmse"]]).all()
        assert 0.0 <= f["outside_envelope"] <= 1.0 and (tmp_path / f["figure"]).is_file()
    # the run's own validation file, read as training reads it, scores exactly what its metrics.json says
    metrics = json.loads((run / "metrics.json").read_text())
    assert files[3]["one_step_nrmse"] == pytest.approx(metrics["one_step_nrmse"], rel=1e-12)
    assert files[3]["open_loop_1s_nrmse"] == pytest.approx(metrics["open_loop_1s_nrmse"], rel=1e-12)
    # the pooled row pools the four files' samples (each lies between the files' extremes)
    pooled = record["pooled"]["one_step_nrmse"]
    assert min(f["one_step_nrmse"] for f in files) <= pooled <= max(f["one_step_nrmse"] for f in files)


@needs_dfki
def test_a_file_too_short_for_a_horizon_is_reported_as_such(run, monkeypatch, capsys, tmp_path):
    code, out, _ = _run(monkeypatch, capsys, "score", str(run / "field.pt"), "--files", str(DFKI / "sysid_pd.csv"),
                        "--horizons", "1", "5", "--out", str(tmp_path), "--tensorboard")
    row = next(line for line in out.splitlines() if line.startswith("sysid_pd.csv"))
    assert code == 0 and re.search(r"\s\d\.\d{4}\s+too short\s+[\d.]+ %$", row), row  # 1 s scored, 5 s too short
    record = json.loads((tmp_path / "score.json").read_text())
    assert record["files"][0]["too_short"] == [5.0] and record["files"][0]["open_loop_1s_nrmse"] is not None
    assert record["files"][0]["longest_segment_s"] < 5.0
    # --tensorboard: the figure and the scored numbers as events
    events = EventAccumulator(str(next((tmp_path / "tensorboard").glob("events.*"))))
    events.Reload()
    assert events.Tags()["images"] == ["score/sysid_pd"]
    assert set(events.Tags()["scalars"]) == {"score/sysid_pd/one_step_nrmse", "score/sysid_pd/open_loop_1s_nrmse"}
    assert events.Scalars("score/sysid_pd/one_step_nrmse")[0].value == pytest.approx(
        record["files"][0]["one_step_nrmse"], rel=1e-6)


def test_decimation_with_antialiasing_removes_content_above_the_new_nyquist_rate():
    fs, k = 100.0, 7
    t = np.arange(0, 6, 1 / (k * fs))
    slow, fast = np.sin(2 * np.pi * 2.0 * t), 0.5 * np.sin(2 * np.pi * 93.0 * t)  # 93 Hz folds onto 7 Hz at 100 Hz
    count = int(np.floor(t[-1] * fs)) + 1
    filtered = resample_segment(t, np.stack([slow + fast], 1), fs, count, decimation=k)[:, 0]
    plain = resample_segment(t, np.stack([slow + fast], 1), fs, count, decimation=1)[:, 0]
    truth = np.sin(2 * np.pi * 2.0 * np.arange(count) / fs)
    inner = slice(20, -20)  # (edges: the filter's padding)
    assert np.abs(filtered - truth)[inner].max() < 0.01 * 0.5
    assert np.abs(plain - truth)[inner].max() > 0.4  # without the filter the 93 Hz line aliases at full size


@needs_dfki
def test_score_refuses_a_run_without_a_trained_model(monkeypatch, capsys, tmp_path):
    (tmp_path / "metrics.json").write_text(json.dumps({"status": "failed", "reason": "calibration never finished"}))
    _refused(monkeypatch, capsys, r"the run in .* has no trained model: its metrics.json says \"failed\" "
                                  r"\(calibration never finished\)", str(tmp_path), "--files", str(DFKI / "ddp.csv"))
    _refused(monkeypatch, capsys, r"the model .*nowhere does not exist; pass a run folder",
             str(tmp_path / "nowhere"), "--files", str(DFKI / "ddp.csv"))


@needs_dfki
def test_score_refuses_a_model_of_another_plant_case_layout_or_network_shape(run, monkeypatch, capsys, tmp_path):
    ddp = str(DFKI / "ddp.csv")
    config = yaml.safe_load((ROOT / "configs" / "dfki_pendulum.yaml").read_text())
    # another plant: the EMPS axis config
    _refused(monkeypatch, capsys, r"its known model is 'torch_ude.systems.controlled.TorquePendulumModel', the "
                                  r"config's is 'torch_ude.systems.LinearAxisModel'",
             str(run), "--files", ddp, "--config", str(ROOT / "configs" / "emps.yaml"))
    # another input layout, another network shape, the residual's form
    for change, pattern in ((("data", "inputs", ["tau"]), r"its input layout is \['torque'\], the config's is "
                                                          r"\['tau'\]"),
                            (("model", "hidden", [32, 32]), r"hidden widths \(model.hidden\) is \[16, 16\], the "
                                                            r"config's is \[32, 32\]"),
                            (("model", "linear", False), r"its model.linear is True, the config's is False")):
        other = json.loads(json.dumps(config))
        other[change[0]]["init_args"][change[1]] = change[2]
        (tmp_path / "other.yaml").write_text(yaml.safe_dump(other))
        _refused(monkeypatch, capsys, pattern, str(run), "--files", ddp, "--config", str(tmp_path / "other.yaml"))
    # the config it was trained with is accepted
    code, _, _ = _run(monkeypatch, capsys, "score", str(run), "--files", ddp, "--config",
                      str(ROOT / "configs" / "dfki_pendulum.yaml"), "--out", str(tmp_path / "ok"))
    assert code == 0
    # columns of another layout on the command line, and a file without the model's columns
    _refused(monkeypatch, capsys, r"the model reads 2 state column\(s\) and 1 input column\(s\)", str(run), "--files",
             ddp, "--states", "position", "velocity", "acceleration")
    _refused(monkeypatch, capsys, r"variable\(s\) \['time', 'position', 'velocity', 'torque'\] named in the config "
                                  r"are not in the file", str(run), "--files", str(DATA / "emps" / "DATA_EMPS.mat"))


@needs_dfki
def test_score_refuses_a_field_pt_of_another_network_than_its_field_json(run, monkeypatch, capsys, tmp_path):
    other = variant_field("torque", 0, periodic=(0,))
    plant = RecordedPlant(other.known, ["position", "velocity"], ["torque"], periodic=["position"])
    other_shape = type(other)(other.known, hidden=(8,), periodic=(0,))
    export_field(other_shape, tmp_path / "other", plant, "RECORDED")
    shutil.copytree(run, tmp_path / "mixed", ignore=shutil.ignore_patterns("score", "checkpoints"))
    shutil.copy(tmp_path / "other" / "field.pt", tmp_path / "mixed" / "field.pt")
    _refused(monkeypatch, capsys, r"field.pt holds a network with layer widths \[8, 2\] but its field.json records "
                                  r"\[16, 16, 2\]", str(tmp_path / "mixed"), "--files", str(DFKI / "ddp.csv"))


def test_score_refuses_a_case_a_model_under_a_case_b_config(monkeypatch, capsys, tmp_path):
    export_field(random_field("single", "A", 0), tmp_path, SinglePendulum(), "A")
    log = tmp_path / "log.csv"
    log.write_text("time,theta,omega\n0,0,0\n0.001,0,0\n")
    _refused(monkeypatch, capsys, r"its case is 'A', the config's is 'B'", str(tmp_path), "--files", str(log),
             "--config", str(ROOT / "configs" / "pendulum_case_b.yaml"))
    # without recorded columns (a simulated plant) the columns must be named
    _refused(monkeypatch, capsys, r"records no log columns or rate .* name them with --time --states --fs",
             str(tmp_path), "--files", str(log))
    code, out, _ = _run(monkeypatch, capsys, "score", str(tmp_path), "--files", str(log), "--time", "time",
                        "--states", "theta", "omega", "--fs", "1000", "--horizons", "1")
    assert code == 0 and re.search(r"log.csv .* too short", out)


def test_a_bad_score_argument_is_one_line(monkeypatch, capsys, tmp_path):
    _refused(monkeypatch, capsys, r"torch-ude score: the following arguments are required: --files; see torch-ude "
                                  r"score --help", str(tmp_path))
    _refused(monkeypatch, capsys, r"--horizons must be positive durations in s; got \[-1.0\]", str(tmp_path),
             "--files", "a.csv", "--horizons", "-1")


@needs_dfki
def test_an_implausible_value_is_flagged_counted_and_left_out(run, monkeypatch, capsys, tmp_path):
    d = np.genfromtxt(DFKI / "ddp.csv", delimiter=",", names=True)
    table = np.stack([d[n] for n in d.dtype.names], 1)
    table[1500, 1] = 1e30  # one corrupted position sample
    np.savetxt(tmp_path / "glitch.csv", table, delimiter=",", header="time,position,velocity,torque", comments="",
               fmt="%.12g")
    with pytest.warns(UserWarning, match=r"1 of 3000 rows hold values beyond the plausible bounds \(columns "
                                         r"\['position'\]; first at data row 1501\)"):
        code, out, _ = _run(monkeypatch, capsys, "score", str(run), "--files", str(DFKI / "ddp.csv"),
                            str(tmp_path / "glitch.csv"), "--out", str(tmp_path / "score"))
    assert code == 0
    rows = {line.split()[0]: line.split() for line in out.splitlines()[2:-1]}
    assert rows["ddp.csv"][3] == "0" and rows["glitch.csv"][3] == "1" and rows["all"][4] == "1"
    record = json.loads((tmp_path / "score" / "score.json").read_text())
    clean, glitch = record["files"]
    assert glitch["report"]["rejected_implausible"] == 1 and glitch["flagged_rows"] == 1
    # left out, the sample changes the score as little as one missing sample does (kept, it moved it threefold)
    assert glitch["one_step_nrmse"] == pytest.approx(clean["one_step_nrmse"], rel=0.01)


def test_read_log_rejects_rows_beyond_the_limits_and_checks_them(tmp_path):
    t = np.arange(200) / 100.0
    q = np.sin(t)
    q[50] = 1e6
    np.savetxt(tmp_path / "log.csv", np.stack([t, q, np.cos(t), 0 * t], 1), delimiter=",",
               header="time,position,velocity,torque", comments="")
    cols = dict(time="time", states=["position", "velocity"], inputs=["torque"], fs=100.0)
    with pytest.warns(UserWarning, match="1 of 200 rows hold values beyond the plausible bounds"):
        log = read_log(tmp_path / "log.csv", limits=[10.0, 10.0, 10.0], **cols)
    assert log.report.rejected_implausible == 1 and np.abs(log.segments[0][:, 0]).max() < 1.0
    assert read_log(tmp_path / "log.csv", **cols).segments[0][50, 0] == 1e6  # (no limits: read as it is)
    with pytest.raises(ValueError, match=r"limits must hold one positive bound per state and input column \(3\)"):
        read_log(tmp_path / "log.csv", limits=[10.0, 10.0], **cols)


@needs_dfki
def test_score_reads_a_log_without_a_time_column_at_the_rate_given(run, monkeypatch, capsys, tmp_path):
    d = np.genfromtxt(DFKI / "ddp.csv", delimiter=",", names=True)
    np.savez(tmp_path / "vectors.npz", position=d["position"], velocity=d["velocity"], torque=d["torque"])
    _refused(monkeypatch, capsys, r"variable\(s\) \['time'\] named in the config are not in the file; .*--file-rate",
             str(run), "--files", str(tmp_path / "vectors.npz"))
    code, out, _ = _run(monkeypatch, capsys, "score", str(run), "--files", str(tmp_path / "vectors.npz"),
                        str(DFKI / "ddp.csv"), "--file-rate", "500", "--out", str(tmp_path / "score"))
    record = json.loads((tmp_path / "score" / "score.json").read_text())
    vectors, stamped = record["files"]
    assert code == 0 and vectors["report"]["dt_median"] == pytest.approx(1 / 500) and vectors["report"]["samples"] == 600
    assert stamped["one_step_nrmse"] == pytest.approx(json.loads((run / "metrics.json").read_text())["one_step_nrmse"])


def test_the_comparison_figure_draws_each_models_rollouts_beside_the_measured_state():
    segment = np.zeros((250, 3))
    segment[:, 2] = 0.1 * np.sin(np.arange(250) / 10.0)  # a recorded torque; the pendulum at rest
    log = RecordedLog(fs=100.0, names=("position", "velocity", "torque"), n_states=2, segments=[segment])
    models = {"known": TorquePendulumModel(), "damped": TorquePendulumModel(viscous=0.1)}
    fig = comparison_figure(models, log, horizon=1.0)
    (ax,) = fig.axes
    # the measured angle, then two 1 s rollouts per model (2.5 s of log): labels once per model
    assert len(ax.lines) == 1 + 2 * 2 and [t.get_text() for t in ax.get_legend().texts] == ["measured", *models]
    assert ax.get_ylabel() == "position" and comparison_figure(models, log, ylabel="angle (rad)").axes[0].get_ylabel() \
        == "angle (rad)"
    # a segment shorter than the horizon: the measured state only
    assert len(comparison_figure(models, log, horizon=5.0).axes[0].lines) == 1

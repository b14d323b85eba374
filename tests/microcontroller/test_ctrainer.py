"""The C trainer's Python binding (microcontroller.ctrainer.CTrainer) on what a long-running
device meets: a calibration that fails (it stops, with the Python trainer's message), and a
damaged checkpoint (refused; the instance is not used); and a plant with a recorded input."""
import ctypes
import json

import lightning as L
import numpy as np
import pytest
import torch

from microcontroller.ctrainer import CTrainer, load_weights
from microcontroller.generate import spec_from_config
from microcontroller.files import read_span
from microcontroller.golden import chunks, golden_stream, reference_run
from microcontroller.target import export_result
from microcontroller.training import CJetMatchingModule
from tests.microcontroller.helpers import recorded_config
from torch_ude.calibration import calibrate
from torch_ude.envelope import install_span
from torch_ude.savgol import SavitzkyGolay
from torch_ude.stream import StreamSettings
from torch_ude.systems import SinglePendulum
from torch_ude.training import JetMatchingModule, StreamDataModule
from torch_ude.update import due_updates

SMALL = ["--model.stream.tap_average", "false", "--model.stream.capacity", "64", "--model.stream.calibration_s", "0.6", "--model.stream.m_max", "20",
         "--model.batch_size", "16", "--trainer.max_steps", "50"]


@pytest.fixture(scope="module")
def spec():
    return spec_from_config("configs/pendulum_case_a.yaml", SMALL)


def _python_message(spec, y: np.ndarray) -> str:
    st = spec.stream
    with pytest.raises(ValueError) as info:
        calibrate(torch.as_tensor(y, dtype=torch.float64), spec.fs, sg=SavitzkyGolay(st.half_width, st.order),
                  m=st.m, m_max=st.m_max, outlier_threshold=st.outlier_threshold)
    return str(info.value)


@pytest.mark.parametrize("value", [np.nan, 0.0])
def test_a_failed_calibration_stops_the_c_trainer_with_the_python_message(spec, value):
    n = spec.stream.calibration_ticks(spec.fs)
    y = np.full((n, 2), value)
    trainer = CTrainer(spec)
    with pytest.raises(ValueError) as info:
        trainer.push_chunk(y, np.arange(n))
    assert str(info.value) == _python_message(spec, y)
    report = trainer.report()
    assert report["calibration_status"] < 0 and report["counters"]["calibration_failures"] == 1
    assert not trainer.ready and trainer.steps(5) == 0
    with pytest.raises(ValueError, match=str(info.value)[:30]):  # stopped: the next samples are refused too
        trainer.push_chunk(y[:10] * 0 + np.arange(10)[:, None], np.arange(n, n + 10))
    assert trainer.report()["counters"]["samples"] == n


def test_the_c_backend_names_the_calibrations_cause_as_the_python_trainer(tmp_path):
    # a pendulum at rest seen by a noiseless sensor: the record shows no motion
    messages = {}
    for module in (JetMatchingModule, CJetMatchingModule):
        dm = StreamDataModule(SinglePendulum(x0=(0.0, 0.0)), duration=3.0, noise=0.0, seed=0)
        model = module(stream=StreamSettings(capacity=256, calibration_s=1.0, m_max=50, tap_average=False),
                       periodic=False)
        trainer = L.Trainer(max_steps=50, logger=False, enable_progress_bar=False, enable_checkpointing=False,
                            default_root_dir=tmp_path / module.__name__, num_sanity_val_steps=0, limit_val_batches=0)
        with pytest.raises(ValueError) as info:
            trainer.fit(model, dm)
        messages[module.__name__] = str(info.value)
    assert messages["CJetMatchingModule"] == messages["JetMatchingModule"]
    assert "zero or non-finite scale" in messages["CJetMatchingModule"]


def test_the_due_updates_are_pythons_and_a_gap_counts_at_most_a_second(spec):
    rng = np.random.default_rng(5)
    every, span = round(spec.fs / spec.train_rate), int(spec.fs)
    step = rng.choice([0, 1, 1, 1, 1, 2, 7, 300, 999, 1000, 1001, 5000, 10**9], size=20000,
                      p=[.02, .5, .2, .1, .05, .03, .03, .02, .01, .01, .01, .01, .01])
    step[:3000] = 1  # a clean calibration record
    ticks = np.cumsum(step) - 3 * (rng.random(20000) < 0.01)  # repeats, gaps of every length, a few back
    t = np.arange(20000)
    y = np.stack([np.sin(0.01 * t), 0.01 * np.cos(0.01 * t)], axis=1) + 0.01 * rng.normal(size=(20000, 2))
    trainer, last, checked = CTrainer(spec), None, 0
    bounds = np.cumsum(rng.integers(1, 60, size=1000))
    for lo, hi in zip(np.r_[0, bounds], bounds):
        if lo >= len(t):
            break
        due = trainer.push_chunk(y[lo:hi], ticks[lo:hi])
        newest = max([last if last is not None else -2**63, *ticks[lo:hi].tolist()])
        python = due_updates(last, newest, every) if trainer.ready else 0
        gaps = np.diff(np.r_[last if last is not None else -1, np.maximum.accumulate(ticks[lo:hi])])
        if (gaps <= span).all():
            assert due == python, (lo, hi)
            checked += due > 0
        else:  # a gap longer than one second counts one second's training ticks at most
            assert due <= python and due <= (hi - lo) * (span // every + 1), (lo, hi)
            assert not trainer.ready or (gaps < 10**9).all() or python > 10**6 > due, (lo, hi)
        last = newest
    assert checked > 50


def test_a_damaged_checkpoint_is_refused(spec):
    trainer = CTrainer(spec)
    t = np.arange(2000)
    trainer.push_chunk(np.stack([np.sin(0.01 * t), 0.01 * np.cos(0.01 * t)], axis=1), t)
    good = trainer.state_bytes()
    other = CTrainer(spec)
    other.load_state_bytes(good)
    np.testing.assert_equal(other.report(), trainer.report())
    damaged = bytearray(good)
    damaged[4:8] = (77).to_bytes(4, "little")  # the calibration state: not 0, 1 or a failure
    with pytest.raises(ValueError, match="inconsistent"):
        other.load_state_bytes(bytes(damaged))
    with pytest.raises(RuntimeError, match="uninitialized"):
        other.report()


def _run(spec, y, ticks, segment, resume: bool) -> np.ndarray:
    """The EMA weights of a run through the binding; ``resume``: halfway, continued in another instance
    from the first one's bytes (a checkpoint)."""
    parts = chunks(ticks, round(spec.fs / spec.train_rate))
    trainer = CTrainer(spec)
    for i, part in enumerate(parts):
        trainer.steps(trainer.push_chunk(y[part], ticks[part], segment[part]))
        if resume and i == len(parts) // 2:
            assert trainer.ready
            resumed = CTrainer(spec)
            resumed.load_state_bytes(trainer.state_bytes())
            trainer = resumed
    trainer.steps(max(0, spec.max_steps - trainer.report()["updates"]))
    return trainer.weights(True)


def test_a_float16_reservoir_resumes_from_a_checkpoint_exactly():
    # issue 32, item 4: binary16 storage in units of x_rms (the reference comparison is test_c_trainer's)
    half = spec_from_config("configs/pendulum_case_a.yaml", [*SMALL, "--model.stream.reservoir_precision", "float16"])
    y, ticks, segment = golden_stream(half, 4.0, 0.01)
    straight = _run(half, y, ticks, segment, resume=False)
    assert np.array_equal(_run(half, y, ticks, segment, resume=True), straight)
    float32 = _run(spec_from_config("configs/pendulum_case_a.yaml", SMALL), y, ticks, segment, resume=False)
    assert 0 < np.abs(straight - float32).max() < 1e-2  # the rounding matters, a little
    bad = np.frombuffer(CTrainer(half).state_bytes(), dtype=np.uint8)
    with pytest.raises(ValueError, match="another configuration"):  # a float32 build refuses a float16 checkpoint
        CTrainer(spec_from_config("configs/pendulum_case_a.yaml", SMALL)).load_state_bytes(bad.tobytes())


def test_trained_physical_parameters_match_the_reference_and_resume_from_a_checkpoint_exactly():
    # issue 32: theta after the network's weights, physics first for a quarter of the updates; a checkpoint
    # taken halfway (in the physics-only phase's wake) resumes bit for bit, and the EMA of theta is the
    # float32 reference's
    physical = spec_from_config("configs/pendulum_case_a.yaml", [*SMALL, "--trainer.max_steps", "120",
                                                                 "--data.system.init_args.trainable",
                                                                 "{damping: [0.0, 1.0], length: [0.5, 2.0]}",
                                                                 "--model.physics_refit", "false"])
    y, ticks, segment = golden_stream(physical, 4.0, 0.01)
    straight = _run(physical, y, ticks, segment, resume=False)
    assert straight.shape == (physical.field.num_parameters(),)
    assert np.array_equal(_run(physical, y, ticks, segment, resume=True), straight)
    ref = reference_run(physical, np.asarray(y, dtype=np.float32), ticks, segment)
    assert ref.updates == 120 and np.abs(ref.ema_weights[-2:]).min() > 1e-3  # theta moved
    np.testing.assert_allclose(straight, ref.ema_weights, rtol=0, atol=1e-5)


def test_the_refit_and_standard_errors_need_physical_parameters_and_jets(spec):
    # issue 32, item 2: a trainer without physical parameters has no refit (one-line error) and no standard errors;
    # one with them reports none before calibration and refuses to refit an empty reservoir
    plain = CTrainer(spec)
    with pytest.raises(ValueError, match="trains none"):
        plain.refit(50)
    assert plain.standard_errors() is None
    physical = CTrainer(spec_from_config("configs/pendulum_case_a.yaml", [
        *SMALL, "--data.system.init_args.trainable", "{damping: [0.0, 1.0]}", "--model.physics_first", "1"]))
    assert physical.standard_errors() is None
    with pytest.raises(RuntimeError, match="tu_trainer_refit returned -5 \\(not ready\\)"):
        physical.refit(50)


def test_the_binding_carries_recorded_inputs(tmp_path):
    # a plant with a recorded torque (issue 32, item 2): samples are (q, qdot, tau); the report's input
    # scales cover the three channels and load_weights gives the torque's to the field's input_scale
    t = np.arange(0.0, 12.0, 0.01)
    log = {"time": t, "position": np.sin(2 * t), "velocity": 2 * np.cos(2 * t), "torque": 0.3 * np.sin(1.3 * t)}
    spec = spec_from_config(recorded_config(tmp_path, log, ["torque"], 100.0, "configs/pendulum_case_a.yaml"),
                            [*SMALL, "--model.stream.calibration_s", "3.0"])
    trainer = CTrainer(spec, build_root=tmp_path / "build")
    y = np.column_stack([log["position"], log["velocity"], log["torque"]])
    with pytest.raises(ValueError, match=r"push_chunk needs y of shape \(k, 3\)"):
        trainer.push_chunk(y[:, :2], np.arange(len(t)))
    trainer.push_chunk(y, np.arange(len(t)))
    report = trainer.report()
    assert report["calibrated"] and len(report["in_scale"]) == 3
    assert report["in_scale"] == report["calibration"]["x_rms"]
    field = load_weights(spec.field, trainer.weights(), report["in_scale"], report["out_scale"])
    assert field.input_scale.tolist() == pytest.approx(report["in_scale"][2:])


def test_the_envelope_is_the_python_trainers_and_a_result_file_exports_it(tmp_path):
    # issue 32, item 2: the span of the offered jets, with an input and an angle read as (sin, cos), equals the
    # float32 reference's bit for bit, so the box in z does too; a recorded log has an envelope by default
    t = np.arange(0.0, 12.0, 0.01)
    log = {"time": t, "position": np.sin(2 * t), "velocity": 2 * np.cos(2 * t), "torque": 0.3 * np.sin(1.3 * t)}
    config = recorded_config(tmp_path, log, ["torque"], 100.0, "configs/pendulum_case_a.yaml")
    assert not spec_from_config(config, [*SMALL, "--model.stream.calibration_s", "3.0",
                                         "--model.envelope", "false"]).envelope
    spec = spec_from_config(config, [*SMALL, "--model.stream.calibration_s", "3.0", "--model.periodic", "true"])
    assert spec.envelope
    y = np.column_stack([log["position"], log["velocity"], log["torque"]]).astype(np.float32)
    ticks, segment = np.arange(len(t)), np.zeros(len(t), dtype=np.int32)
    trainer = CTrainer(spec, build_root=tmp_path / "build")
    for part in chunks(ticks, round(spec.fs / spec.train_rate)):
        trainer.steps(trainer.push_chunk(y[part], ticks[part], segment[part]))
    low, high = trainer.span()
    ref = reference_run(spec, y, ticks, segment)
    want = ref.stream.buffer.span()
    assert np.array_equal(low, want[0].numpy()) and np.array_equal(high, want[1].numpy())
    assert np.all(low < high) and ref.stream.counters["accepted"] > 0
    # the box in z: its sin / cos columns depend on the span alone (equal); the others divide it by the calibrated
    # RMS, which the C calibration sums in another order (a few ulp: the C runner's x_rms tolerance is 1e-4)
    report = trainer.report()
    scales = np.array(ref.field.in_scale.tolist() + ref.field.input_scale.tolist())
    assert np.allclose(report["in_scale"], scales, rtol=1e-5, atol=0)
    field = load_weights(spec.field, trainer.weights(), report["in_scale"], report["out_scale"])
    install_span([field], spec.system, (torch.from_numpy(low).double(), torch.from_numpy(high).double()))
    reference = ref.field.double()
    install_span([reference], spec.system, want)
    assert field.envelope[0].shape == (4,)  # qdot, sin q, cos q, tau
    for got, expected in zip(field.envelope, reference.envelope):
        assert torch.equal(got[1:3], expected[1:3]) and torch.allclose(got, expected, rtol=1e-5, atol=0)


def test_the_span_survives_a_checkpoint_and_a_result_file_exports_it(tmp_path):
    # the span is part of the instance's bytes (restore checks it); a firmware's result file carries it after the
    # report, and export_result gives the field the envelope the Python trainer builds from it (field.json)
    spec = spec_from_config("configs/pendulum_case_a.yaml", [*SMALL, "--model.envelope", "true",
                                                             "--model.stream.reservoir_precision", "float16"])
    y, ticks, segment = golden_stream(spec, 4.0, 0.01)
    parts = chunks(ticks, round(spec.fs / spec.train_rate))
    straight, trainer = CTrainer(spec), CTrainer(spec)
    for i, part in enumerate(parts):
        straight.steps(straight.push_chunk(y[part], ticks[part], segment[part]))
        trainer.steps(trainer.push_chunk(y[part], ticks[part], segment[part]))
        if i == len(parts) // 2:
            resumed = CTrainer(spec)
            resumed.load_state_bytes(trainer.state_bytes())
            trainer = resumed
    low, high = trainer.span()
    assert np.array_equal(low, straight.span()[0]) and np.array_equal(high, straight.span()[1])
    assert np.all(np.isfinite(low)) and np.all(low < high)
    rep, weights = trainer._report_raw(), trainer.weights()
    body = (b"TURSLT01" + np.array([weights.size, ctypes.sizeof(rep)], dtype="<u4").tobytes() + weights.tobytes()
            + weights.tobytes() + bytes(rep))
    (tmp_path / "plain.bin").write_bytes(body)
    assert read_span(tmp_path / "plain.bin") is None
    with pytest.raises(ValueError, match="holds no envelope span"):
        export_result(spec, tmp_path / "plain.bin")
    (tmp_path / "result.bin").write_bytes(body + np.array([2], dtype="<u4").tobytes() + low.tobytes() + high.tobytes())
    metrics, exported = export_result(spec, tmp_path / "result.bin", tmp_path / "run")
    report = trainer.report()
    want = load_weights(spec.field, weights, report["in_scale"], report["out_scale"])
    install_span([want], spec.system, (torch.from_numpy(low).double(), torch.from_numpy(high).double()))
    assert all(torch.equal(a, b) for a, b in zip(exported.envelope, want.envelope))
    sidecar = json.loads((tmp_path / "run" / "field.json").read_text())
    assert sidecar["envelope"]["low"] == want.envelope[0].tolist() == metrics["envelope"]["low"]
    assert sidecar["envelope"]["margin"] == metrics["envelope"]["margin"]

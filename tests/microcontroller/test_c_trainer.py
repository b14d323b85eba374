"""The C trainer on the host against the float32 Python reference, under ASan and UBSan.

Each case generates the headers (the plant's known field as generated C among them) from a config, the golden vectors of every stage and of a
whole run (stream with drops, NaNs, spikes and a dropout; for the plant with a recorded torque, a
simulated forced-pendulum log with dropped samples and NaN torques) with the Python reference, builds
the C test runner with sanitizers and runs it; the runner checks each stage, a
finite-difference gradient, skipped updates (a NaN weight), API misuse and what a device that
runs for months meets (counters near 2^32 and 2^31, the end of the schedule, a tick far ahead,
a failed calibration, damaged checkpoints), and prints ``N passed, N failed``.
"""
import re
import shutil
import subprocess

import numpy as np
import pytest

from microcontroller.build import ROOT, build
from microcontroller.files import write_golden, write_stream
from microcontroller.generate import spec_from_config, write_headers
from microcontroller.golden import device_velocities, golden_stream, run_goldens, stage_goldens
from microcontroller.memory import static_bytes
from tests.microcontroller.helpers import forced_log, position_log
from torch_ude.position_only import with_velocities
from torch_ude.recorded import RecordedLog
from torch_ude.savgol import savgol_rows
from torch_ude.systems import SensorFaults

SMALL = ["--model.stream.tap_average", "false", "--model.stream.capacity", "256", "--model.stream.calibration_s", "1.0", "--model.stream.m_max", "50"]
CASES = {
    "pendulum": ("configs/pendulum_case_a.yaml", [*SMALL, "--trainer.max_steps", "300"], 8.0),
    "double_pendulum": ("configs/double_pendulum_case_a.yaml", [*SMALL, "--trainer.max_steps", "150"], 5.0),
    # no second-order term: the reservoir keeps (x_hat, xdot_hat) only
    "pendulum_first_order": ("configs/pendulum_case_a.yaml", [*SMALL, "--trainer.max_steps", "200",
                                                              "--model.stream.lambda2", "0"], 6.0),
    # a plant without any hand-written C (issue 32): the Duffing oscillator's cubic known field, generated
    "duffing": ("configs/pendulum_case_a.yaml", [*SMALL, "--trainer.max_steps", "200", "--data.system",
                                                 "torch_ude.systems.DuffingOscillator",
                                                 "--data.system.init_args.frequency", "1.0"], 8.0),
    # a forgetting reservoir and a constant learning rate (on-device adaptation)
    "pendulum_forgetting": ("configs/pendulum_case_a.yaml", [*SMALL, "--trainer.max_steps", "200",
                                                             "--model.stream.forget_window", "300",
                                                             "--model.schedule", "constant"], 8.0),
    # the reservoir in float16, in units of x_rms (issue 32, item 4: the device's memory)
    "pendulum_half": ("configs/pendulum_case_a.yaml", [*SMALL, "--trainer.max_steps", "300",
                                                       "--model.stream.reservoir_precision", "float16"], 8.0),
    # box-averaged taps (the Python trainer's default): the window means, the box rows and the calibration's 1/sqrt(m)
    "pendulum_box": ("configs/pendulum_case_a.yaml", ["--model.stream.tap_average", "true", *SMALL[2:],
                                                      "--trainer.max_steps", "300"], 8.0),
    # recorded inputs (issue 32, item 2): the DFKI pendulum's known model driven by a logged torque
    "torque_pendulum": ("forced log", [*SMALL, "--trainer.max_steps", "400"], 12.0),  # 212 updates live
    # the residual's linear term L z on the same log, and the input-affine residual (torque through L alone)
    "torque_pendulum_linear": ("forced log", [*SMALL, "--trainer.max_steps", "400", "--model.linear", "true"], 12.0),
    "torque_pendulum_input_affine": ("forced log", [*SMALL, "--trainer.max_steps", "400", "--model.linear", "true",
                                                    "--model.input_affine", "true"], 12.0),
    # the network's input map (issue 32, item 2): the angle read as (sin q, cos q) ...
    "pendulum_periodic": ("configs/pendulum_case_a.yaml", [*SMALL, "--trainer.max_steps", "300",
                                                           "--model.periodic", "true"], 8.0),
    # ... beside a recorded torque and the linear term L z of the mapped input (q, qdot, tau) -> (qdot, sin, cos, tau)
    "torque_pendulum_periodic": ("forced log", [*SMALL, "--trainer.max_steps", "400", "--model.periodic", "true",
                                                "--model.linear", "true"], 12.0),
    # ... and a state left out (invariant): the tanh layers read qdot alone, the torque enters through L
    "torque_pendulum_invariant": ("forced log", [*SMALL, "--trainer.max_steps", "400", "--data.invariant", "[position]",
                                                 "--model.linear", "true", "--model.input_affine", "true"], 12.0),
    # the trust envelope (issue 32, item 2): the span of the offered jets, as the float16 reservoir holds them ...
    "pendulum_half_envelope": ("configs/pendulum_case_a.yaml", [*SMALL, "--trainer.max_steps", "300",
                                                                "--model.stream.reservoir_precision", "float16",
                                                                "--model.envelope", "true"], 8.0),
    # trainable physical parameters of the known model (issue 32): theta in the weight vector after the network's,
    # the known field generated as a function of theta, physics first for a quarter of the updates, then both ...
    "pendulum_physical": ("configs/pendulum_case_a.yaml", [*SMALL, "--trainer.max_steps", "300",
                                                           "--data.system.init_args.trainable",
                                                           "{damping: [0.0, 1.0], length: [0.5, 2.0]}",
                                                           "--model.physics_refit", "false", "--model.periodic", "true",
                                                           "--model.weight_decay", "0.01"], 8.0),
    # ... and the DFKI torque pendulum's five constants beside the input-affine residual, as configs/dfki_pendulum.yaml
    # bounds them (a recorded torque; the physics alone for the first half of the updates)
    "torque_pendulum_physical": ("forced log", [*SMALL, "--trainer.max_steps", "400", "--model.linear", "true",
                                                "--model.input_affine", "true", "--model.physics_first", "0.5",
                                                "--model.physics_refit", "false", "--data.known.init_args.trainable",
                                                "{inertia: [0.03, 0.5], mass_com: [0.05, 1.0], viscous: [0.0, 0.5], "
                                                "coulomb: [0.0, 1.0], offset: [-1.0, 1.0]}"], 12.0),
    # the torque pendulum's physics alone (physics_first 1, the residual zero and never trained) with the end-of-run refit
    # (physics_refit, the default) and standard errors the runner checks against the float64 Python ones
    "torque_pendulum_physics_alone": ("forced log", [*SMALL, "--trainer.max_steps", "400", "--model.linear", "true",
                                                     "--model.input_affine", "true", "--model.physics_first", "1",
                                                     "--data.known.init_args.trainable",
                                                     "{inertia: [0.03, 0.5], mass_com: [0.05, 1.0], "
                                                     "viscous: [0.0, 0.5], coulomb: [0.0, 1.0], offset: [-1.0, 1.0]}"],
                                      12.0),
    # the calibration record streamed again once calibrated (issue 32, item 2: its own memory), on the simulated
    # pendulum with its faults and on the recorded torque (every tick a window, as configs/dfki_pendulum.yaml)
    "pendulum_replay": ("configs/pendulum_case_a.yaml", [*SMALL, "--trainer.max_steps", "300",
                                                         "--model.stream.calibration_replay", "true"], 8.0),
    "torque_pendulum_replay": ("forced log", [*SMALL, "--trainer.max_steps", "400", "--model.linear", "true",
                                              "--model.stream.calibration_replay", "true",
                                              "--model.stream.stride", "1"], 12.0),
    # a position-only log (issue 32, item 2): the device derives the velocity from the streamed angle (M = 3)
    "torque_pendulum_velocity": ("position log", [*SMALL, "--trainer.max_steps", "400", "--model.linear", "true"],
                                 12.0),
    # (the torque_pendulum cases stream a recorded log, so they take the recorded logs' default, an envelope: its span
    # there covers the torque and the angle that torque_pendulum_periodic's network reads as (sin, cos))
}
VELOCITY_HALF_WIDTH = 3
RUNNER = [ROOT / "tests" / "test_runner.c", ROOT / "tests" / "golden.c", ROOT / "support" / "tu_stream_file.c",
          ROOT / "support" / "tu_replay.c"]


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request, tmp_path_factory):
    config, overrides, duration = CASES[request.param]
    folder = tmp_path_factory.mktemp(request.param)
    if config in ("forced log", "position log"):
        config, (y, ticks, segment) = forced_log(folder, duration) if config == "forced log" else \
            position_log(folder, duration, VELOCITY_HALF_WIDTH)
        spec = spec_from_config(config, overrides)
    else:
        spec = spec_from_config(config, overrides)
        faults = SensorFaults(drop_rate=0.01, nan_rate=0.001, spike_rate=0.002, dropout_rate=2e-4,
                              dropout_length=50, seed=3)
        y, ticks, segment = golden_stream(spec, duration, 0.01, faults)
    write_headers(spec, folder / "gen")
    write_golden(folder / "golden.bin", stage_goldens(spec) | run_goldens(spec, y, ticks, segment))
    write_stream(folder / "stream.bin", y, ticks, segment)
    return spec, folder


def test_every_stage_and_a_whole_run_match_the_reference_under_sanitizers(case):
    spec, folder = case
    exe = build(folder / "gen", "program", RUNNER, sanitize=True, extra_flags=["-I", str(ROOT / "tests")])
    proc = subprocess.run([str(exe), str(folder / "golden.bin"), str(folder / "stream.bin")], capture_output=True,
                          text=True, timeout=300)
    summary = re.search(r"^(\d+) passed, (\d+) failed$", proc.stdout, re.M)
    assert summary, proc.stdout + proc.stderr
    runs = 19 + spec.field.physical  # (the physical_fit test where the configuration trains physical parameters)
    assert proc.returncode == 0 and summary.group(2) == "0" and int(summary.group(1)) == runs, proc.stdout + proc.stderr
    assert "runtime error" not in proc.stderr and "Sanitizer" not in proc.stderr, proc.stderr
    assert f"sizeof(tu_trainer) = {static_bytes(spec)} bytes" in proc.stdout  # the generator knows the size


def test_the_library_never_allocates(case):
    spec, folder = case
    lib = build(folder / "gen", "static")
    nm = shutil.which("nm")
    assert nm, "binutils' nm is needed to inspect the library"
    undefined = subprocess.run([nm, "-u", str(lib)], capture_output=True, text=True, check=True).stdout.split()
    assert not {"malloc", "calloc", "realloc", "free"} & set(undefined), undefined
    assert "sqrtf" in undefined  # the check sees the library's references


def test_the_device_velocity_is_with_velocities_in_float32(tmp_path):
    """The device's derivative (`device_velocities`, which the C runner matches bit for bit: case
    ``torque_pendulum_velocity``) against `with_velocities` in float64 on each run of the pushed stream."""
    config, (y, ticks, segment) = position_log(tmp_path, 12.0, VELOCITY_HALF_WIDTH)
    spec = spec_from_config(config, SMALL)
    m = VELOCITY_HALF_WIDTH
    got, got_ticks, got_segment, _ = device_velocities(spec, y, ticks, segment)
    keep = np.r_[True, ticks[1:] > ticks[:-1]]  # the repeated tick dropped
    y64, t, seg = y[keep].astype(np.float32).astype(np.float64), ticks[keep], segment[keep]
    starts = np.flatnonzero(np.r_[True, (np.diff(t) != 1) | (np.diff(seg) != 0)])
    runs = [slice(a, b) for a, b in zip(starts, [*starts[1:], len(t)])]
    assert [r.stop - r.start for r in runs if r.stop - r.start < 2 * m + 2] == [2 * m + 1]  # the short segment
    log = RecordedLog(fs=spec.fs, names=("position", "torque"), n_states=1, segments=[y64[r] for r in runs],
                      starts=[float(t[r.start]) / spec.fs for r in runs])
    want = np.concatenate(with_velocities(log, spec.velocity).segments)
    assert got.shape == want.shape == (sum(r.stop - r.start - 2 * m for r in runs if r.stop - r.start >= 2 * m + 2), 3)
    assert np.array_equal(got_ticks, np.concatenate([t[r][m:-m] for r in runs if r.stop - r.start >= 2 * m + 2]))
    assert len(np.unique(got_segment)) == len(runs) - 1  # one segment id a run that gives velocities
    # positions and torques are the centre samples'; NaN torques stay NaN
    assert np.array_equal(got[:, [0, 2]], want[:, [0, 2]].astype(np.float32), equal_nan=True)
    # the velocity within float32's rounding of 2M + 1 products and sums: (2M + 4) eps sum_j |row_j q_j|
    row = np.abs(savgol_rows(m, 2, 1)[1].numpy()) * spec.fs
    scale = np.concatenate([np.correlate(np.abs(y64[r, 0]), row, mode="valid") for r in runs
                            if r.stop - r.start >= 2 * m + 2])
    bound = (2 * m + 4) * 2.0 ** -24 * scale
    assert np.all(np.abs(got[:, 1] - want[:, 1]) <= bound), (np.abs(got[:, 1] - want[:, 1]) / scale).max()
    assert bound.max() < 1e-3 * np.sqrt(np.mean(want[:, 1] ** 2))  # a bound far below the velocity

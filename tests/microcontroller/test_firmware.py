"""The C trainer as firmware under QEMU: replay, bad files, faults, on every target.

Each target (`microcontroller.target.TARGETS`: the Cortex-M4F on mps2-an386 with Debian's
arm-none-eabi-gcc; rv32imafc and rv32imac on virt with riscv64-unknown-elf-gcc and picolibc)
builds the same firmware, run by its QEMU with a time limit; files pass through semihosting. A
short stream checks that each emulated core and the host build of the same sources agree; the
60 s / 8000-update replay of the paper's configuration runs on the cores with an FPU (the
soft-float rv32imac takes 70 s for it: its short stream is the check there). The RISC-V tests
skip where its toolchain or QEMU is missing; the Cortex-M4F is required (``make test`` installs
both).
"""
import json

import numpy as np
import pytest

from microcontroller.ctrainer import CTrainer
from microcontroller.device_replay import replay_simulated
from microcontroller.files import read_result, write_stream
from microcontroller.generate import headers_for, spec_from_config
from microcontroller.golden import golden_stream
from microcontroller.target import (CORTEX_M4, RV32, TARGETS, build_firmware, c_hat_trace, export_result, run_firmware,
                                    sizes)
from torch_ude.systems import SensorFaults

SMALL = ["--model.stream.tap_average", "false", "--model.stream.capacity", "256", "--model.stream.calibration_s", "1.0", "--model.stream.m_max", "50",
         "--trainer.max_steps", "400"]


def _params(targets):
    return [pytest.param(t, id=t.name, marks=[] if t is CORTEX_M4 else pytest.mark.skipif(
        not t.available(), reason=f"{t.compiler} or {t.qemu[0]} is not installed (make test installs {t.packages})"))
        for t in targets]


@pytest.fixture(scope="module", params=_params(TARGETS.values()))
def target(request):
    """Each firmware target in turn."""
    return request.param


@pytest.fixture(scope="module", params=_params([CORTEX_M4, RV32]))
def fpu_target(request):
    """Each firmware target with a single-precision FPU in turn."""
    return request.param


@pytest.fixture(scope="module")
def firmware(tmp_path_factory, target):
    spec = spec_from_config("configs/pendulum_case_a.yaml", SMALL)
    folder = tmp_path_factory.mktemp(f"firmware-{target.name}")
    faults = SensorFaults(drop_rate=0.01, nan_rate=0.001, spike_rate=0.002, seed=4)
    y, ticks, segment = golden_stream(spec, 10.0, 0.01, faults)
    write_stream(folder / "stream.bin", y, ticks, segment)
    return spec, build_firmware(headers_for(spec), target=target), folder, (y, ticks, segment)


def test_the_emulated_core_and_the_host_build_train_the_same_weights(firmware, target):
    spec, elf, folder, (y, ticks, segment) = firmware
    run = run_firmware(elf, ["replay", "stream.bin", "result.bin"], cwd=folder, timeout_s=120, target=target)
    assert run.returncode == 0, run.output
    assert "done: updates 400," in run.output and "c_hat 0." in run.output
    ema, raw, _ = read_result(folder / "result.bin")
    host = CTrainer(spec).replay(y, ticks, segment)
    # newlib's, picolibc's and glibc's sinf may differ in the last bit; everything else is the same code
    assert np.abs(host.weights(True) - ema).max() < 1e-5
    assert np.abs(host.weights(False) - raw).max() < 1e-5
    report = host.report()["counters"]
    assert f"nonfinite_samples {report['nonfinite_samples']}," in run.output and report["nonfinite_samples"] > 0


def test_the_device_holds_the_same_trainer_instance_as_the_host(firmware, target):
    spec, elf, _, _ = firmware
    s = sizes(elf, target)
    # the instance on the device is the whole trainer state; on the host it has the same size
    assert s["trainer"] == CTrainer(spec).static_bytes
    assert s["bss"] >= s["trainer"]


@pytest.mark.parametrize("content, message", [
    (None, "could not be opened"),
    (b"not a stream file at all", "bad magic"),
    ("truncate", "truncated"),
])
def test_bad_stream_files_give_a_clear_status(firmware, target, content, message):
    spec, elf, folder, _ = firmware
    name = f"bad-{message.split()[0]}.bin"
    if content == "truncate":
        data = (folder / "stream.bin").read_bytes()
        (folder / name).write_bytes(data[: len(data) - 5])
    elif content is not None:
        (folder / name).write_bytes(content)
    run = run_firmware(elf, ["replay", name, "out.bin"], cwd=folder, timeout_s=60, target=target)
    assert run.returncode == 2, run.output
    assert message in run.output and "error:" in run.output


def test_garbage_values_are_counted_not_fatal(firmware, target, tmp_path):
    spec, elf, folder, (y, ticks, segment) = firmware
    bad = y.copy()
    rng = np.random.default_rng(0)
    rows = rng.choice(len(bad), 300, replace=False)
    bad[rows[:100], 0] = np.nan
    bad[rows[100:200], 1] = np.inf
    bad[rows[200:], 0] = 3.0e38
    write_stream(tmp_path / "garbage.bin", bad, ticks, segment)
    run = run_firmware(elf, ["replay", "garbage.bin", "out.bin"], cwd=tmp_path, timeout_s=120, target=target)
    assert run.returncode == 0, run.output
    assert f"nonfinite_samples {int((~np.isfinite(bad)).any(axis=1).sum())}," in run.output
    ema, raw, _ = read_result(tmp_path / "out.bin")
    assert np.isfinite(ema).all() and np.isfinite(raw).all()


def test_instruction_counts_are_printed_only_under_icount(firmware, target):
    # without -icount the timer (CMSDK timer 0, minstret) follows the host's clock: its counts are no instructions
    _, elf, folder, _ = firmware
    args = ["simulate", "sim.bin", "4", "0.4", "-1", "100"]
    for icount, unit in ((False, "host-time timer ticks per update"), (True, "instructions per update")):
        run = run_firmware(elf, args, cwd=folder, timeout_s=120, icount=icount, target=target)
        assert run.returncode == 0, run.output
        lines = [line for line in run.output.splitlines() if line.startswith("update ")]
        assert len(lines) >= 3 and all(line.endswith(unit) for line in lines), run.output
        assert icount or "instructions" not in run.output
    refused = run_firmware(elf, ["measure", "stream.bin"], cwd=folder, timeout_s=60, target=target)
    assert refused.returncode == 2 and "only under QEMU's -icount" in refused.output


def test_a_fault_ends_the_emulation_with_status_3(firmware, target):
    _, elf, folder, _ = firmware
    run = run_firmware(elf, ["fault"], cwd=folder, timeout_s=30, target=target)
    assert run.returncode == 3, run.output


@pytest.fixture(scope="module")
def device_run(tmp_path_factory, fpu_target):
    """The paper's on-device experiment on the emulated core: configs/pendulum_case_a_c.yaml
    (B = 2048, 8000 updates), the 60 s, 1 % noise stream of seed 0 replayed from a file, scored and compared
    with the host build (`microcontroller.device_replay.replay_simulated`)."""
    spec = spec_from_config("configs/pendulum_case_a_c.yaml")
    folder = tmp_path_factory.mktemp(f"device-{fpu_target.name}")
    write_stream(folder / "stream.bin", *golden_stream(spec, 60.0, 0.01))
    elf = build_firmware(headers_for(spec), target=fpu_target)
    return spec, folder, elf, replay_simulated(spec, "stream.bin", elf, folder, "seed0", fpu_target, timeout_s=300)


def test_the_device_run_trains_8000_updates_and_python_scores_and_exports_it(device_run):
    _, folder, _, out = device_run
    assert out["updates"] == 8000
    assert out["e_field_visited"] < 0.003 and abs(out["c_hat"] - 0.40) < 0.012  # paper: 0.0020, 0.400
    assert json.loads((folder / "replay-seed0" / "metrics.json").read_text())["status"] == "finished"
    assert (folder / "replay-seed0" / "field.pt").is_file()
    # the host build of the same sources on the same stream: the same field within float32 rounding
    assert out["max_weight_difference_to_host"] < 1e-5


def test_the_self_contained_device_run_learns_the_damping(device_run, fpu_target):
    spec, folder, elf, _ = device_run
    run = run_firmware(elf, ["simulate", "simulate.bin", "60"], cwd=folder, timeout_s=300, target=fpu_target)
    assert run.returncode == 0, run.output
    metrics, _ = export_result(spec, folder / "simulate.bin")
    assert abs(metrics["c_hat"] - 0.40) < 0.02 and metrics["e_field_visited"] < 0.005


def test_a_forgetting_reservoir_follows_a_plant_that_changes(tmp_path):
    # a small, fresh trainer: the damping grows from 0.40 to 0.55 at 30 s of 60 s
    spec = spec_from_config("configs/pendulum_case_a_adapt_c.yaml", ["--model.stream.capacity", "512",
                                                                      "--model.stream.forget_window", "512"])
    run = run_firmware(build_firmware(headers_for(spec)), ["simulate", "adapt.bin", "60", "0.55", "30", "100"],
                       cwd=tmp_path, timeout_s=300)
    assert run.returncode == 0, run.output
    c_hat = c_hat_trace(run.output)
    before = [c for t, c in c_hat if 20.0 < t <= 30.0]
    assert before and all(abs(c - 0.40) < 0.03 for c in before)
    assert abs(c_hat[-1][1] - 0.55) < 0.03

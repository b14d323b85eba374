"""A recorded log with inputs replayed to the firmware under QEMU (issue 32, items 2-4), and the device configs.

A sample of the stream file has TU_CH = TU_N + TU_NU channels: the states, then the recorded inputs.

* A simulated forced-pendulum log (a torque input, dropped samples, a dropout, NaN torques) on each
  core with a single-precision FPU: the firmware trains the weights of the host build of the same
  sources, and ``measure`` counts the instructions of an update with the input (early and steady state).
* Real logs, the DFKI pendulum's (``configs/dfki_pendulum_c.yaml``: the 54 s of logs make 674 updates
  live) and the EMPS axis's (``configs/emps_c.yaml``: its reservoir is not full before the log ends, so
  every update is made on the reservoir after it), at 700 updates
  (each skipped without its folder in ``../shared/data``): the field the Cortex-M4F trains scores within
  10 % of the float32 Python trainer's on the same samples with the same seed
  (`microcontroller.device_replay.replay_log`) on the validation log (``ddp.csv``, ``DATA_EMPS_PULSES.mat``;
  1 s open-loop NRMSE, the data module's prediction errors, `torch_ude.prediction`), and ``torch-ude score`` gives the
  same score from the run folder the device's weights were exported to.
"""

import numpy as np
import pytest
import yaml

from microcontroller.ctrainer import CTrainer
from microcontroller.files import read_physical, read_result, write_stream
from microcontroller.generate import headers_for, spec_from_config
from microcontroller.golden import data_module, data_stream
from microcontroller.device_replay import replay_log
from microcontroller.target import (CORTEX_M4, CPI, MHZ, RV32, build_firmware, export_result, measure_instructions,
                                    run_firmware)
from tests.microcontroller.helpers import REPO, forced_log
from torch_ude.score import score

SMALL = ["--model.stream.tap_average", "false", "--model.stream.capacity", "256", "--model.stream.calibration_s", "1.0",
         "--model.stream.m_max", "50", "--trainer.max_steps", "400"]
DATA = REPO.parent / "shared" / "data"
STEPS = ["--trainer.max_steps", "700"]  # >= the live updates: beyond max_steps the C trainer holds lr_min
REAL_LOGS = [pytest.param(config, DATA / folder, val, id=folder, marks=pytest.mark.skipif(
    not (DATA / folder).is_dir(), reason=f"the logs are not in {DATA / folder} (see ../shared/data/README.md)"))
    for config, folder, val in (("configs/dfki_pendulum_c.yaml", "dfki_pendulum", "ddp.csv"),
                                ("configs/emps_c.yaml", "emps", "DATA_EMPS_PULSES.mat"))]


@pytest.fixture(scope="module", params=[pytest.param(t, id=t.name, marks=[] if t is CORTEX_M4 else pytest.mark.skipif(
    not t.available(), reason=f"{t.compiler} or {t.qemu[0]} is not installed (make test installs {t.packages})"))
    for t in (CORTEX_M4, RV32)])
def fpu_target(request):
    """Each firmware target with a single-precision FPU in turn."""
    return request.param


@pytest.fixture(scope="module")
def forced(tmp_path_factory):
    folder = tmp_path_factory.mktemp("forced")
    config, (y, ticks, segment) = forced_log(folder, 12.0)
    spec = spec_from_config(config, SMALL)
    write_stream(folder / "stream.bin", y, ticks, segment)
    return spec, folder, (y, ticks, segment)


def test_a_log_with_inputs_trains_the_host_builds_weights_on_the_emulated_core(forced, fpu_target):
    spec, folder, (y, ticks, segment) = forced
    assert y.shape[1] == 3 and np.isnan(y[:, 2]).sum() == 2  # q, qdot, torque; two NaN torques
    elf = build_firmware(headers_for(spec), target=fpu_target)
    run = run_firmware(elf, ["replay", "stream.bin", f"result-{fpu_target.name}.bin"], cwd=folder, timeout_s=120,
                       target=fpu_target)
    assert run.returncode == 0, run.output
    assert f"done: updates {spec.max_steps}," in run.output and "nonfinite_samples 2," in run.output
    ema, raw, _ = read_result(folder / f"result-{fpu_target.name}.bin")
    host = CTrainer(spec).replay(y, ticks, segment)
    assert np.abs(host.weights(True) - ema).max() < 1e-5
    assert np.abs(host.weights(False) - raw).max() < 1e-5


def test_a_physics_alone_run_is_refitted_and_reports_its_standard_errors_on_the_emulated_core(forced, tmp_path):
    # issue 32, item 2: physics_first 1 with the refit: the Cortex-M4F refits theta after the replay (as the host
    # build does, tu_trainer_refit), appends the standard errors and the refit's report to its result file, and
    # export_result writes them into the run folder's metrics.json as a Python run reports them
    _, folder, (y, ticks, segment) = forced
    config, _ = forced_log(tmp_path, 12.0)
    overrides = [*SMALL, "--model.physics_first", "1", "--model.envelope", "false",
                 "--data.known.init_args.trainable", "{inertia: [0.03, 0.5], offset: [-1.0, 1.0]}"]
    spec = spec_from_config(config, overrides)
    run = run_firmware(build_firmware(headers_for(spec)), ["replay", "stream.bin", "physical.bin"], cwd=folder,
                       timeout_s=120)
    assert run.returncode == 0 and "refit: ok, " in run.output and "converged 1" in run.output, run.output
    ema, _, _ = read_result(folder / "physical.bin")
    physical = read_physical(folder / "physical.bin")
    host = CTrainer(spec).replay(y, ticks, segment)
    refit = host.refit(50)
    assert physical["refit"]["evaluations"] == refit["evaluations"] and refit["loss_after"] < refit["loss_before"]
    assert np.abs(host.weights(True) - ema).max() < 1e-5  # theta refitted as on the host
    np.testing.assert_allclose(physical["standard_errors"], host.standard_errors(), rtol=1e-4)
    metrics, _ = export_result(spec, folder / "physical.bin", tmp_path / "run", data=data_module(config, overrides))
    spans = np.array([0.235, 1.0])
    reported = [metrics["physical_parameters"][k]["standard_error"] for k in ("inertia", "offset")]
    np.testing.assert_allclose(reported, physical["standard_errors"] * spans, rtol=1e-6)
    assert metrics["physics_refit"]["converged"] and (tmp_path / "run" / "metrics.json").is_file()
    (tmp_path / "cut.bin").write_bytes((folder / "physical.bin").read_bytes()[:-4])  # a truncated file: one line
    with pytest.raises(ValueError, match="ends inside its block of 2 physical parameters"):
        read_physical(tmp_path / "cut.bin")


def test_a_stream_file_without_the_inputs_is_refused(forced, fpu_target):
    spec, folder, (y, ticks, segment) = forced
    write_stream(folder / "states-only.bin", y[:, :2], ticks, segment)
    run = run_firmware(build_firmware(headers_for(spec), target=fpu_target), ["replay", "states-only.bin", "out.bin"],
                       cwd=folder, timeout_s=60, target=fpu_target)
    assert run.returncode == 2 and "channel count differs from TU_CH" in run.output, run.output


def test_measure_counts_an_update_with_inputs_early_and_in_steady_state(forced):
    spec, folder, _ = forced
    out = measure_instructions(build_firmware(headers_for(spec)), folder, stream="stream.bin")
    early, chunk, steady = (out[k] for k in ("instructions_per_update", "instructions_per_chunk",
                                             "instructions_per_update_steady"))
    assert out["steady_window"] == [201, 400]  # the last half of the 400 updates
    assert 0.8 < steady / early < 1.2 and 100_000 < early < 2_000_000 and 0 < chunk < early
    assert out["projected_ms_per_update"] == pytest.approx({str(c): early * c / (MHZ * 1e3) for c in CPI})
    with pytest.raises(RuntimeError, match="the measure run failed"):
        measure_instructions(build_firmware(headers_for(spec)), folder, stream="missing.bin")


@pytest.mark.parametrize("config, data, val", REAL_LOGS)
def test_a_real_log_trained_on_the_emulated_mcu_scores_as_the_python_trainer(config, data, val, tmp_path):
    spec = spec_from_config(config, STEPS)
    dm = data_module(config, STEPS)
    y, ticks, segment = data_stream(dm)
    write_stream(tmp_path / "stream.bin", y, ticks, segment)
    out = replay_log(spec, dm, "stream.bin", build_firmware(headers_for(spec)), tmp_path, timeout_s=120)
    assert out["updates"] == out["python_updates"] == 700
    key = "open_loop_1s_nrmse"
    device, python = out["device"][key], out["python"][key]
    assert np.isfinite(device) and abs(out["device_over_python_1s"] - 1.0) < 0.10, (device, python)
    # the exported run folder is a model `torch-ude score` reads, with the run's columns: the same score
    scored = score(out["run_folder"], [data / val], horizons=[1.0], out=tmp_path / "score")
    assert scored["pooled"][key] == pytest.approx(device, rel=1e-6)


@pytest.mark.parametrize("name, trust", [("dfki_pendulum", {"periodic": False, "envelope": False}),
                                         ("emps", {"invariant": False, "envelope": False})])
def test_the_device_configs_are_the_linear_configs_with_what_the_c_port_runs(name, trust):
    linear, device = (yaml.safe_load((REPO / "configs" / f"{name}_{v}.yaml").read_text()) for v in ("linear", "c"))
    model = device["model"]["init_args"]
    assert model["linear"] is True and "tap_average" not in model["stream"]  # the linear term, box taps
    assert {k: model.pop(k) for k in trust} == trust
    assert device["trainer"].pop("default_root_dir") == f"runs/{name}_c"
    linear["trainer"].pop("default_root_dir")
    assert device == linear
    # the generator takes it (it reads the config's logs for their rate): skipped without ../shared/data
    if not (DATA / name).is_dir():
        pytest.skip(f"the logs are not in {DATA / name} (see ../shared/data/README.md)")
    spec_from_config(f"configs/{name}_c.yaml")

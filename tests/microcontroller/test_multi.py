"""Several trainers in one image (issue 32, item 7): per-instance configurations.

One build holds two configurations of different plants and sizes: the DFKI pendulum's known model
driven by a recorded torque (3 channels, 500 Hz) and the simulated single pendulum (2 channels,
1 kHz). Each ``tu_trainer`` is initialised with its ``tu_config``; the instance buffers have the
image's maxima. Trained interleaved, chunk by chunk, each gives bit for bit the weights it gives built
alone, on the host and on the emulated Cortex-M4F. In the two-configuration image the golden runner
of the torque pendulum (configuration 0) passes every stage, and a configuration with the other one's
tables, or a checkpoint of the other one, is refused with ``TU_ERR_CONFIG``.
"""
import re
import subprocess

import numpy as np
import pytest

from microcontroller.build import ROOT, build
from microcontroller.ctrainer import CTrainer
from microcontroller.files import read_result, write_golden, write_stream
from microcontroller.generate import headers_for, spec_from_config, write_headers
from microcontroller.golden import chunks, golden_stream, run_goldens, stage_goldens
from microcontroller.memory import build_maxima, static_bytes
from microcontroller.target import CORTEX_M4, build_firmware, run_firmware
from tests.microcontroller.helpers import forced_log
from tests.microcontroller.test_c_trainer import RUNNER, SMALL
from torch_ude.systems import SensorFaults


@pytest.fixture(scope="module")
def plants(tmp_path_factory):
    """(spec, stream) of the torque pendulum (configuration 0) and of the single pendulum (configuration 1)."""
    folder = tmp_path_factory.mktemp("multi")
    config, torque_stream = forced_log(folder, 12.0)
    torque = spec_from_config(config, [*SMALL, "--trainer.max_steps", "400"])
    pendulum = spec_from_config("configs/pendulum_case_a.yaml", [*SMALL, "--trainer.max_steps", "200"])
    faults = SensorFaults(drop_rate=0.01, nan_rate=0.001, spike_rate=0.002, dropout_rate=2e-4, dropout_length=50,
                          seed=3)
    return folder, [(torque, torque_stream), (pendulum, golden_stream(pendulum, 8.0, 0.01, faults))]


def _train(trainers, streams):
    """Interleaved: one training tick's chunk of each stream in turn, its due updates, then each reservoir."""
    parts = [list(chunks(ticks, round(t.spec.fs / t.spec.train_rate))) for t, (_, ticks, _) in zip(trainers, streams)]
    for k in range(max(len(p) for p in parts)):
        for t, p, (y, ticks, segment) in zip(trainers, parts, streams):
            if k < len(p):
                t.steps(t.push_chunk(y[p[k]], ticks[p[k]], segment[p[k]]))
    for t in trainers:
        t.steps(t.spec.max_steps - t.report()["updates"])


def test_two_plants_in_one_image_train_interleaved_as_each_alone(plants):
    _, configured = plants
    specs = [spec for spec, _ in configured]
    streams = [stream for _, stream in configured]
    together = [CTrainer(spec, image=specs) for spec in specs]
    assert together[0].library == together[1].library  # one image
    assert together[0].static_bytes == static_bytes(specs)
    maxima = build_maxima(specs)
    assert maxima["CH"] == 3 and maxima["CAL_LEN"] == 1000  # the torque pendulum's channels, the pendulum's record
    _train(together, streams)
    for trainer, spec, stream in zip(together, specs, streams):
        alone = CTrainer(spec)
        _train([alone], [stream])
        assert alone.static_bytes == static_bytes(spec) <= trainer.static_bytes
        assert trainer.report()["updates"] == spec.max_steps
        assert np.array_equal(trainer.weights(True), alone.weights(True))
        assert np.array_equal(trainer.weights(False), alone.weights(False))
        mine, theirs = trainer.report(), alone.report()
        assert mine["counters"] == theirs["counters"] and mine["calibration"] == theirs["calibration"]
        assert mine["in_scale"] == theirs["in_scale"] and len(mine["in_scale"]) == spec.field.n_states + spec.field.n_inputs
    # a checkpoint of one configuration does not restore into the other
    with pytest.raises(ValueError, match="another configuration"):
        together[1].load_state_bytes(together[0].state_bytes())
    together[0].load_state_bytes(together[0].state_bytes())
    with pytest.raises(ValueError, match="not one of the image"):
        CTrainer(specs[0], image=specs[1:])


def test_configurations_of_different_input_maps_train_in_one_image_as_each_alone(plants):
    """Periodic and invariant states per configuration (issue 32, item 2): the torque pendulum with its angle
    invariant, the single pendulum with its angle periodic, and the same pendulum without a map, in one image
    (which has the map code), interleaved: each gives bit for bit the weights it gives built alone."""
    folder, configured = plants
    (_, torque_stream), (_, pendulum_stream) = configured
    small = [*SMALL, "--trainer.max_steps", "200"]
    specs = [spec_from_config(folder / "log.yaml", [*SMALL, "--trainer.max_steps", "400", "--data.invariant",
                                                    "[position]"]),
             spec_from_config("configs/pendulum_case_a.yaml", [*small, "--model.periodic", "true"]),
             spec_from_config("configs/pendulum_case_a.yaml", small)]
    assert [spec.field.input_map.invariant for spec in specs] == [(0,), (), ()]
    assert [spec.field.input_map.periodic for spec in specs] == [(), (0,), ()]
    streams = [torque_stream, pendulum_stream, pendulum_stream]
    together = [CTrainer(spec, image=specs) for spec in specs]
    _train(together, streams)
    for trainer, spec, stream in zip(together, specs, streams):
        alone = CTrainer(spec)
        _train([alone], [stream])
        assert trainer.report()["updates"] == spec.max_steps
        assert np.array_equal(trainer.weights(True), alone.weights(True))
        assert np.array_equal(trainer.weights(False), alone.weights(False))


def test_the_golden_runner_passes_in_a_two_configuration_image(plants):
    """Configuration 0's golden vectors (every stage, a whole run, API misuse, checkpoints) with the
    instance and its buffers sized for both configurations, under the sanitizers; and the refusals."""
    folder, configured = plants
    (torque, (y, ticks, segment)), (pendulum, _) = configured
    gen = folder / "gen"
    write_headers([torque, pendulum], gen)
    write_golden(folder / "golden.bin", stage_goldens(torque) | run_goldens(torque, y, ticks, segment))
    write_stream(folder / "stream.bin", y, ticks, segment)
    exe = build(gen, "program", RUNNER, sanitize=True, extra_flags=["-I", str(ROOT / "tests")])
    proc = subprocess.run([str(exe), str(folder / "golden.bin"), str(folder / "stream.bin")], capture_output=True,
                          text=True, timeout=300)
    summary = re.search(r"^(\d+) passed, (\d+) failed$", proc.stdout, re.M)
    assert summary and proc.returncode == 0 and summary.group(2) == "0", proc.stdout + proc.stderr
    assert "PASS configurations_checked" in proc.stdout and "Sanitizer" not in proc.stderr
    assert f"sizeof(tu_trainer) = {static_bytes([torque, pendulum])} bytes" in proc.stdout


def test_the_emulated_m4f_trains_two_plants_in_one_firmware(plants, tmp_path):
    """`app.elf multi` on the Cortex-M4F: the two trainers of one firmware, interleaved, give bit for bit
    the weights each single-configuration firmware gives."""
    _, configured = plants
    specs = [spec for spec, _ in configured]
    args = []
    for k, (_, stream) in enumerate(configured):
        write_stream(tmp_path / f"stream{k}.bin", *stream)
        args += [f"stream{k}.bin", f"multi{k}.bin"]
    run = run_firmware(build_firmware(headers_for(specs)), ["multi", *args], cwd=tmp_path, timeout_s=300)
    assert run.returncode == 0, run.output
    for k, spec in enumerate(specs):
        assert f"trainer {k} (config {spec.config_hash()})" in run.output, run.output
        alone = run_firmware(build_firmware(headers_for(spec)), ["replay", f"stream{k}.bin", f"alone{k}.bin"],
                             cwd=tmp_path, timeout_s=300)
        assert alone.returncode == 0, alone.output
        ema, raw, _ = read_result(tmp_path / f"multi{k}.bin")
        ema1, raw1, _ = read_result(tmp_path / f"alone{k}.bin")
        assert ema.size == spec.field.num_parameters()
        assert np.array_equal(ema, ema1) and np.array_equal(raw, raw1)
    assert CORTEX_M4.available()


def test_one_image_has_one_reservoir_precision(tmp_path):
    """The instance has one reservoir type: a build mixing float32 and float16 storage is refused."""
    small = [*SMALL, "--trainer.max_steps", "200"]
    single = spec_from_config("configs/pendulum_case_a.yaml", small)
    half = spec_from_config("configs/pendulum_case_a.yaml", [*small, "--model.stream.reservoir_precision", "float16"])
    with pytest.raises(ValueError, match=r"store their reservoirs in \['float16', 'float32'\]; .* the same "
                                         r"model.stream.reservoir_precision"):
        write_headers([single, half], tmp_path / "gen")
    assert not (tmp_path / "gen" / "tu_config.h").exists()

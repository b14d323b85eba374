"""The C trainer per plant on the emulated Cortex-M4F: real logs trained there, memory and time per plant, host
speed-up.

``python -m benchmarks.device.plants`` (needs arm-none-eabi-gcc and qemu-system-arm; ``make test`` installs
them; a plant whose logs are missing from ../shared/data is left out, with the reason) measures, saving
``results/c_plants/c_plants.json``:

* real logs on the emulated MCU (issue 32, item 3): the training logs of ``configs/dfki_pendulum_c.yaml``
  (the DFKI pendulum: angle, rate, then the motor torque) and ``configs/emps_c.yaml`` (the EMPS axis:
  position, its velocity derived on the host by the data module, then the voltage), as the data module
  streams them (resampled onto ``fs``), go to the firmware through a stream file; it trains 8000 updates
  (float32, static memory, the residual with its linear term, box-averaged taps, the known model's fixed
  constants) and writes its weights, which Python exports (``field.pt``, ``field.json``, ``metrics.json``
  in ``results/c_plants/NAME/device``, a run folder ``torch-ude score`` reads) and scores on the validation log with
  the data module's prediction errors (`microcontroller.device_replay.replay_log`; `torch_ude.prediction`:
  one-step, 1 s and 5 s open-loop NRMSE). The float32 Python
  trainer on the same samples with the same seed and PCG32 draws (`microcontroller.golden.reference_run`)
  and the known model alone are scored the same way; the result is the device's 1 s NRMSE over the
  Python trainer's (issue 32: within 10 %);
* memory and time per plant (item 4): single pendulum (``configs/pendulum_case_a_c.yaml``, the paper's
  device run), double pendulum (`benchmarks.device.memory`'s B = 2048 case), the DFKI pendulum, the EMPS axis
  and a user's Duffing oscillator (`UserDuffing`, a `System` defined here, outside ``torch_ude``, on the
  paper's device settings): ``sizeof(tu_trainer)``, the firmware's ``.data + .bss`` and ``.text``,
  instructions per update (the mean over updates 51-70 and the steady-state median over the last 1000 of
  the 8000) and per training tick of stream work, exactly (QEMU ``-icount shift=0``; a time at 240 MHz is
  a projection: QEMU models no pipeline, cache or wait state);
* the host speed-up (item 8): the C trainer through ctypes against today's Python trainer on the same
  config, side by side in this run (`microcontroller.host_speed.host_speedup`).
"""
from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import numpy as np
import torch

from microcontroller.files import write_stream
from microcontroller.generate import headers_for, spec_from_config
from microcontroller.golden import data_module, data_stream
from microcontroller.host_speed import host_speedup
from microcontroller.device_replay import replay_log
from microcontroller.target import build_firmware, measure_instructions, sizes
from torch_ude.systems import DuffingField, System
from torch_ude.training.outputs import to_jsonable

from benchmarks.common import C_CASES, C_CONFIG, RESULTS, save, speedup_line


class UserDuffing(System):
    """A user's plant outside ``torch_ude``: a Duffing oscillator with Coulomb friction
    (`torch_ude.systems.DuffingField`), whose known model lacks the damping ``delta`` (the residual learns
    it), re-excited to random states every 2-4 s (x in m, v in m/s)."""

    state_names = ("x", "v")
    cases = ("A",)
    reexcite_interval = (2.0, 4.0)

    def __init__(self, alpha: float = 4.0, beta: float = 1.5, delta: float = 0.1, mu: float = 0.05) -> None:
        self.alpha, self.beta, self.delta, self.mu = alpha, beta, delta, mu

    def true_field(self) -> DuffingField:
        """The plant's field."""
        return DuffingField(self.alpha, self.beta, self.delta, self.mu)

    def build_known_field(self, case: str) -> DuffingField:
        """The known model: the field without damping."""
        return DuffingField(self.alpha, self.beta, 0.0, self.mu)

    def initial_state(self) -> np.ndarray:
        """x = 1 m at rest."""
        return np.array([1.0, 0.0])

    def reexcite(self, rng: np.random.Generator) -> np.ndarray:
        """A random state in [-1.2, 1.2] m x [-1, 1] m/s."""
        return np.array([rng.uniform(-1.2, 1.2), rng.uniform(-1.0, 1.0)])

    def damping_terms(self, case: str) -> tuple[tuple[int, int, float], ...]:
        """The damping the residual should learn: ``delta`` on v' per unit v."""
        return ((1, 1, self.delta),)

    def init_args(self) -> dict:
        """Constructor arguments."""
        return {"alpha": self.alpha, "beta": self.beta, "delta": self.delta, "mu": self.mu}


#: name -> (config, overrides, the data a recorded plant needs)
PLANTS = {
    "single pendulum": (C_CONFIG, [], None),  # (its reservoir in float16)
    "single pendulum, float32 reservoir": (C_CONFIG, ["--model.stream.reservoir_precision", "float32"], None),
    "double pendulum": (*C_CASES["double pendulum, B = 2048"], None),
    "DFKI torque pendulum": ("configs/dfki_pendulum_c.yaml", [], "../shared/data/dfki_pendulum"),
    # the reservoir in float16 (model.stream.reservoir_precision, issue 32 item 4) beside the float32 above
    "DFKI torque pendulum, float16 reservoir": ("configs/dfki_pendulum_c.yaml",
                                                ["--model.stream.reservoir_precision", "float16"],
                                                "../shared/data/dfki_pendulum"),
    # the Python trainer's trust defaults for a log on the device (issue 32, item 2): (sin, cos) angle, envelope
    "DFKI torque pendulum, periodic angle, envelope": ("configs/dfki_pendulum_c.yaml",
                                                       ["--model.periodic", "true", "--model.envelope", "true"],
                                                       "../shared/data/dfki_pendulum"),
    # ... with the known model's five constants trained as configs/dfki_pendulum.yaml trains them (issue 32): its
    # bounds and physics_first 1 (the constants alone, the residual held at zero), refitted at the end on both
    "DFKI torque pendulum, physical parameters": (
        "configs/dfki_pendulum_c.yaml",
        ["--model.periodic", "true", "--model.envelope", "true", "--model.physics_first", "1",
         "--data.known.init_args.trainable",
         "{inertia: [0.03, 0.5], mass_com: [0.05, 1.0], viscous: [0.0, 0.5], coulomb: [0.0, 1.0], "
         "offset: [-1.0, 1.0]}"],
        "../shared/data/dfki_pendulum"),
    # the host's own config, unchanged (issue 32): calibration replay, every jet kept (B = 8192), gate factor 2, the
    # constants alone with the end-of-run refit, the input-affine form, envelope
    "DFKI torque pendulum, configs/dfki_pendulum.yaml": ("configs/dfki_pendulum.yaml", [],
                                                         "../shared/data/dfki_pendulum"),
    "EMPS axis": ("configs/emps_c.yaml", [], "../shared/data/emps"),
    "user's Duffing oscillator": (C_CONFIG, ["--data.system.class_path", "benchmarks.device.plants.UserDuffing"],
                                  None),
}
CPI, MHZ = 1.5, 240.0


def plant(name: str, folder: Path) -> dict:
    """Memory and instructions of one plant's firmware (and, for a recorded plant, its real log trained on the
    device: `microcontroller.device_replay.replay_log`)."""
    config, overrides, data = PLANTS[name]
    spec = spec_from_config(config, overrides)
    dm = data_module(config, overrides)
    y, ticks, segment = data_stream(dm)
    folder.mkdir(parents=True, exist_ok=True)
    write_stream(folder / "stream.bin", y, ticks, segment)
    elf = build_firmware(headers_for(spec))
    out = {"config": config, "overrides": overrides, "states": spec.field.n_states, "inputs": spec.field.n_inputs,
           "capacity": spec.stream.capacity, "fs": spec.fs, "samples": len(y), "max_steps": spec.max_steps,
           "sizes": sizes(elf), "instructions": measure_instructions(elf, folder, stream="stream.bin")}
    if data is not None:
        out["real_log"] = replay_log(spec, dm, "stream.bin", elf, folder)
    return out


def table(plants: dict) -> str:
    """A Markdown table of memory and instructions per update, one row a plant."""
    lines = ["| plant | states + inputs | B | tu_trainer bytes | .data + .bss | .text | instructions per update, "
             "updates 51-70 | steady state (median of updates) | per stream chunk | ms per update (steady) at "
             f"{MHZ:g} MHz, CPI {CPI} |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, p in plants.items():
        s, i = p["sizes"], p["instructions"]
        lines.append(f"| {name} (at {p.get('commit') or 'an unrecorded commit'}) | {p['states']} + {p['inputs']} | "
                     f"{p['capacity']} | {s['trainer']:,} | "
                     f"{s['data'] + s['bss']:,} | {s['text']:,} | {i['instructions_per_update']:,} | "
                     f"{i['instructions_per_update_steady']:,} ({i['steady_window'][0]}-{i['steady_window'][1]}) | "
                     f"{i['instructions_per_chunk']:,} | {i['projected_ms_per_update_steady'][str(CPI)]:.2f} |")
    return "\n".join(lines)


def real_log_table(plants: dict) -> str:
    """A Markdown table of the real-log scores: device, Python trainer, known model alone."""
    lines = ["| log | trainer | one-step NRMSE | 1 s open-loop NRMSE | 5 s open-loop NRMSE |",
             "|---|---|---:|---:|---:|"]
    for name, p in plants.items():
        if "real_log" not in p:
            continue
        r = p["real_log"]
        for who, label in (("device", "C trainer on the Cortex-M4F (QEMU)"), ("python", "float32 Python trainer"),
                           ("known_model", "known model alone")):
            e = r[who]
            lines.append(f"| {name} | {label} | {e['one_step_nrmse']:.4f} | {e['open_loop_1s_nrmse']:.4f} | "
                         f"{e['open_loop_5s_nrmse']:.4f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Command line: see the module doc."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.device.plants", description=__doc__.split("\n\n")[0])
    parser.add_argument("--plants", nargs="*", default=list(PLANTS), choices=list(PLANTS), metavar="PLANT",
                        help=f"plants to measure (default all: {', '.join(PLANTS)})")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each engine for the host speed-up (0: none)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    # a run of some plants (or without --repeats) updates their entries in the saved JSON and keeps the others',
    # each entry with the commit it was measured at
    saved = RESULTS / "c_plants" / "c_plants.json"
    out: dict = json.loads(saved.read_text()) if saved.is_file() else {}
    out = {"plants": out.get("plants", {}), "skipped": out.get("skipped", {}), **{
        k: v for k, v in out.items() if k not in ("plants", "skipped")}}
    commit = _commit()
    for name in args.plants:
        out["skipped"].pop(name, None)
        data = PLANTS[name][2]
        if data is not None and not Path(data).is_dir():
            out["skipped"][name] = f"its logs are not in {data} (see ../shared/data/README.md)"
            continue
        out["plants"][name] = {**plant(name, RESULTS / "c_plants" / name.replace(" ", "_").replace("'", "")),
                               "commit": commit}
    for name, p in out["plants"].items():
        if "real_log" in p:
            r = p["real_log"]
            print(f"{name}: 1 s open-loop NRMSE on the validation log, device {r['device']['open_loop_1s_nrmse']:.4f} "
                  f"vs float32 Python trainer {r['python']['open_loop_1s_nrmse']:.4f} (ratio "
                  f"{r['device_over_python_1s']:.4f}); weights within {r['max_weight_difference_to_python']:.2g}; "
                  f"{r['updates']} updates, m = {r['m']}, QEMU {r['qemu_wall_s']} s")
    for name, why in out["skipped"].items():
        print(f"{name}: skipped, {why}")
    print(real_log_table(out["plants"]))
    print(table(out["plants"]))
    if args.repeats > 0:
        out["host_speedup"] = {**host_speedup(C_CONFIG, args.repeats, RESULTS / "c_speed"), "commit": commit}
        print(speedup_line(out["host_speedup"]))
    print(f"saved in {save('c_plants', to_jsonable(out))}")


def _commit() -> str | None:
    """The checked-out commit (short hash, ``+`` if the tree has changes), or None outside a git checkout."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return head.stdout.strip() + ("+" if dirty.stdout.strip() else "")


if __name__ == "__main__":
    main()

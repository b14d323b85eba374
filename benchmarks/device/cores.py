"""The C trainer on MCU-class cores: Cortex-M4F (mps2-an386) and rv32imafc (virt) under QEMU, against the paper's ESP32.

``python -m benchmarks.device.cores`` (needs arm-none-eabi-gcc and qemu-system-arm, and for the rv32
column riscv64-unknown-elf-gcc with picolibc and qemu-system-riscv32; ``make test`` installs
them) builds the firmware for ``configs/pendulum_case_a_c.yaml`` (B = 2048) and measures, saving
``results/c_device/c_device.json`` and ``adaptation.png``:

* memory: the trainer instance, ``.data + .bss`` and ``.text`` of the firmware;
* instructions per update (the mean over updates 51-70 and the steady-state median over the last
  1000 of the 8000) and per chunk of stream (40 samples, one 25 Hz tick), exactly, with
  ``-icount shift=0`` and the CMSDK timer, and the time per update they project at 240 MHz for
  1.0, 1.5 and 2.0 cycles per instruction (QEMU models no pipeline, cache or wait state; a
  Cortex-M4 stands in for the ESP32's Xtensa LX6);
* replay: for run seeds 0-2 (the seed fixes the stream, the initial weights and the PCG32
  draws, compiled into each firmware) the firmware reads the 60 s, 1 % noise stream (written by
  the Python simulator) through semihosting, trains 8000 updates and writes its weights back;
  Python scores them (e_field, c_hat) and writes field.pt, field.json, metrics.json; the host
  build of the same sources on the same stream gives the largest weight difference;
* self-contained: the firmware simulates the pendulum itself (RK4, PCG32 noise), 60 s;
* adaptation: a field pretrained on the host keeps training on the device
  (``configs/pendulum_case_a_adapt_c.yaml``) while the damping changes from 0.40 to 0.55 at 60 s of
  120 s: c_hat every 50 updates, the time to within 0.02 of 0.55, e_field against the new plant;
* the other targets (rv32imafc/ilp32f, the ESP32-P4 class, where its tools are installed): memory,
  instructions per update and per chunk (``-icount shift=0``, the ``minstret`` counter) and the
  seed-0 replay against the host build, printed beside the Cortex-M4F's.

Everything above but the last point runs on the Cortex-M4F.

``--precisions float32 float16`` runs instead the reservoir-storage comparison (issue 32, item 4:
``model.stream.reservoir_precision``): for each storage, on the Cortex-M4F, the trainer instance and
``.data + .bss``, the replays of ``--seeds`` (e_field, c_hat, host vs device weights) and the
instructions per update, side by side; saves ``results/c_device_precision/c_device_precision.json``.
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path

import numpy as np
import torch
from matplotlib.figure import Figure

from microcontroller.device_replay import replay_simulated
from microcontroller.files import write_stream
from microcontroller.generate import headers_for, spec_from_config, spec_from_run
from microcontroller.golden import golden_stream
from microcontroller.target import (CORTEX_M4, RV32IMAC, TARGETS, Target, build_firmware, c_hat_trace, export_result,
                                    measure_instructions, run_firmware, sizes)
from torch_ude.cli import fit_config
from torch_ude.systems import SinglePendulum
from torch_ude.training.data import StreamDataModule
from torch_ude.training.outputs import to_jsonable

from benchmarks.common import C_CONFIG, RESULTS, save

ADAPT = "configs/pendulum_case_a_adapt_c.yaml"


def _precision(precision: str | None) -> list[str]:
    """The override of the reservoir's storage (None: the config's)."""
    return [] if precision is None else ["--model.stream.reservoir_precision", precision]


def replay(folder: Path, seed: int, target: Target = CORTEX_M4, precision: str | None = None) -> dict:
    """One replay on the emulated core with run seed ``seed`` (stream, initial weights and PCG32
    draws, compiled into its firmware), scored and compared with the host build; ``precision``: the
    reservoir's storage (None: the config's)."""
    spec = spec_from_config(C_CONFIG, ["--seed_everything", str(seed), *_precision(precision)])
    elf = build_firmware(headers_for(spec), target=target)
    y, ticks, segment = golden_stream(spec, 60.0, spec.noise)
    write_stream(folder / f"stream-seed{seed}.bin", y, ticks, segment)
    name = f"seed{seed}" + ("" if target is CORTEX_M4 else f"-{target.name}") + ("" if precision is None else
                                                                                  f"-{precision}")
    states = StreamDataModule(spec.system, spec.case, duration=60.0, noise=spec.noise, seed=seed).evaluation_states()
    return {"seed": seed, **replay_simulated(spec, f"stream-seed{seed}.bin", elf, folder, name, target, states=states,
                                             extra={"seed": seed})}


def self_contained(spec, elf, folder: Path) -> dict:
    """60 s on the firmware's own simulated pendulum."""
    run = run_firmware(elf, ["simulate", "simulate.bin", "60"], cwd=folder, timeout_s=600, check=True)
    metrics, _ = export_result(spec, folder / "simulate.bin")
    return {"c_hat_on_device": float(re.findall(r"c_hat ([\d.-]+)", run.output)[-1]),
            "c_hat": metrics["c_hat"], "e_field_visited": metrics["e_field_visited"], "e_field": metrics["e_field"],
            "m": metrics["m"]}


def adaptation(folder: Path) -> dict:
    """Pretrain on the host (C backend), then adapt on the device while the damping grows."""
    pretrained = RESULTS / "c_device" / "pretrained"
    fit_config(C_CONFIG, pretrained, 0, reuse=True)
    spec = spec_from_run(pretrained, ADAPT)
    elf = build_firmware(headers_for(spec))
    run = run_firmware(elf, ["simulate", "adapt.bin", "120", "0.55", "60", "50"], cwd=folder, timeout_s=600,
                       check=True)
    points = c_hat_trace(run.output)
    after = [(t - 60.0, c) for t, c in points if t > 60.0]
    first = next((t for t, c in after if abs(c - 0.55) <= 0.02), None)
    stays = next((t for i, (t, _) in enumerate(after) if all(abs(c - 0.55) <= 0.02 for _, c in after[i:])), None)
    metrics, _ = export_result(spec, folder / "adapt.bin", system=SinglePendulum(damping=0.55))
    fig = Figure(figsize=(5, 3))
    ax = fig.subplots()
    ax.plot([t for t, _ in points], [c for _, c in points], ".-", ms=3)
    for level in (0.40, 0.55):
        ax.axhline(level, color="k", lw=0.6, ls="--")
    ax.axvline(60.0, color="r", lw=0.6)
    ax.set_xlabel("stream time (s)")
    ax.set_ylabel("c_hat on the device")
    fig.tight_layout()
    fig.savefig(folder / "adaptation.png", dpi=120)
    return {"c_hat_over_time": points, "seconds_to_within_0.02": first, "seconds_to_stay_within_0.02": stays,
            "final_c_hat": points[-1][1] if points else None, "e_field_new_plant": metrics["e_field"],
            "e_field_visited_new_plant": metrics["e_field_visited"], "c_hat_new_plant": metrics["c_hat"]}


def on_target(target: Target, folder: Path) -> dict:
    """Memory, instructions (after the Cortex-M4F's seed-0 stream is written) and the seed-0
    replay on a target other than the Cortex-M4F."""
    elf = build_firmware(headers_for(spec_from_config(C_CONFIG)), target=target)
    # software floats take 35 times the instructions: a run of 1000 updates, steady state its last 500
    updates = 1000 if target is RV32IMAC else None
    return {"sizes": sizes(elf, target), "instructions": measure_instructions(elf, folder, target, updates=updates),
            "replay": replay(folder, 0, target)}


def precision_comparison(folder: Path, seeds: list[int], precisions: list[str]) -> dict:
    """The reservoir's storages side by side on the Cortex-M4F: memory, replays, instructions."""
    out = {}
    for precision in precisions:
        elf = build_firmware(headers_for(spec_from_config(C_CONFIG, _precision(precision))))
        runs = [replay(folder, s, precision=precision) for s in seeds]
        out[precision] = {"sizes": sizes(elf), "replay": runs,
                          "instructions": measure_instructions(elf, folder, stream=f"stream-seed{seeds[0]}.bin")}
        for key in ("e_field", "e_field_visited", "c_hat"):
            values = [r[key] for r in runs]
            spread = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
            out[precision][key] = {"mean": float(np.mean(values)), "std": spread, "min": float(np.min(values)),
                                   "max": float(np.max(values))}
    return out


def precision_table(out: dict) -> str:
    """A Markdown table of `precision_comparison`, one column a storage."""
    rows = [("tu_trainer bytes", lambda c: f"{c['sizes']['trainer']:,}"),
            (".data + .bss bytes", lambda c: f"{c['sizes']['data'] + c['sizes']['bss']:,}"),
            ("instructions per update (steady state)",
             lambda c: f"{c['instructions']['instructions_per_update_steady']:,}"),
            ("instructions per update (updates 51-70)", lambda c: f"{c['instructions']['instructions_per_update']:,}"),
            ("instructions per 40-sample chunk", lambda c: f"{c['instructions']['instructions_per_chunk']:,}"),
            ("e_field per seed", lambda c: ", ".join(f"{r['e_field']:.5f}" for r in c["replay"])),
            ("e_field mean (sd)", lambda c: f"{c['e_field']['mean']:.5f} ({c['e_field']['std']:.5f})"),
            ("e_field_visited per seed", lambda c: ", ".join(f"{r['e_field_visited']:.5f}" for r in c["replay"])),
            ("e_field_visited mean (sd)",
             lambda c: f"{c['e_field_visited']['mean']:.5f} ({c['e_field_visited']['std']:.5f})"),
            ("c_hat per seed", lambda c: ", ".join(f"{r['c_hat']:.4f}" for r in c["replay"])),
            ("host vs device weights", lambda c: f"{max(r['max_weight_difference_to_host'] for r in c['replay']):.2g}")]
    lines = ["| reservoir storage | " + " | ".join(out) + " |", "|---|" + "---:|" * len(out)]
    lines += [f"| {label} | " + " | ".join(get(c) for c in out.values()) + " |" for label, get in rows]
    return "\n".join(lines)


def side_by_side(out: dict) -> str:
    """A Markdown table of memory and instructions per update, one column a target."""
    columns = {CORTEX_M4.name: out, **{name: out[name] for name in TARGETS if name in out}}
    rows = [("tu_trainer bytes", lambda c: c["sizes"]["trainer"]),
            (".data + .bss bytes", lambda c: c["sizes"]["data"] + c["sizes"]["bss"]),
            (".text bytes", lambda c: c["sizes"]["text"]),
            ("instructions per update (updates 51-70)", lambda c: c["instructions"]["instructions_per_update"]),
            ("instructions per update (steady state: median of the last 1000; rv32imac: 500 of 1000)",
             lambda c: c["instructions"]["instructions_per_update_steady"]),
            ("instructions per 40-sample chunk", lambda c: c["instructions"]["instructions_per_chunk"])]
    lines = ["| | " + " | ".join(columns) + " |", "|---|" + "---:|" * len(columns)]
    lines += [f"| {label} | " + " | ".join(f"{get(c):,}" for c in columns.values()) + " |" for label, get in rows]
    lines.append("| ms per update at 240 MHz, CPI 1.5 | " + " | ".join(
        f"{c['instructions']['projected_ms_per_update']['1.5']:.2f}" for c in columns.values()) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Command line: see the module doc."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.device.cores", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    parser.add_argument("--precisions", nargs="+", choices=("float32", "float16"), default=None,
                        help="compare these reservoir storages instead (memory, replays, instructions)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.precisions:
        folder = RESULTS / "c_device_precision"
        folder.mkdir(parents=True, exist_ok=True)
        out = precision_comparison(folder, args.seeds, args.precisions)
        print(precision_table(out))
        print(f"saved in {save('c_device_precision', to_jsonable(out))}")
        return
    folder = RESULTS / "c_device"
    folder.mkdir(parents=True, exist_ok=True)
    spec = spec_from_config(C_CONFIG)
    elf = build_firmware(headers_for(spec))
    out = {"sizes": sizes(elf), "replay": [replay(folder, s) for s in args.seeds]}
    out["instructions"] = measure_instructions(elf, folder)
    out["self_contained"] = self_contained(spec, elf, folder)
    out["adaptation"] = adaptation(folder)
    for target in TARGETS.values():
        if target is not CORTEX_M4 and target.available():
            out[target.name] = on_target(target, folder)
    r = out["replay"]
    sizes_ = out["sizes"]
    print(f"memory: tu_trainer {sizes_['trainer']:,} bytes; .data + .bss {sizes_['data'] + sizes_['bss']:,}; "
          f".text {sizes_['text']:,}")
    errors = ", ".join(f"{x['e_field_visited']:.5f}" for x in r)
    dampings = ", ".join(f"{x['c_hat']:.4f}" for x in r)
    mean, gap = np.mean([x["e_field_visited"] for x in r]), max(x["max_weight_difference_to_host"] for x in r)
    print(f"replay (seeds {args.seeds}): e_field_visited {errors} (mean {mean:.5f}), "
          f"c_hat {dampings}, host vs device weights within {gap:.2g}")
    ins = out["instructions"]
    print(f"instructions: {ins['instructions_per_update']:,} per update (updates 51-70), "
          f"{ins['instructions_per_update_steady']:,} in steady state (median of updates "
          f"{ins['steady_window'][0]}-{ins['steady_window'][1]}), {ins['instructions_per_chunk']:,} per chunk; "
          f"at 240 MHz " + ", ".join(f"CPI {c}: {v:.2f} ms" for c, v in ins["projected_ms_per_update"].items()))
    sc, ad = out["self_contained"], out["adaptation"]
    print(f"self-contained: c_hat {sc['c_hat']:.4f}, e_field_visited {sc['e_field_visited']:.5f}")
    reach, stay = (("never" if ad[k] is None else f"after {ad[k]:.1f} s")
                   for k in ("seconds_to_within_0.02", "seconds_to_stay_within_0.02"))
    print(f"adaptation: within 0.02 of 0.55 {reach} (stays within it {stay}), final c_hat "
          f"{ad['final_c_hat']:.4f}, e_field_visited against the new plant {ad['e_field_visited_new_plant']:.5f}")
    for name in TARGETS:
        if name in out:
            x = out[name]["replay"]
            print(f"{name} replay (seed 0): e_field_visited {x['e_field_visited']:.5f}, c_hat {x['c_hat']:.4f}, "
                  f"host vs device weights within {x['max_weight_difference_to_host']:.2g}")
    print(side_by_side(out))
    print(f"saved in {save('c_device', to_jsonable(out))}")


if __name__ == "__main__":
    main()

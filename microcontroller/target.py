"""The C trainer on an MCU-class core: firmware for QEMU's Cortex-M4F (mps2-an386).

`build_firmware` compiles the library, the support code (stream files, replay, on-device
evaluation) and ``targets/cortex_m4`` with Debian's ``arm-none-eabi-gcc`` (hard float,
newlib with rdimon semihosting); `run_firmware` runs it under ``qemu-system-arm`` with a
time limit (a crashed firmware exits with status 3 through its fault handlers; a hang is
cut by the limit). QEMU models no pipeline, caches or wait states: its instruction counts
(``-icount shift=0``) are exact, cycle and time figures derived from them are estimates, and
a Cortex-M4 stands in for the ESP32's Xtensa LX6.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .build import ROOT, build

__all__ = ["ARM_FLAGS", "build_firmware", "run_firmware", "FirmwareRun", "sizes", "export_result", "TARGET"]

TARGET = ROOT / "targets" / "cortex_m4"
ARM_FLAGS = ["-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard", "-ffunction-sections",
             "-fdata-sections"]
ARM_CC = "arm-none-eabi-gcc"
QEMU = "qemu-system-arm"
SUPPORT = [ROOT / "support" / name for name in ("tu_stream_file.c", "tu_replay.c", "tu_eval.c", "tu_app.c")]


def _need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise FileNotFoundError(f"{tool} is not installed; `make test` installs gcc-arm-none-eabi, "
                                "libnewlib-arm-none-eabi and qemu-system-arm with apt-get.")
    return path


def build_firmware(gen: str | Path, opt: str = "-O2") -> Path:
    """Build ``app.elf`` for the mps2-an386 against the generated headers in ``gen`` (cached)."""
    _need(ARM_CC)
    return build(gen, "program", [*SUPPORT, TARGET / "startup.c", TARGET / "main.c"], compiler=ARM_CC, opt=opt,
                 extra_flags=ARM_FLAGS,
                 link_flags=["--specs=rdimon.specs", "-T", str(TARGET / "mps2_an386.ld"), "-Wl,--gc-sections",
                             "-lm"])


@dataclass
class FirmwareRun:
    """The outcome of `run_firmware`: exit status (124: the time limit), output, wall time."""

    returncode: int
    output: str
    wall_s: float


def run_firmware(elf: Path, args: list[str], cwd: str | Path, timeout_s: int = 300, icount: bool = False
                 ) -> FirmwareRun:
    """Run the firmware under QEMU with semihosting; ``args`` follow ``app.elf`` (paths relative
    to ``cwd``); ``icount`` counts one instruction per ns of virtual time (and tells the
    firmware so with ``--icount``: only then does it print instruction counts)."""
    import time

    _need(QEMU)
    args = ["--icount", *args] if icount else list(args)
    semi = ",".join(["enable=on", "target=native", "arg=app.elf", *(f"arg={a.replace(',', ',,')}" for a in args)])
    cmd = ["timeout", str(timeout_s), QEMU, "-M", "mps2-an386", "-cpu", "cortex-m4", "-nographic", "-monitor", "none",
           "-serial", "none", "-semihosting-config", semi, "-kernel", str(elf)]
    if icount:
        cmd[3:3] = ["-icount", "shift=0,align=off,sleep=off"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    return FirmwareRun(proc.returncode, proc.stdout + proc.stderr, time.perf_counter() - t0)


def sizes(elf: Path) -> dict[str, int]:
    """Section sizes (``text``, ``data``, ``bss``) and the size of the trainer instance (``trainer``)."""
    out = subprocess.run([_need("arm-none-eabi-size"), "-A", str(elf)], capture_output=True, text=True,
                         check=True).stdout
    sec = {m.group(1): int(m.group(2)) for m in re.finditer(r"^\.(\w+)\s+(\d+)", out, re.M)}
    nm = subprocess.run([_need("arm-none-eabi-nm"), "-S", str(elf)], capture_output=True, text=True, check=True).stdout
    trainer = next(int(m.group(1), 16) for m in re.finditer(r"^[0-9a-f]+ ([0-9a-f]+) [bBdD] trainer$", nm, re.M))
    return {"text": sec.get("text", 0), "data": sec.get("data", 0), "bss": sec.get("bss", 0), "trainer": trainer}


def export_result(spec, result_file: str | Path, folder: str | Path | None = None, system=None,
                  states: dict | None = None, extra: dict | None = None) -> tuple[dict, "HybridField"]:
    """Score the weights a firmware wrote, and (with ``folder``) export them like every trainer.

    Args:
        spec: the settings the firmware was generated from.
        result_file: the firmware's result file (`microcontroller.files.read_result`).
        folder: where to write ``field.pt``, ``field.json`` and ``metrics.json`` (None: nowhere).
        system: the plant to score against (default ``spec.system``; e.g. a changed plant).
        states: ``{"grid", "visited"}`` states of the metrics (default: the plant's grid and its
            visited part).
        extra: further entries for ``metrics.json``.

    Returns:
        The metrics (e_field, e_field_visited, c_hat, the firmware's report) and the field
        (float64, EMA weights).
    """
    import torch

    from torch_ude.field import HybridField
    from torch_ude.metrics import evaluate_field
    from torch_ude.training.outputs import RunOutputs

    from .ctrainer import load_weights, report_dict, report_type
    from .files import read_result

    system = system or spec.system
    ema, _, report_bytes = read_result(result_file)
    report = report_dict(report_type(spec.field.n_states).from_buffer_copy(report_bytes))
    field = HybridField.from_seed(spec.system.known_field(spec.case), spec.seed, hidden=spec.field.mlp.sizes[1:-1])
    load_weights(field, ema, report["in_scale"], report["out_scale"])
    if states is None:
        grid = system.evaluation_grid()
        states = {"grid": grid, "visited": grid[system.visited_region(grid)]}
    with torch.no_grad():
        metrics = evaluate_field(field.evaluate, system, spec.case, states)
    cal = report["calibration"] or {}
    metrics.update({"sigma_hat": cal.get("sigma"), "m": cal.get("m"), "lambda2": cal.get("lambda2"),
                    "reject_rate": None, "updates": report["updates"], "wall_s": None, "counters": report["counters"],
                    "report": report, **(extra or {})})
    if folder is not None:
        outputs = RunOutputs(folder, "jet_matching_c_cortex_m4", system, spec.case, spec.seed, {"settings": spec.settings()})
        outputs.start()
        outputs.finish(field, metrics)
    return metrics, field


def main(argv: list[str] | None = None) -> int:
    """Command line: build the firmware for generated headers and run it under QEMU.

    ``python -m microcontroller.target --gen DIR simulate result.bin 60`` (any firmware
    arguments after the options: ``replay STREAM RESULT``, ``measure STREAM`` with ``--icount``,
    ``simulate RESULT SECONDS [DAMPING AT [EVERY]]``). ``--stream FILE --config CONFIG`` writes
    the stream file of a config's simulated plant instead (for ``replay``). Paths are relative
    to ``--cwd`` (default: here). Returns the firmware's exit status.
    """
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m microcontroller.target", description=main.__doc__.split("\n")[0])
    parser.add_argument("--gen", help="folder of tu_config.h and tu_model_data.h (python -m microcontroller.generate)")
    parser.add_argument("--cwd", default=".", help="working directory of the firmware's files")
    parser.add_argument("--icount", action="store_true", help="one instruction per ns of virtual time (measure)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds before the emulation is cut")
    parser.add_argument("--stream", help="write the simulated stream of --config to this file and stop")
    parser.add_argument("--config", help="torch-ude config whose stream --stream writes")
    args, firmware_args = parser.parse_known_args(argv)
    if args.stream:
        from .files import write_stream
        from .generate import spec_from_config
        from .golden import golden_stream

        if not args.config:
            parser.error("--stream needs --config.")
        spec = spec_from_config(args.config)
        write_stream(args.stream, *golden_stream(spec, spec.duration, spec.noise))
        print(f"wrote {args.stream}")
        return 0
    if not args.gen or not firmware_args:
        parser.error("give --gen DIR and the firmware's arguments (e.g. simulate result.bin 60).")
    run = run_firmware(build_firmware(args.gen), firmware_args, cwd=args.cwd, timeout_s=args.timeout,
                       icount=args.icount)
    sys.stdout.write(run.output)
    return run.returncode


if __name__ == "__main__":
    import sys

    sys.exit(main())

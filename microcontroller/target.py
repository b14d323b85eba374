"""The C trainer on MCU-class cores: firmware for QEMU's Cortex-M4F and rv32imafc.

A `Target` describes one core: compiler, flags, link settings and the QEMU command. Three are
defined: `CORTEX_M4` (mps2-an386, Debian's ``arm-none-eabi-gcc``, hard float, IEEE ``__fp16`` so
that ``tu_half.h`` uses the FPU's half conversions, newlib with rdimon semihosting; a Cortex-M4
stands in for the ESP32's Xtensa LX6), `RV32` (rv32imafc/ilp32f on QEMU's ``virt`` machine,
``riscv64-unknown-elf-gcc`` with picolibc's semihosting: the ESP32-P4 class, a RISC-V core with a
single-precision FPU) and `RV32IMAC` (the same without the FPU, rv32imac/ilp32 with software
floats: the ESP32-C3/C6 class). `build_firmware` compiles the library, the support code (stream
files, replay, on-device evaluation), the shared firmware ``targets/main.c`` and the target's
``targets/<folder>/startup.c``; `run_firmware` runs it
under QEMU with a time limit (a crashed firmware exits with status 3 through its fault
handler; a hang is cut by the limit). QEMU models no pipeline, caches or wait states: its
instruction counts (``-icount shift=0``) are exact, cycle and time figures derived from them
are estimates.
"""
from __future__ import annotations

import copy
import re
import shutil
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

from .build import ROOT, build

__all__ = ["Target", "CORTEX_M4", "RV32", "RV32IMAC", "TARGETS", "build_firmware", "run_firmware", "FirmwareRun",
           "sizes", "export_result", "measure_instructions", "c_hat_trace", "CPI", "MHZ"]

#: Cycles per instruction and clock (MHz) the instruction counts are projected to times with (an ESP32 class core).
CPI = (1.0, 1.5, 2.0)
MHZ = 240.0

SUPPORT = [ROOT / "support" / name for name in ("tu_stream_file.c", "tu_replay.c", "tu_eval.c", "tu_app.c")]
TARGETS_DIR = ROOT / "targets"


@dataclass(frozen=True)
class Target:
    """One MCU core under QEMU: how to build its firmware and how to run it.

    Attributes:
        name: its name in results and on the command line.
        folder: the folder of its startup code under ``targets/``.
        compiler: the C compiler; ``size`` and ``nm`` are found beside it (same prefix).
        flags: compiler flags of every source (architecture, ABI, sections).
        link_flags: flags of the final link (C library, linker script).
        qemu: the emulator and its machine options, before ``-icount`` and semihosting.
        program_name_arg: whether the semihosting command line starts with the program's name
            (newlib's rdimon takes argv[0] from it; picolibc supplies its own).
        packages: the Debian packages that provide the compiler and the emulator.
    """

    name: str
    folder: str
    compiler: str
    flags: tuple[str, ...]
    link_flags: tuple[str, ...]
    qemu: tuple[str, ...]
    program_name_arg: bool
    packages: str

    def tool(self, name: str) -> str:
        """The path of one of the target's tools (``"size"``, ``"nm"``, the compiler, QEMU).

        Raises:
            FileNotFoundError: if it is not installed (the message names the packages).
        """
        tool = self.compiler.removesuffix("gcc") + name if name in ("size", "nm") else name
        path = shutil.which(tool)
        if path is None:
            raise FileNotFoundError(f"{tool} is not installed; `make test` installs {self.packages} with apt-get.")
        return path

    def available(self) -> bool:
        """Whether the compiler and the emulator are installed."""
        return all(shutil.which(t) for t in (self.compiler, self.qemu[0]))


CORTEX_M4 = Target(
    name="cortex_m4", folder="cortex_m4", compiler="arm-none-eabi-gcc",
    flags=("-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard", "-mfp16-format=ieee",
           "-ffunction-sections", "-fdata-sections"),
    link_flags=("--specs=rdimon.specs", "-T", str(TARGETS_DIR / "cortex_m4" / "mps2_an386.ld"), "-Wl,--gc-sections",
                "-lm"),
    qemu=("qemu-system-arm", "-M", "mps2-an386", "-cpu", "cortex-m4"), program_name_arg=True,
    packages="gcc-arm-none-eabi, libnewlib-arm-none-eabi and qemu-system-arm")
RV32 = Target(
    name="rv32", folder="rv32", compiler="riscv64-unknown-elf-gcc",
    flags=("-march=rv32imafc", "-mabi=ilp32f", "--specs=picolibc.specs", "-ffunction-sections", "-fdata-sections"),
    link_flags=("--oslib=semihost", "--crt0=semihost", "-T", str(TARGETS_DIR / "rv32" / "virt.ld"),
                "-Wl,--gc-sections", "-lm"),
    qemu=("qemu-system-riscv32", "-M", "virt", "-cpu", "rv32", "-bios", "none"), program_name_arg=False,
    packages="gcc-riscv64-unknown-elf, picolibc-riscv64-unknown-elf and qemu-system-misc")
RV32IMAC = replace(RV32, name="rv32imac", flags=("-march=rv32imac", "-mabi=ilp32", *RV32.flags[2:]))
#: The targets by name.
TARGETS = {t.name: t for t in (CORTEX_M4, RV32, RV32IMAC)}


def build_firmware(gen: str | Path, opt: str = "-O2", target: Target = CORTEX_M4) -> Path:
    """Build ``app.elf`` for ``target`` against the generated headers in ``gen`` (cached).

    Args:
        gen: folder with ``tu_config.h``, ``tu_model_data.h`` and ``tu_plant_code.h``.
        opt: optimization flag.
        target: the core to build for.

    Returns:
        The path of the ELF file.

    Raises:
        FileNotFoundError: if the target's compiler is not installed.
        microcontroller.build.BuildError: if the compiler fails (warnings are errors).
    """
    target.tool(target.compiler)
    return build(gen, "program", [*SUPPORT, TARGETS_DIR / "main.c", TARGETS_DIR / target.folder / "startup.c"],
                 compiler=target.compiler, opt=opt, extra_flags=[*target.flags, "-I", str(TARGETS_DIR)],
                 link_flags=list(target.link_flags))


@dataclass
class FirmwareRun:
    """The outcome of `run_firmware`: exit status (124: the time limit), output, wall time."""

    returncode: int
    output: str
    wall_s: float


def run_firmware(elf: Path, args: list[str], cwd: str | Path, timeout_s: int = 300, icount: bool = False,
                 target: Target = CORTEX_M4, check: bool = False) -> FirmwareRun:
    """Run the firmware under QEMU with semihosting.

    Args:
        elf: the firmware of `build_firmware` for ``target``.
        args: the firmware's arguments (after ``app.elf``; paths relative to ``cwd``).
        cwd: the working directory of the firmware's files.
        timeout_s: wall-clock seconds before the emulation is cut (status 124).
        icount: count one instruction per ns of virtual time (``-icount shift=0``) and tell the
            firmware so with ``--icount``: only then does it print instruction counts.
        target: the core ``elf`` was built for.
        check: raise on an exit status other than 0 (as `subprocess.run` does with ``check``).

    Returns:
        The exit status (0 done, 1 the trainer failed, 2 a bad file or usage, 3 a fault, 124
        the time limit), stdout and stderr together, and the wall time in seconds.

    Raises:
        RuntimeError: with ``check``, for an exit status other than 0 (the firmware's output in the message).
    """
    import time

    qemu = target.tool(target.qemu[0])
    argv = ["--icount", *args] if icount else list(args)
    semi = ",".join(["enable=on", "target=native", *(["arg=app.elf"] if target.program_name_arg else []),
                     *(f"arg={a.replace(',', ',,')}" for a in argv)])
    cmd = ["timeout", str(timeout_s), qemu, *target.qemu[1:], *(["-icount", "shift=0,align=off,sleep=off"] if icount
                                                                 else []),
           "-nographic", "-monitor", "none", "-serial", "none", "-semihosting-config", semi, "-kernel", str(elf)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    run = FirmwareRun(proc.returncode, proc.stdout + proc.stderr, time.perf_counter() - t0)
    if check and run.returncode != 0:
        raise RuntimeError(f"the firmware's `{' '.join(args)}` on {target.name} exited with status {run.returncode}:"
                           f"\n{run.output}")
    return run


def c_hat_trace(output: str) -> list[tuple[float, float]]:
    """The damping estimate over stream time that the firmware's ``simulate RESULT SECONDS DAMPING AT EVERY``
    prints every EVERY updates: ``[(t in s, c_hat), ...]`` in the order printed, from its output."""
    return [(float(t), float(c)) for t, c in re.findall(r"\(t ([\d.]+) s\).*?c_hat ([\d.-]+)", output)]


def sizes(elf: Path, target: Target = CORTEX_M4) -> dict[str, int]:
    """Section sizes and the size of the trainer instance of a firmware, bytes.

    Returns:
        ``text`` (code and constants, with picolibc's ``.init``; ``text + data`` is the flash),
        ``data`` and ``bss`` (with the small-data sections ``.sdata`` and ``.sbss`` of RISC-V;
        ``data + bss`` is the static RAM, the stack not counted) and ``trainer`` (the
        ``tu_trainer`` instance).
    """
    out = subprocess.run([target.tool("size"), "-A", str(elf)], capture_output=True, text=True, check=True).stdout
    sec = {m.group(1): int(m.group(2)) for m in re.finditer(r"^\.(\w+)\s+(\d+)", out, re.M)}
    nm = subprocess.run([target.tool("nm"), "-S", str(elf)], capture_output=True, text=True, check=True).stdout
    trainer = next(int(m.group(1), 16) for m in re.finditer(r"^[0-9a-f]+ ([0-9a-f]+) [bBdD] trainer$", nm, re.M))
    return {"text": sec.get("text", 0) + sec.get("init", 0), "data": sec.get("data", 0) + sec.get("sdata", 0),
            "bss": sec.get("bss", 0) + sec.get("sbss", 0), "trainer": trainer}


def export_result(spec, result_file: str | Path, folder: str | Path | None = None, system=None,
                  states: dict | None = None, extra: dict | None = None, target: Target = CORTEX_M4, data=None
                  ) -> tuple[dict, "HybridField"]:
    """Score the weights a firmware wrote, and (with ``folder``) export them like every trainer.

    Args:
        spec: the settings the firmware was generated from.
        result_file: the firmware's result file (`microcontroller.files.read_result`).
        folder: where to write ``field.pt``, ``field.json`` and ``metrics.json`` (None: nowhere).
        system: the plant to score against (default ``spec.system``; e.g. a changed plant).
        states: ``{"grid", "visited"}`` states of the metrics (default: the plant's grid and its
            visited part).
        extra: further entries for ``metrics.json``.
        target: the core that trained them (names the run: ``jet_matching_c_<name>``).
        data: the data module of recorded logs the stream came from (a
            `torch_ude.training.RecordedDataModule`): the field is then scored by its ``evaluate``
            (one-step and open-loop prediction errors on its validation logs, `torch_ude.prediction`)
            instead of the field error of a simulated plant, and its settings go into ``field.json``,
            so ``torch-ude score FOLDER --files LOG`` reads logs with the run's columns.

    With ``spec.envelope`` the firmware's span (`microcontroller.files.read_span`) becomes the field's trust
    envelope as the Python trainer builds it (`torch_ude.envelope.install_span`, ``spec.envelope_margin``) before
    scoring and export, and ``metrics["envelope"]`` describes it. With trained physical parameters ``metrics`` (so
    ``metrics.json`` and ``field.json``) lists them with the firmware's standard errors (``physical_parameters``) and
    its end-of-run refit (``physics_refit``, None without one), as a Python run does (`microcontroller.files`).

    Returns:
        The metrics (e_field, e_field_visited, c_hat, or a recorded log's prediction errors; the
        firmware's report) and the field (float64, EMA weights).

    Raises:
        ValueError: for ``spec.envelope`` and a result without a span, or a span of no jet.
    """
    import torch

    from torch_ude.envelope import install_span
    from torch_ude.metrics import evaluate_field
    from torch_ude.training.outputs import RunOutputs

    from .ctrainer import load_weights, physical_parameters, report_dict, report_type
    from .files import read_physical, read_result, read_span

    system = system or spec.system
    ema, _, report_bytes = read_result(result_file)
    report = report_dict(report_type(spec.field.n_states, spec.field.n_inputs).from_buffer_copy(report_bytes))
    field = load_weights(copy.deepcopy(spec.field), ema, report["in_scale"], report["out_scale"])
    envelope = None
    if spec.envelope:
        span = read_span(result_file)
        if span is None:
            raise ValueError(f"{result_file} holds no envelope span, but its settings ask for an envelope; build the "
                             f"firmware from headers generated with these settings.")
        envelope = install_span([field], system, tuple(torch.from_numpy(v).double() for v in span),
                                spec.envelope_margin)
    with torch.no_grad():
        if data is not None:
            metrics = data.evaluate(field)
        else:
            if states is None:
                grid = system.evaluation_grid()
                states = {"grid": grid, "visited": grid[system.visited_region(grid)]}
            metrics = evaluate_field(field.evaluate, system, spec.case, states)
    cal = report["calibration"] or {}
    metrics.update({"sigma_hat": cal.get("sigma"), "m": cal.get("m"), "lambda2": cal.get("lambda2"),
                    "reject_rate": None, "updates": report["updates"], "wall_s": None, "counters": report["counters"],
                    "report": report, "envelope": envelope, **(extra or {})})
    physical = read_physical(result_file)
    if spec.field.physical:  # the refitted EMA theta (weights above) with the device's standard errors and refit
        metrics.update({"physical_parameters": physical_parameters(field, None if physical is None else
                                                                   physical["standard_errors"]),
                        "physics_refit": None if physical is None else physical["refit"]})
    if folder is not None:
        config = {"settings": spec.settings(), **({"data": data.config()} if data is not None else {})}
        outputs = RunOutputs(folder, f"jet_matching_c_{target.name}", system, spec.case, spec.seed, config)
        outputs.start()
        outputs.finish(field, metrics)
    return metrics, field


def main(argv: list[str] | None = None) -> int:
    """Command line: build the firmware for generated headers and run it under QEMU.

    ``python -m microcontroller.target [--target rv32] --gen DIR simulate result.bin 60`` (any firmware
    arguments after the options: ``replay STREAM RESULT``, ``measure STREAM`` with ``--icount``,
    ``simulate RESULT SECONDS [DAMPING AT [EVERY]]``). ``--stream FILE --config CONFIG`` writes
    the stream file of a config's simulated plant instead (for ``replay``). Paths are relative
    to ``--cwd`` (default: here). Returns the firmware's exit status.
    """
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m microcontroller.target", description=main.__doc__.split("\n")[0])
    parser.add_argument("--gen", help="folder of tu_config.h and tu_model_data.h (python -m microcontroller.generate)")
    parser.add_argument("--target", choices=sorted(TARGETS), default=CORTEX_M4.name,
                        help="the core: cortex_m4 (mps2-an386), rv32 (rv32imafc on virt) or rv32imac (no FPU)")
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
    target = TARGETS[args.target]
    run = run_firmware(build_firmware(args.gen, target=target), firmware_args, cwd=args.cwd, timeout_s=args.timeout,
                       icount=args.icount, target=target)
    sys.stdout.write(run.output)
    return run.returncode


def measure_instructions(elf: Path, folder: Path, target: Target = CORTEX_M4, stream: str = "stream-seed0.bin",
                         updates: int | None = None) -> dict:
    """Instructions per update and per chunk (QEMU icount), and the projected time per update.

    Args:
        elf: the firmware for ``target``.
        folder: the working directory of the firmware, holding ``stream``.
        target: the core.
        stream: the stream file the firmware drives the trainer with.
        updates: the run's length in updates (None: the config's ``max_steps``).

    Returns:
        ``instructions_per_update`` (the early mean, updates 51-70), ``instructions_per_update_steady``
        (the median over the steady-state window ``steady_window``, the run's last updates),
        ``instructions_per_chunk`` (one training tick of stream work) and the time per update and per
        chunk they project at `MHZ` for each cycles-per-instruction figure of `CPI` (ms; ``_steady`` for the
        steady-state update).

    Raises:
        RuntimeError: if the measure run fails (its output in the message).
    """
    args = ["measure", stream, *([] if updates is None else [str(updates)])]
    run = run_firmware(elf, args, cwd=folder, timeout_s=600, icount=True, target=target)
    m = re.search(r"measure: (\d+) instructions per update, (\d+) per chunk.*steady state: (\d+) instructions per "
                  r"update \(median of updates (\d+)-(\d+)\)", run.output)
    if run.returncode != 0 or m is None:
        raise RuntimeError(f"the measure run failed:\n{run.output}")
    per_update, per_chunk, steady, first, last = map(int, m.groups())
    project = lambda count: {str(c): count * c / (MHZ * 1e3) for c in CPI}  # noqa: E731
    return {"instructions_per_update": per_update, "instructions_per_update_steady": steady,
            "steady_window": [first, last], "instructions_per_chunk": per_chunk,
            "projected_ms_per_update": project(per_update), "projected_ms_per_update_steady": project(steady),
            "projected_ms_per_chunk": project(per_chunk)}


if __name__ == "__main__":
    import sys

    sys.exit(main())


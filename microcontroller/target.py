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
from .generate import DeviceSpec, write_headers
from .build import BUILD_ROOT

__all__ = ["ARM_FLAGS", "build_firmware", "run_firmware", "FirmwareRun", "sizes", "TARGET"]

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


def build_firmware(spec: DeviceSpec, opt: str = "-O2") -> Path:
    """Generate the headers for ``spec`` and build ``app.elf`` for the mps2-an386 (cached)."""
    _need(ARM_CC)
    gen = BUILD_ROOT / f"gen-{spec.config_hash()}"
    write_headers(spec, gen)
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
    to ``cwd``); ``icount`` counts one instruction per ns of virtual time."""
    import time

    _need(QEMU)
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

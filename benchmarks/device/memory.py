"""Static memory of the C trainer, array by array (``sizeof`` in C), against the paper.

``python -m benchmarks.device.memory`` generates and builds the trainer for the single pendulum at
B = 2048 and B = 4096 and the double pendulum at B = 2048 (ring for m <= 50 in each), and the
single pendulum without the second-order term (a smaller reservoir slot), and the single pendulum at
B = 2048 and 4096 with the reservoir stored in float16 (``model.stream.reservoir_precision``, the
device config's default; the other cases store float32, the paper's layout), prints the
table of every member of ``tu_trainer`` and, where the Arm toolchain is installed, the
``.data + .bss`` of the Cortex-M4F firmware; writes ``results/c_memory/c_memory.json``.
"""
from __future__ import annotations

import argparse
import shutil

from microcontroller.generate import headers_for, spec_from_config
from microcontroller.memory import member_sizes

from benchmarks.common import C_CASES as CASES, save

PAPER = {"single pendulum, B = 2048": 61_300, "single pendulum, B = 4096": 108_100,
         "single pendulum, B = 2048, lambda2 = 0": 61_300, "single pendulum, B = 4096, lambda2 = 0": 108_100}
ROWS = ("reservoir", "calibration_record", "weights", "gradient", "adam_exp_avg", "adam_exp_avg_sq", "ema", "ring",
        "gate_history", "calibration", "counters", "prng", "other", "total")


def measure() -> dict:
    """Member sizes of each case (host build; the Cortex-M4F instance where arm-none-eabi-gcc exists)."""
    out = {}
    for name, (config, overrides) in CASES.items():
        spec = spec_from_config(config, overrides)
        sizes = member_sizes(headers_for(spec))
        if shutil.which("arm-none-eabi-gcc"):
            from microcontroller.target import build_firmware, sizes as elf_sizes

            sizes["cortex_m4"] = elf_sizes(build_firmware(headers_for(spec)))
        out[name] = sizes
    return out


def table(results: dict) -> str:
    """The markdown table of `measure` (bytes), with the paper's totals."""
    names = list(results)
    lines = ["| array | " + " | ".join(names) + " |", "| --- |" + " ---: |" * len(names)]
    labels = {"calibration_record": "calibration record (in the reservoir's memory: a union)"}
    for row in ROWS:
        lines.append(f"| {labels.get(row, row.replace('_', ' '))} | "
                     + " | ".join(f"{results[n][row]:,}" for n in names) + " |")
    lines.append("| paper (kB as printed) | " + " | ".join(
        f"{PAPER[n]:,}" if n in PAPER else "not reported" for n in names) + " |")
    if all("cortex_m4" in results[n] for n in names):
        lines.append("| Cortex-M4F firmware: tu_trainer instance | " + " | ".join(
            f"{results[n]['cortex_m4']['trainer']:,}" for n in names) + " |")
        lines.append("| Cortex-M4F firmware: .data + .bss (with newlib) | " + " | ".join(
            f"{results[n]['cortex_m4']['data'] + results[n]['cortex_m4']['bss']:,}" for n in names) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Command line: see the module doc."""
    argparse.ArgumentParser(prog="python -m benchmarks.device.memory",
                            description=__doc__.split("\n\n")[0]).parse_args(argv)
    results = measure()
    print(table(results))
    print(f"saved in {save('c_memory', results)}")


if __name__ == "__main__":
    main()

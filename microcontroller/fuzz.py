"""Fuzz the C trainer's stream API with libFuzzer (clang): arbitrary bytes as samples and ticks.

``python -m microcontroller.fuzz --runs 1000000`` builds ``tests/fuzz_stream.c`` against a
small generated configuration (calibration of 60 samples, a reservoir of 16 jets, minibatch
4, an update every 2 ticks) with ASan and UBSan and runs it from a seed corpus of clean
streams that already reach training. A finding (crash, sanitizer
report, non-finite weight, inconsistent counters) makes the run fail.
"""
from __future__ import annotations

import argparse
import json
import struct
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .build import ROOT, build
from .generate import headers_for, spec_from_config

__all__ = ["FUZZ_CONFIG", "build_fuzzer", "fuzz", "main"]

FUZZ_CONFIG = ("configs/pendulum_case_a.yaml", [
    "--model.stream.calibration_s", "0.06", "--model.stream.m", "2", "--model.stream.m_max", "4",
    "--model.stream.capacity", "16", "--model.batch_size", "4", "--model.stream.gate_history", "5",
    "--data.train_rate", "500", "--trainer.max_steps", "50"])
CLANG = "clang-14"


def build_fuzzer(compiler: str = CLANG) -> Path:
    """Generate the small configuration and build the libFuzzer binary (cached)."""
    if shutil.which(compiler) is None:
        raise FileNotFoundError(f"{compiler} is not installed; `make test` installs clang-14 and libclang-rt-14-dev.")
    config, overrides = FUZZ_CONFIG
    spec = spec_from_config(ROOT.parent / config, overrides)
    return build(headers_for(spec), "program", [ROOT / "tests" / "fuzz_stream.c"], compiler=compiler, opt="-O1",
                 extra_flags=["-g", "-fsanitize=fuzzer,address,undefined", "-fno-sanitize-recover=all"])


def _seed_corpus(folder: Path, n_channels: int = 2) -> None:
    """Inputs that already reach training: a clean pendulum-like stream with update requests."""
    import math

    for k, length in enumerate((150, 250)):
        out = bytearray()
        for i in range(length):
            op = 0xE1 if i % 7 == 0 else 0x01  # next tick; every 7th sample also asks for an update
            values = [math.sin(0.05 * i + c) + 0.001 * ((i * 7919 + c) % 13) for c in range(n_channels)]
            out += bytes([op]) + struct.pack(f"<{n_channels}f", *values)
        (folder / f"seed{k}").write_bytes(bytes(out))


def fuzz(runs: int, seconds: int | None = None, seed: int = 1) -> dict:
    """Run the fuzzer for ``runs`` executions (or ``seconds``); returns its statistics.

    Raises:
        RuntimeError: on a finding (the fuzzer's report is in the message).
    """
    exe = build_fuzzer()
    with tempfile.TemporaryDirectory() as corpus:
        _seed_corpus(Path(corpus))
        cmd = [str(exe), corpus, f"-runs={runs}", f"-seed={seed}", "-max_len=4096", "-print_final_stats=1"]
        if seconds:
            cmd.append(f"-max_total_time={seconds}")
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise RuntimeError(f"the fuzzer found a failure ({' '.join(cmd)}):\n{log[-4000:]}")
    done = re.search(r"stat::number_of_executed_units:\s*(\d+)", log)
    cov = re.findall(r"cov: (\d+)", log)
    return {"executions": int(done.group(1)) if done else None, "coverage_edges": int(cov[-1]) if cov else None,
            "wall_s": round(wall, 1), "command": " ".join(cmd[:1] + ["CORPUS", *cmd[2:]])}


def main(argv: list[str] | None = None) -> int:
    """Command line: see the module doc."""
    parser = argparse.ArgumentParser(prog="python -m microcontroller.fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1_000_000, help="executions (default 10^6)")
    parser.add_argument("--seconds", type=int, default=None, help="stop after this many seconds")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    stats = fuzz(args.runs, args.seconds, args.seed)
    print(json.dumps(stats, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

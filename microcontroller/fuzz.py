"""Fuzz the C trainer's whole public API with libFuzzer (clang), and measure what a corpus covers.

``tests/fuzz_trainer.c`` reads arbitrary bytes as a program of API calls (push, push_chunk
with its due updates, step, steps, restore from changed bytes, ready / report / weights,
init) on a stream of arbitrary values, ticks and segments. It is built against a small
generated configuration (`FUZZ_CONFIG`: calibration of 60 samples, the adaptive tap spacing
searched up to m = 4, a reservoir of 16 jets, minibatch 4, an update every 2 ticks) with ASan
and UBSan, with the reservoir in float32 or (``precision="float16"``) in binary16.
A finding (crash, sanitizer report, a status or due count the API does not
promise, a non-finite weight, inconsistent counters) makes a run fail.

Every run starts from the corpus kept in the repository, ``tests/fuzz_corpus/`` (`CORPUS`;
read only: new inputs go to a temporary folder unless `fuzz` is given one), which
`seed_inputs` started and the long run of ``python -m benchmarks.device.fuzz`` extends.
`coverage` runs a corpus once through a build with clang's source coverage and reports, per
file of the library, the share of lines executed (llvm-cov).
"""
from __future__ import annotations

import json
import math
import re
import shutil
import struct
import subprocess
import tempfile
import time
from pathlib import Path

from .build import ROOT, build
from .generate import headers_for, spec_from_config

__all__ = ["FUZZ_CONFIG", "CORPUS", "build_fuzzer", "seed_inputs", "write_seeds", "fuzz", "coverage", "minimize"]

FUZZ_CONFIG = ("configs/pendulum_case_a.yaml", [
    "--model.stream.tap_average", "false", "--model.stream.calibration_s", "0.06", "--model.stream.m", "null", "--model.stream.m_max", "4",
    "--model.stream.capacity", "16", "--model.batch_size", "4", "--model.stream.gate_history", "5",
    "--data.train_rate", "500", "--trainer.max_steps", "50"])
CORPUS = ROOT / "tests" / "fuzz_corpus"
TARGET = ROOT / "tests" / "fuzz_trainer.c"
CLANG, PROFDATA, COV = "clang-14", "llvm-profdata-14", "llvm-cov-14"
MAX_LEN = 4096


def _need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise FileNotFoundError(f"{tool} is not installed; `make test` installs clang-14 and libclang-rt-14-dev "
                                f"(llvm-14 brings {PROFDATA} and {COV}).")
    return path


def build_fuzzer(coverage_build: bool = False, precision: str = "float32") -> Path:
    """Generate `FUZZ_CONFIG` and build the libFuzzer binary (cached): with ASan and UBSan, or
    (``coverage_build``) with clang's source coverage instead; ``precision`` is the reservoir's storage
    (``model.stream.reservoir_precision``: ``"float32"`` or ``"float16"``)."""
    _need(CLANG)
    config, overrides = FUZZ_CONFIG
    spec = spec_from_config(ROOT.parent / config, [*overrides, "--model.stream.reservoir_precision", precision])
    flags = ["-g", "-fsanitize=fuzzer"]
    flags += ["-fprofile-instr-generate", "-fcoverage-mapping"] if coverage_build else \
        ["-fsanitize=address,undefined", "-fno-sanitize-recover=all"]
    return build(headers_for(spec), "program", [TARGET], compiler=CLANG, opt="-O0" if coverage_build else "-O1",
                 extra_flags=flags)


# ----- seed inputs (the format of tests/fuzz_trainer.c) -------------------------------------------
def _record(values, ctrl: int = 1) -> bytes:
    """A sample record: control byte (bit 7 clear: int16 values of 1/4096) and the values."""
    if ctrl & 0x80:
        return bytes([ctrl]) + struct.pack(f"<{len(values)}f", *values)
    return bytes([ctrl]) + struct.pack(f"<{len(values)}h", *(max(-32768, min(32767, round(v * 4096))) for v in values))


def _signal(i: int, hz: float, n: int = 2) -> list[float]:
    """A pendulum-like pair (angle, rate) at ``hz`` with a little deterministic noise, at 1 kHz."""
    w = 2 * math.pi * hz
    noise = [0.002 * (((i * 7919 + 104729 * c) % 13) - 6) / 6 for c in range(n)]
    return [0.8 * math.sin(w * i / 1000) + noise[0], 0.8 * w / 20 * math.cos(w * i / 1000) + noise[1]][:n]


def _stream(samples: int, hz: float, every: int = 25, ctrl=lambda i: 1, values=lambda i: None) -> bytes:
    """Chunks of two samples (op 1 with count 2), an update request (op 3) and a query (op 6) now
    and then; ``ctrl(i)`` is sample i's control byte, ``values(i)`` its values (None: the signal)."""
    out = bytearray([0x0E])  # the calls the API refuses, and a query
    for i in range(0, samples, 2):
        out += bytes([0x09]) + b"".join(_record(values(j) or _signal(j, hz), ctrl(j)) for j in (i, i + 1))
        if i % every == 0:
            out += bytes([0x03, 0x06])
    return bytes(out)


def seed_inputs() -> dict[str, bytes]:
    """Hand-written inputs that reach each stage: clean streams at three rates (the adaptive m
    search lands on different spacings), faults, restores, calibration failures, a far tick."""
    faults = {37: 0x02 | (3 << 2), 61: 0x03, 89: 0x41, 120: 0x21, 150: 0x80}
    restore = bytes([0x04, 0]) + bytes([0x04, 1, 0x10, 0x00, 0x01]) + bytes([0x04, 2, 0x00, 0x04, 0xFF, 0x80, 0x00, 0x7F])
    steps = bytes([0x02 | (12 << 3), 0x02 | (3 << 3)])  # steps(4), steps(-5)
    zeros = b"".join(bytes([0x00]) + _record([0.0, 0.0]) for _ in range(80))
    nans = b"".join(bytes([0x00]) + _record([float("nan"), 1.0], 0x81) for _ in range(80))
    far = bytes([0x05]) + struct.pack("<q", 10**12) + _record([0.1, 0.2])
    bad = {200: 0x81, 230: 0x02 | (2 << 2), 260: 0x03 | (7 << 2)}  # after calibration: raw, a bridged and a long gap
    bad_values = lambda i: [float("nan"), 0.0] if i == 200 else ([3e38, -3e38] if i == 201 else None)  # noqa: E731
    return {
        "stream_5hz": _stream(400, 5.0),
        "stream_30hz": _stream(400, 30.0) + steps,
        "stream_80hz": _stream(300, 80.0),
        "faults": _stream(400, 20.0, ctrl=lambda i: faults.get(i, 1)),
        "restore": _stream(300, 20.0) + restore + _stream(60, 20.0),
        "calibration_fails": zeros + bytes([0x07]) + nans + bytes([0x06]),
        "far_tick": _stream(300, 20.0) + far + steps + bytes([0x06]),
        "bad_values": _stream(400, 20.0, ctrl=lambda i: bad.get(i, 0x81 if i == 201 else 1), values=bad_values)
        + bytes([0x0E]),
    }


# ----- runs ---------------------------------------------------------------------------------------
def _stats(log: str) -> dict:
    done = re.search(r"stat::number_of_executed_units:\s*(\d+)", log)
    cov = re.findall(r"cov: (\d+)", log)
    return {"executions": int(done.group(1)) if done else None, "coverage_edges": int(cov[-1]) if cov else None}


def fuzz(runs: int, seconds: int | None = None, seed: int = 1, out: str | Path | None = None,
         precision: str = "float32") -> dict:
    """Run the fuzzer for ``runs`` executions (or ``seconds``) from `CORPUS`; returns its statistics.

    Args:
        runs: executions.
        seconds: stop after this many seconds instead (None: no limit).
        seed: libFuzzer's seed.
        out: folder that receives the new inputs (None: a temporary folder, discarded).
        precision: the reservoir's storage of the build (`build_fuzzer`).

    Raises:
        RuntimeError: on a finding (the fuzzer's report is in the message).
    """
    exe = build_fuzzer(precision=precision)
    with tempfile.TemporaryDirectory() as tmp:
        new = Path(out) if out is not None else Path(tmp)
        new.mkdir(parents=True, exist_ok=True)
        cmd = [str(exe), str(new), str(CORPUS), f"-runs={runs}", f"-seed={seed}", f"-max_len={MAX_LEN}",
               "-print_final_stats=1", f"-artifact_prefix={tmp}/"]
        if seconds:
            cmd.append(f"-max_total_time={seconds}")
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise RuntimeError(f"the fuzzer found a failure ({' '.join(cmd)}):\n{log[-4000:]}")
    return {**_stats(log), "wall_s": round(wall, 1), "corpus_inputs": len(list(CORPUS.iterdir())),
            "command": " ".join([exe.name, "NEW", "microcontroller/tests/fuzz_corpus", *cmd[3:-1]])}


def minimize(sources: list[Path], out: Path) -> int:
    """Merge the inputs of ``sources`` into ``out`` keeping only those that add a coverage edge
    (libFuzzer's ``-merge=1`` with hit counts and comparison features off, so the kept corpus
    stays small); returns the number of inputs in ``out``."""
    exe = build_fuzzer()
    out.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([str(exe), "-merge=1", "-use_counters=0", "-use_cmp=0", f"-max_len={MAX_LEN}", str(out),
                           *map(str, sources)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"the corpus merge failed:\n{(proc.stdout + proc.stderr)[-4000:]}")
    return len(list(out.iterdir()))


def coverage(corpora: list[Path], files: tuple[str, ...] = ("tu_trainer.c", "tu_calibration.c")) -> dict:
    """Lines of the library's ``files`` that running every input of ``corpora`` once executes.

    Returns:
        ``{file: {"covered": lines, "count": lines, "percent": %}}`` from ``llvm-cov export``,
        and ``"uncovered": {file: [line numbers]}``.
    """
    exe = build_fuzzer(coverage_build=True)
    with tempfile.TemporaryDirectory() as tmp:
        raw, data = Path(tmp) / "run.profraw", Path(tmp) / "run.profdata"
        proc = subprocess.run([str(exe), "-runs=0", f"-max_len={MAX_LEN}", *map(str, corpora)], capture_output=True,
                              text=True, env={"LLVM_PROFILE_FILE": str(raw), "PATH": "/usr/bin:/bin"})
        if proc.returncode != 0 or not raw.is_file():
            raise RuntimeError(f"the coverage run failed:\n{(proc.stdout + proc.stderr)[-4000:]}")
        subprocess.run([_need(PROFDATA), "merge", "-sparse", str(raw), "-o", str(data)], check=True)
        export = json.loads(subprocess.run([_need(COV), "export", "-summary-only", str(exe), f"-instr-profile={data}"],
                                           capture_output=True, text=True, check=True).stdout)
        sources = [str(ROOT / "src" / name) for name in files]
        shown = subprocess.run([_need(COV), "show", str(exe), f"-instr-profile={data}", "-show-line-counts",
                                *sources], capture_output=True, text=True, check=True).stdout
    out: dict = {"uncovered": _uncovered_lines(shown)}
    for entry in export["data"][0]["files"]:
        path = Path(entry["filename"])
        if path.name in files and path.parent.name == "src":
            lines = entry["summary"]["lines"]
            out[path.name] = {"covered": lines["covered"], "count": lines["count"],
                              "percent": round(lines["percent"], 2)}
    return out


def _uncovered_lines(shown: str) -> dict[str, list[int]]:
    """The lines ``llvm-cov show`` counts zero times, per file (its text: a file's path on a line
    of its own ending in a colon, then ``line|count|source``)."""
    out: dict[str, list[int]] = {}
    current = None
    for text in shown.splitlines():
        if text.endswith(".c:") and "|" not in text:
            current = out.setdefault(Path(text[:-1]).name, [])
            continue
        parts = text.split("|", 2)
        if current is not None and len(parts) == 3 and parts[1].strip() == "0":
            current.append(int(parts[0]))
    return out


def write_seeds(folder: Path = CORPUS) -> None:
    """Write `seed_inputs` into ``folder`` (the start of `CORPUS`)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in seed_inputs().items():
        (folder / f"seed-{name}").write_bytes(data)

"""The C library's binary16 conversions (``include/tu_half.h``, ``src/tu_half.c``) against numpy's and
torch's float16: half -> float over all 65,536 patterns, float -> half over every tie between two
halves and its neighbours, the subnormal range, the overflow threshold, NaN, infinities and a
million random float32 patterns (built with the sanitizers)."""
import subprocess

import numpy as np
import torch

from microcontroller.build import ROOT, SANITIZERS, WARNINGS

PROBE = ROOT / "tests" / "half_probe.c"


def _probe(tmp_path, floats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    exe = tmp_path / "half_probe"
    subprocess.run(["gcc", *WARNINGS, "-O2", *SANITIZERS, "-I", str(ROOT / "include"), str(PROBE),
                    str(ROOT / "src" / "tu_half.c"), "-o", str(exe)], check=True, capture_output=True, text=True)
    floats = np.ascontiguousarray(floats, dtype="<f4")
    floats.tofile(tmp_path / "in.bin")
    proc = subprocess.run([str(exe), str(tmp_path / "in.bin"), str(tmp_path / "out.bin")], capture_output=True,
                          text=True)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    raw = (tmp_path / "out.bin").read_bytes()
    return np.frombuffer(raw[: 4 * 65536], dtype="<u4"), np.frombuffer(raw[4 * 65536:], dtype="<u2")


def _floats() -> np.ndarray:
    halves = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    finite = np.sort(halves[np.isfinite(halves)].astype(np.float32))
    finite = np.unique(finite)
    ties = (finite[:-1].astype(np.float64) + finite[1:]) / 2  # exact in float32: 11 of 24 bits
    ties = ties.astype(np.float32)
    assert np.array_equal(ties.astype(np.float64), (finite[:-1].astype(np.float64) + finite[1:]) / 2)
    near = np.concatenate([np.nextafter(ties, np.float32(np.inf)), np.nextafter(ties, np.float32(-np.inf))])
    edges = np.array([65504, 65519.996, 65520, 65520.004, 65536, 1e6, 3.4e38, 2 ** -24, 2 ** -25,
                      np.nextafter(np.float32(2 ** -25), np.float32(1)), 2 ** -26, 2 ** -14, 1e-45, 1e-40, 0.0],
                     dtype=np.float32)
    special = np.array([np.inf, -np.inf, np.nan, -np.nan], dtype=np.float32)
    payloads = np.array([0x7FC00001, 0x7F800001, 0xFFA00000, 0x7FFFFFFF], dtype=np.uint32).view(np.float32)
    rng = np.random.default_rng(0)
    random = rng.integers(0, 1 << 32, 1_000_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    small = rng.uniform(-2.0 ** -13, 2.0 ** -13, 100_000).astype(np.float32)  # the subnormal range and around it
    values = np.concatenate([finite, ties, near, edges, special, payloads, random, small])
    return np.concatenate([values, -values])


def test_half_to_float_is_exact_for_all_65536_patterns(tmp_path):
    c, _ = _probe(tmp_path, np.zeros(0, dtype=np.float32))
    expect = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)
    nan = np.isnan(expect)
    assert np.array_equal(c[~nan], expect[~nan].view(np.uint32))
    # NaN: a NaN of the same sign and payload (the half's 10 bits, moved up 13)
    pattern = np.arange(1 << 16, dtype=np.uint32)[nan]
    assert np.array_equal(c[nan], (pattern & 0x8000) << 16 | 0x7F800000 | (pattern & 0x3FF) << 13)
    assert np.isnan(c[nan].view(np.float32)).all()


def test_float_to_half_rounds_to_nearest_even_as_numpy_and_torch_do(tmp_path):
    values = _floats()
    _, c = _probe(tmp_path, values)
    with np.errstate(over="ignore", invalid="ignore"):
        expect = values.astype(np.float16).view(np.uint16)
    torch_halves = torch.from_numpy(values).to(torch.float16).view(torch.int16).numpy().view(np.uint16)
    nan = np.isnan(values)
    assert np.array_equal(c[~nan], expect[~nan]) and np.array_equal(c[~nan], torch_halves[~nan])
    # NaN: a quiet binary16 NaN of the same sign
    assert ((c[nan] & 0x7E00) == 0x7E00).all()
    assert np.array_equal(c[nan] >> 15, (values[nan].view(np.uint32) >> 31).astype(np.uint16))
    # the checks reached every branch: ties both ways, subnormals, zero, overflow
    assert {0x7C00, 0xFC00, 0x0000, 0x8000, 0x0001, 0x0400, 0x7BFF} <= set(c.tolist())

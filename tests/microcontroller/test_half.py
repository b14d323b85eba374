"""The C library's binary16 conversions (``include/tu_half.h``, ``src/tu_half.c``) against numpy's and
torch's float16: half -> float over all 65,536 patterns, float -> half over every tie between two
halves and its neighbours, the subnormal range, the overflow threshold, NaN, infinities and a
million random float32 patterns (built with the sanitizers). On the emulated Cortex-M4F, where the
conversions are the FPU's (VCVTB), the same checks, and the FPU's results bit for bit against the
portable integer path's."""
import subprocess

import numpy as np
import torch

from microcontroller.build import ROOT, SANITIZERS, WARNINGS
from microcontroller.target import CORTEX_M4, TARGETS_DIR, run_firmware

PROBE = ROOT / "tests" / "half_probe.c"
SECTIONS = ("to_float", "from_float", "to_float_soft", "to_float_number", "from_float_soft")


def _sections(raw: bytes, count: int) -> dict[str, np.ndarray]:
    """The five sections of the probe's output (see half_probe.c)."""
    sizes = {"to_float": 4 * 65536, "from_float": 2 * count, "to_float_soft": 4 * 65536, "to_float_number": 4 * 65536,
             "from_float_soft": 2 * count}
    out, start = {}, 0
    for name in SECTIONS:
        out[name] = np.frombuffer(raw[start: start + sizes[name]], dtype="<u4" if "to_float" in name else "<u2")
        start += sizes[name]
    assert start == len(raw)
    return out


def _probe(tmp_path, floats: np.ndarray) -> dict[str, np.ndarray]:
    exe = tmp_path / "half_probe"
    subprocess.run(["gcc", *WARNINGS, "-O2", *SANITIZERS, "-I", str(ROOT / "include"), str(PROBE),
                    str(ROOT / "src" / "tu_half.c"), "-o", str(exe)], check=True, capture_output=True, text=True)
    floats = np.ascontiguousarray(floats, dtype="<f4")
    floats.tofile(tmp_path / "in.bin")
    proc = subprocess.run([str(exe), str(tmp_path / "in.bin"), str(tmp_path / "out.bin")], capture_output=True,
                          text=True)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout.startswith("hardware 0 "), proc.stdout  # the host build: the portable path only
    return _sections((tmp_path / "out.bin").read_bytes(), len(floats))


def _m4_probe(tmp_path, floats: np.ndarray) -> tuple[dict[str, np.ndarray], str, str]:
    """The probe built for the Cortex-M4F with the firmware's flags and run under QEMU: its sections,
    its stdout and the disassembly of its ELF."""
    elf = tmp_path / "half_probe.elf"
    subprocess.run([CORTEX_M4.tool(CORTEX_M4.compiler), *WARNINGS, "-O2", *CORTEX_M4.flags, "-I", str(ROOT / "include"),
                    "-I", str(TARGETS_DIR), str(PROBE), str(ROOT / "src" / "tu_half.c"),
                    str(TARGETS_DIR / CORTEX_M4.folder / "startup.c"), *CORTEX_M4.link_flags, "-o", str(elf)],
                   check=True, capture_output=True, text=True)
    np.ascontiguousarray(floats, dtype="<f4").tofile(tmp_path / "in.bin")
    run = run_firmware(elf, ["in.bin", "out.bin"], cwd=tmp_path, timeout_s=300)
    assert run.returncode == 0, run.output
    objdump = CORTEX_M4.tool(CORTEX_M4.compiler).removesuffix("gcc") + "objdump"
    listing = subprocess.run([objdump, "-d", str(elf)], check=True, capture_output=True, text=True).stdout
    return _sections((tmp_path / "out.bin").read_bytes(), len(floats)), run.output, listing


def _function(listing: str, name: str) -> str:
    """The disassembly of one function of an objdump listing."""
    start = listing.index(f"<{name}>:\n")
    end = listing.find("\n\n", start)
    return listing[start: end if end >= 0 else len(listing)]


def _floats(random_count: int = 1_000_000) -> np.ndarray:
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
    random = rng.integers(0, 1 << 32, random_count, dtype=np.uint64).astype(np.uint32).view(np.float32)
    small = rng.uniform(-2.0 ** -13, 2.0 ** -13, 100_000).astype(np.float32)  # the subnormal range and around it
    values = np.concatenate([finite, ties, near, edges, special, payloads, random, small])
    return np.concatenate([values, -values])


def _check_to_float(c: np.ndarray) -> None:
    """c: the float32 bit patterns of the halves 0 .. 65535, against numpy's."""
    expect = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)
    nan = np.isnan(expect)
    assert np.array_equal(c[~nan], expect[~nan].view(np.uint32))
    # NaN: a NaN of the same sign and payload (the half's 10 bits, moved up 13)
    pattern = np.arange(1 << 16, dtype=np.uint32)[nan]
    assert np.array_equal(c[nan], (pattern & 0x8000) << 16 | 0x7F800000 | (pattern & 0x3FF) << 13)
    assert np.isnan(c[nan].view(np.float32)).all()


def _check_from_float(values: np.ndarray, c: np.ndarray) -> None:
    """c: the halves of the float32 ``values``, against numpy's and torch's."""
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


def _check_paths_agree(out: dict[str, np.ndarray]) -> None:
    """The public conversions, bit for bit, as the portable path's (every half pattern and value);
    tu_half_to_float_number as well on every pattern but the NaNs, and NaN on those."""
    assert np.array_equal(out["to_float"], out["to_float_soft"])
    assert np.array_equal(out["from_float"], out["from_float_soft"])
    nan = np.isnan(np.arange(1 << 16, dtype=np.uint16).view(np.float16))
    assert np.array_equal(out["to_float_number"][~nan], out["to_float_soft"][~nan])
    assert np.isnan(out["to_float_number"][nan].view(np.float32)).all()


def test_half_to_float_is_exact_for_all_65536_patterns(tmp_path):
    out = _probe(tmp_path, np.zeros(0, dtype=np.float32))
    _check_to_float(out["to_float"])
    _check_paths_agree(out)


def test_float_to_half_rounds_to_nearest_even_as_numpy_and_torch_do(tmp_path):
    values = _floats()
    out = _probe(tmp_path, values)
    _check_from_float(values, out["from_float"])
    _check_paths_agree(out)


def test_the_cortex_m4f_fpu_conversions_match_the_portable_path_bit_for_bit(tmp_path):
    """Built as the firmware is (-mfp16-format=ieee), tu_half.h takes the FPU's VCVTB path; under QEMU
    with the FPSCR at its reset defaults (IEEE half format, round to nearest even, no flush to zero, no
    default NaN) it gives the portable path's bits for all 65,536 patterns and for the ties,
    subnormals, overflows, NaNs and random float32 patterns of `_floats`."""
    values = _floats()
    out, stdout, listing = _m4_probe(tmp_path, values)
    hardware, fpscr = stdout.split()[1], int(stdout.split()[3], 16)
    assert hardware == "1", stdout
    assert fpscr & (1 << 26 | 1 << 25 | 1 << 24 | 3 << 22) == 0, stdout  # AHP, DN, FZ, RMode
    _check_paths_agree(out)
    _check_to_float(out["to_float"])
    _check_from_float(values, out["from_float"])
    # the FPU path is the VCVTB instructions, the portable one integer arithmetic
    assert "vcvtb.f16.f32" in _function(listing, "tu_half_from_float")
    assert "vcvtb.f32.f16" in _function(listing, "to_float")
    assert "vcvtb.f32.f16" in _function(listing, "to_float_number")
    assert "vcvtb" not in _function(listing, "tu_half_from_float_soft") + _function(listing, "to_float_soft")

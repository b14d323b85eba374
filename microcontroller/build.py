"""Build the C trainer on the host with gcc (or clang): library, test runner, shared object.

Everything goes to a build folder keyed by a hash of the sources, the generated headers
and the flags (default ``build/microcontroller/`` in the repository, ignored by git), so a
rebuild happens only when something changed.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = ["ROOT", "WARNINGS", "SANITIZERS", "library_sources", "build", "BuildError"]

ROOT = Path(__file__).resolve().parent
BUILD_ROOT = ROOT.parent / "build" / "microcontroller"
WARNINGS = ["-std=c99", "-ffp-contract=off", "-Wall", "-Wextra", "-Wpedantic", "-Wshadow", "-Wdouble-promotion",
            "-Werror"]
SANITIZERS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]


class BuildError(RuntimeError):
    """A compiler or linker failure; the message holds the command and its output."""


def library_sources() -> list[Path]:
    """The trainer library's C sources (``src/*.c``), sorted."""
    return sorted((ROOT / "src").glob("*.c"))


def _digest(paths: list[Path], flags: list[str]) -> str:
    h = hashlib.sha256(" ".join(flags).encode())
    for p in sorted(paths):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"{' '.join(cmd)}\n{proc.stdout}{proc.stderr}")


def build(gen_dir: str | Path, kind: str, extra_sources: list[Path] | None = None, sanitize: bool = False,
          compiler: str | None = None, opt: str = "-O2", extra_flags: list[str] | None = None,
          link_flags: list[str] | None = None) -> Path:
    """Compile the library against the generated headers in ``gen_dir``.

    Args:
        gen_dir: folder with ``tu_config.h`` and ``tu_model_data.h``.
        kind: ``"static"`` (``libtu.a``), ``"shared"`` (``libtu.so`` for ctypes) or
            ``"program"`` (an executable of the library and ``extra_sources``).
        extra_sources: further C files (a test runner, the stream-file support).
        sanitize: build with AddressSanitizer and UndefinedBehaviorSanitizer.
        compiler: the C compiler (default ``$CC`` or ``gcc``).
        opt: optimization flag.
        extra_flags: further compiler flags (e.g. ``-fsanitize=fuzzer``).
        link_flags: further flags of the final link of a program (default ``-lm``).

    Returns:
        The path of the built file.

    Raises:
        BuildError: if the compiler fails (warnings are errors).
    """
    if kind not in ("static", "shared", "program"):
        raise ValueError(f"kind must be 'static', 'shared' or 'program'; got {kind!r}.")
    cc = compiler or os.environ.get("CC", "gcc")
    if shutil.which(cc) is None:
        raise BuildError(f"the C compiler {cc!r} is not installed; install gcc (or set CC).")
    gen_dir = Path(gen_dir).resolve()
    extra = [Path(p).resolve() for p in (extra_sources or [])]
    headers = sorted((ROOT / "include").glob("*.h")) + sorted((ROOT / "support").glob("*.h")) + \
        sorted(gen_dir.glob("*.h"))
    flags = [*WARNINGS, opt, *(SANITIZERS if sanitize else []), *(extra_flags or []),
             "-I", str(ROOT / "include"), "-I", str(ROOT / "support"), "-I", str(gen_dir)]
    if kind == "shared":
        flags += ["-fPIC"]
    sources = library_sources() + extra
    link = link_flags if link_flags is not None else ["-lm"]
    folder = BUILD_ROOT / f"{kind}-{_digest(sources + headers, [cc, *flags, *link])}"
    target = folder / {"static": "libtu.a", "shared": "libtu.so", "program": "run"}[kind]
    if target.is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    # every build compiles in a scratch folder of its own and moves the finished file into place, so two
    # processes building the same thing at once (pytest-xdist workers) never write or link each other's files
    with tempfile.TemporaryDirectory(prefix=".partial-", dir=folder) as scratch:
        partial = Path(scratch) / target.name
        if kind == "program":
            _run([cc, *flags, *map(str, sources), "-o", str(partial), *link])
        else:
            objects = []
            for src in library_sources():
                obj = Path(scratch) / (src.stem + ".o")
                _run([cc, *flags, "-c", str(src), "-o", str(obj)])
                objects.append(obj)
            if kind == "static":
                _run(["ar", "rcs", str(partial), *map(str, objects)])
            else:
                _run([cc, "-shared", *flags, *map(str, objects), "-o", str(partial), "-lm"])
        os.replace(partial, target)
    return target

"""Atomic file writes: a reader (or a run killed half-way) never sees a half-written file.

Each file is written under a temporary name in its own folder and moved onto its final
name with `os.replace`, which is atomic on POSIX and Windows file systems: the final
name holds either the old file or the complete new one.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["atomic_path", "write_text_atomic"]


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; move it onto ``path`` when the block succeeds.

    The caller writes the temporary file inside the ``with`` block. If the block raises,
    the temporary file is removed and ``path`` is left as it was.

    Args:
        path: the final file name; its folder must exist.

    Yields:
        The temporary path (same folder, hidden name ending in ``.tmp``).
    """
    final = Path(path)
    tmp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically and return ``path``."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)

"""The binary files the C trainer exchanges with Python: sensor streams, results, goldens.

All little-endian.

* Stream file (``write_stream``): the 8-byte magic ``TUSTRM01``, ``uint32`` channels n,
  ``uint32`` 0, then one record per sample until the end of the file: ``int64`` tick,
  ``int32`` segment id, ``float32`` y[n]. A firmware replays it through semihosting;
  ``microcontroller/support/tu_stream_file.c`` reads it.
* Result file (``read_result``): ``TURSLT01``, ``uint32`` parameter count p, ``uint32``
  report size r, ``float32`` EMA weights[p], ``float32`` raw weights[p], then the r bytes
  of the C ``tu_report`` (`microcontroller.ctrainer.report_type`); from a build with a trust envelope
  (``TU_ENVELOPE``) then ``uint32`` channel count c, ``float32`` span low[c], high[c] (``read_span``); from a
  build with trained physical parameters (``TU_PHYSICAL``) then ``PHYS``, ``uint32`` P, ``float32`` standard
  errors[P] in theta's units, the end-of-run refit's ``float32`` |r|^2 per jet before and after and ``int32``
  evaluations (0: no refit) and converged (``read_physical``).
* Golden file (``write_golden``): ``TUGOLD01``, then named arrays: ``uint32`` name length,
  the name, one type byte (``f`` float32 or ``q`` int64), ``uint32`` count, the values.
"""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

__all__ = ["STREAM_MAGIC", "RESULT_MAGIC", "GOLDEN_MAGIC", "write_stream", "read_stream", "read_result", "read_span",
           "read_physical", "write_golden"]

STREAM_MAGIC = b"TUSTRM01"
RESULT_MAGIC = b"TURSLT01"
GOLDEN_MAGIC = b"TUGOLD01"


def _record_type(n: int) -> np.dtype:
    return np.dtype([("tick", "<i8"), ("segment", "<i4"), ("y", "<f4", (n,))])


def write_stream(path: str | Path, y: np.ndarray, ticks: np.ndarray, segment: np.ndarray) -> Path:
    """Write samples (k, n) with their ticks (k,) and segment ids (k,) as a stream file.

    Values are rounded to float32, as the device reads them.
    """
    y = np.asarray(y, dtype=np.float64)
    if y.ndim != 2:
        raise ValueError(f"y must have shape (k, n); got {y.shape}.")
    k, n = y.shape
    rec = np.empty(k, dtype=_record_type(n))
    rec["tick"], rec["segment"], rec["y"] = ticks, segment, y
    path = Path(path)
    path.write_bytes(STREAM_MAGIC + struct.pack("<II", n, 0) + rec.tobytes())
    return path


def read_stream(path: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Read a stream file: ``(y (k, n) float32, ticks (k,) int64, segment (k,) int32)``.

    Raises:
        ValueError: for a file that is not a stream file or ends inside a record.
    """
    data = Path(path).read_bytes()
    if data[:8] != STREAM_MAGIC or len(data) < 16:
        raise ValueError(f"{path} is not a torch-ude stream file (magic {STREAM_MAGIC!r}).")
    n = struct.unpack_from("<I", data, 8)[0]
    dtype = _record_type(n)
    body = data[16:]
    if len(body) % dtype.itemsize:
        raise ValueError(f"{path} ends inside a record: {len(body) % dtype.itemsize} stray bytes.")
    rec = np.frombuffer(body, dtype=dtype)
    return rec["y"].copy(), rec["tick"].copy(), rec["segment"].copy()


def _read_result_parts(path: str | Path) -> tuple[np.ndarray, np.ndarray, bytes, tuple[np.ndarray, np.ndarray] | None,
                                               dict | None]:
    """The parts of a result file: EMA weights (p,), raw weights (p,), report bytes, the span (low, high), (c,)
    each, or None for a build without an envelope, and the physical parameters' block (`read_physical`) or None.

    Raises:
        ValueError: for a file that is not a result file or is truncated.
    """
    data = Path(path).read_bytes()
    if data[:8] != RESULT_MAGIC or len(data) < 16:
        raise ValueError(f"{path} is not a torch-ude result file (magic {RESULT_MAGIC!r}).")
    p, r = struct.unpack_from("<II", data, 8)
    end = 16 + 8 * p + r
    span = physical = None
    if len(data) >= end + 4 and data[end:end + 4] != b"PHYS":
        c = struct.unpack_from("<I", data, end)[0]
        if c == 0 or len(data) < end + 4 + 8 * c:
            raise ValueError(f"{path} ends inside its envelope span of {c} channels; rewrite it with the firmware.")
        span = tuple(np.frombuffer(data, dtype="<f4", count=2 * c, offset=end + 4).reshape(2, c).copy())
        end += 4 + 8 * c
    if len(data) >= end + 8 and data[end:end + 4] == b"PHYS":
        k = struct.unpack_from("<I", data, end + 4)[0]
        if len(data) < end + 24 + 4 * k:
            raise ValueError(f"{path} ends inside its block of {k} physical parameters; rewrite it with the firmware.")
        se = np.frombuffer(data, dtype="<f4", count=k, offset=end + 8).copy()
        before, after, evaluations, converged = struct.unpack_from("<ffii", data, end + 8 + 4 * k)
        physical = {"standard_errors": se, "refit": None if evaluations == 0 else {
            "loss_before": before, "loss_after": after, "evaluations": evaluations, "converged": bool(converged)}}
        end += 24 + 4 * k
    if len(data) != end:
        raise ValueError(f"{path} has {len(data)} bytes; a result of {p} weights and a {r}-byte report with its span "
                         f"and physical block has {end}.")
    weights = np.frombuffer(data, dtype="<f4", count=2 * p, offset=16)
    return weights[:p].copy(), weights[p:].copy(), data[16 + 8 * p: 16 + 8 * p + r], span, physical


def read_result(path: str | Path) -> tuple[np.ndarray, np.ndarray, bytes]:
    """Read a result file: ``(ema weights (p,), raw weights (p,), report bytes)``.

    Raises:
        ValueError: for a file that is not a result file or is truncated.
    """
    return _read_result_parts(path)[:3]


def read_span(path: str | Path) -> tuple[np.ndarray, np.ndarray] | None:
    """The trust envelope's span in a result file: ``(low, high)``, float32 (n + n_u,) each, states then inputs
    in their units (``tu_trainer_span``), or None for a firmware built without an envelope.

    Raises:
        ValueError: for a file that is not a result file or is truncated.
    """
    return _read_result_parts(path)[3]


def read_physical(path: str | Path) -> dict | None:
    """The trained physical parameters' block of a result file, or None for a firmware built without them:
    ``{"standard_errors": float32 (P,) in theta's units (``tu_trainer_standard_errors``), "refit": None, or
    {"loss_before", "loss_after", "evaluations", "converged"} of the end-of-run refit (``tu_trainer_refit``)}``.

    Raises:
        ValueError: for a file that is not a result file or is truncated.
    """
    return _read_result_parts(path)[4]


def write_golden(path: str | Path, arrays: dict[str, np.ndarray]) -> Path:
    """Write named arrays (float -> float32, integer -> int64) for the C tests."""
    out = bytearray(GOLDEN_MAGIC)
    for name, value in arrays.items():
        a = np.asarray(value)
        kind, data = (b"q", a.astype("<i8")) if np.issubdtype(a.dtype, np.integer) or a.dtype == bool else \
            (b"f", a.astype("<f4"))
        key = name.encode()
        out += struct.pack("<I", len(key)) + key + kind + struct.pack("<I", data.size) + data.tobytes()
    path = Path(path)
    path.write_bytes(bytes(out))
    return path

"""Recorded logs: read a CSV, NPZ or MAT file of states, inputs and time stamps for training.

A log names one time column (or none, for the sample vectors most system-identification benchmarks
ship: then a sampling rate ``file_rate`` gives the time of each row), its state columns and
(optionally) its input columns. Reading
it (`read_log`) validates everything once, at the boundary:

* the file must exist and be a ``.csv`` (UTF-8, a byte-order mark dropped; a header line of
  column names, comma-separated; fields may be quoted; `read_csv_table`), ``.npz`` (one 1-D
  numeric array per column; `read_npz_arrays`) or ``.mat`` (MATLAB v5, read by
  ``scipy.io.loadmat``; one vector per column) file; every named column must be present (the
  error lists the columns the file has) and, in NPZ/MAT files, as long as the time column. A
  file that cannot be read is an error naming it and what is wrong: a header without data
  rows, another separator than commas, a decimal comma or another field that is not a number
  (its line and column), a truncated archive, an array of Python objects;
* rows with a NaN or Inf in the time, a state or an input are **rejected and counted**
  (`LogReport`), never trained on; so are rows beyond plausible bounds where the caller gives
  them (``limits``: ``torch-ude score`` flags values 1000 training RMS away from zero);
* the remaining time stamps must increase strictly (a step back or a repeated stamp is an
  error naming the row);
* the median time step must be the nominal rate's ``1 / fs`` or an integer fraction of it
  (a file recorded at ``k * fs`` is decimated); anything else is a rate that disagrees with
  the time stamps, an error;
* a step longer than ``max_gap`` seconds (a dropped stretch of the log) **splits the log
  into segments**; a window of the estimator never straddles two.

Jittery time stamps are handled by **resampling each segment onto the nominal grid**
``t_0 + j / fs`` by linear interpolation between the two neighbouring samples. For a file
recorded at ``fs`` (or a multiple) with a jitter of a few percent of a step, each grid value
is within that jitter of a real sample, so interpolation moves a value by at most
``jitter * |xdot|`` and leaves the noise white; a file recorded faster is thus decimated
without an anti-alias filter (which would colour the noise the estimator measures). A
file at any other rate is read with ``antialias`` (``torch-ude score`` reads so): it is
interpolated onto a grid ``k`` times finer than the nominal one and low-pass filtered before the
decimation by ``k`` (`resample_segment`), and a file slower than ``fs`` is interpolated. Short
gaps up to ``max_gap`` are bridged by the same interpolation, as the live stream bridges
dropped samples (`torch_ude.stream`).
"""
from __future__ import annotations

import csv
import math
import re
import warnings
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.io
import scipy.signal

__all__ = ["RecordedLog", "LogReport", "read_log", "read_csv_table", "write_csv_table", "read_npz_arrays",
           "resample_segment", "RATE_TOLERANCE", "FILLED_SHARE"]

#: Relative disagreement allowed between the median time step and ``1 / (k fs)``.
RATE_TOLERANCE = 0.02
#: The share of a log's grid samples that may be filled in by interpolation (no file sample within half a
#: step) before `read_log` warns: a few bridged samples are normal for a real log, a file slower than the
#: grid (half its samples filled) is not.
FILLED_SHARE = 0.05


@dataclass
class LogReport:
    """What reading a log found (recorded in the run's outputs).

    Attributes:
        file: the file's path as given.
        rows: data rows in the file.
        rejected_nonfinite: rows dropped for a NaN or Inf value.
        first_rejected_row: 1-based data row of the first rejected row, or None.
        segments: segments after splitting at gaps longer than ``max_gap``.
        gaps: steps longer than ``max_gap`` (each splits the log).
        bridged: steps longer than 1.5 nominal steps but within ``max_gap`` (interpolated over).
        dt_median: median time step of the file in s.
        decimation: file samples per nominal step (1 at the nominal rate).
        samples: samples after resampling onto the nominal grid, all segments together.
        trimmed: samples dropped at segment ends where no centred velocity window fits
            (position-only logs, `torch_ude.position_only.with_velocities`).
        antialiased: whether the file was low-pass filtered before decimation (`read_log` with
            ``antialias``; ``decimation`` is then the factor of `resample_segment`).
        rejected_implausible: rows dropped for a value beyond `read_log`'s ``limits``.
        filled: grid samples with no file sample within half a nominal step (filled in by
            interpolation: bridged gaps, a file slower than ``fs``); above `FILLED_SHARE` of the
            samples `read_log` warns.
    """

    file: str
    rows: int
    rejected_nonfinite: int = 0
    first_rejected_row: int | None = None
    segments: int = 0
    gaps: int = 0
    bridged: int = 0
    dt_median: float = math.nan
    decimation: int = 1
    samples: int = 0
    trimmed: int = 0
    antialiased: bool = False
    rejected_implausible: int = 0
    filled: int = 0


@dataclass
class RecordedLog:
    """A log on the nominal grid, split into segments.

    Attributes:
        fs: the nominal rate in Hz.
        names: state column names, then input column names.
        n_states: how many of ``names`` are states.
        segments: per segment an array (T_s, n + n_u) of states then inputs, float64, on
            the grid ``t_s + j / fs``.
        starts: the time of each segment's first grid point in s (the file's clock).
        report: what reading found (`LogReport`).
    """

    fs: float
    names: tuple[str, ...]
    n_states: int
    segments: list[np.ndarray] = field(default_factory=list)
    starts: list[float] = field(default_factory=list)
    report: LogReport | None = None

    @property
    def n_inputs(self) -> int:
        """Input channels."""
        return len(self.names) - self.n_states

    @property
    def samples(self) -> int:
        """Samples over all segments."""
        return sum(s.shape[0] for s in self.segments)


_SEPARATORS = {";": "semicolons", "\t": "tabs", "|": "vertical bars"}


def read_csv_table(path: str | Path, comment: str = "") -> tuple[list[str], np.ndarray]:
    """The header names and the numbers of a comma-separated log, validated (module doc).

    The file is UTF-8 text (a byte-order mark is dropped), a header line of names, then rows of
    as many fields; a field may be quoted (``"1.5"``), an empty field reads NaN (a missing
    value: the row is then rejected and counted by `read_log`), blank lines are skipped.

    Args:
        path: the ``.csv`` file.
        comment: characters stripped from the start of the first name (e.g. ``"#"``).

    Returns:
        The names, and the values as a float64 array (rows, names).

    Raises:
        ValueError: for a file that is not UTF-8 text, empty, separated by another character
            than commas, a row with another number of fields than the header, a field that is
            not a number (naming its line and column), or no data row; each names the file.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path} is not UTF-8 text (byte {err.object[err.start]:#04x} at position {err.start}); "
                         f"save the log as a UTF-8 CSV file.") from None
    reader = csv.reader(text.splitlines())
    header = next(reader, None)
    if not header or not any(h.strip() for h in header):
        raise ValueError(f"{path} is empty; a log needs a header line of column names and rows of numbers.")
    names = [h.strip() for h in header]
    names[0] = names[0].lstrip(comment).strip() if comment else names[0]
    other = [name for sep, name in _SEPARATORS.items() if len(names) == 1 and sep in names[0]]
    if other:
        raise ValueError(f"{path}: the header line {header[0]!r} is separated by {other[0]}, not commas; save the "
                         f"log comma-separated with '.' as the decimal point (e.g. pandas: df.to_csv(path, "
                         f"index=False)).")
    rows, lines = [], []
    for row in reader:
        if not row or not any(field.strip() for field in row):
            continue
        if len(row) != len(names):
            raise ValueError(f"{path}: line {reader.line_num} has {len(row)} fields but the header names "
                             f"{len(names)} columns ({names}); every row needs one value per column.")
        rows.append([field.strip() or "nan" for field in row])
        lines.append(reader.line_num)
    if not rows:
        raise ValueError(f"{path} holds the header line and no data rows; a log needs rows of numbers under "
                         f"its header.")
    try:
        return names, np.array(rows, dtype=np.float64)
    except ValueError:
        pass
    for row, line in zip(rows, lines):
        for field, name in zip(row, names):
            try:
                float(field)
            except ValueError:
                hint = ("; it uses a decimal comma: save the log with '.' as the decimal point"
                        if re.fullmatch(r"[-+]?\d*,\d+", field) else "; fix or remove that row")
                raise ValueError(f"{path}: line {line}, column {name!r} holds {field!r}, which is not a "
                                 f"number{hint}.") from None
    raise AssertionError("a field failed to convert but every field converts on its own")  # pragma: no cover


def write_csv_table(path: str | Path, columns: Mapping[str, np.ndarray]) -> None:
    """Write named columns as the comma-separated log `read_csv_table` and `read_log` read.

    A header line of the names, then one row per sample; every value as ``%.18e`` (exact for
    float64: the file reads back bit for bit).

    Args:
        path: the ``.csv`` file (overwritten).
        columns: name -> values, (T,) each, all of one length (e.g. ``time`` in s first).

    Raises:
        ValueError: for no column, a column that is not one-dimensional, or columns of different lengths.
    """
    values = {name: np.asarray(v) for name, v in columns.items()}
    if not values:
        raise ValueError("write_csv_table needs at least one column; got none.")
    shapes = {name: v.shape for name, v in values.items()}
    flat = [name for name, shape in shapes.items() if len(shape) != 1]
    if flat:
        raise ValueError(f"write_csv_table writes one-dimensional columns, (T,) each; the column {flat[0]!r} has the "
                         f"shape {shapes[flat[0]]}.")
    if len(set(shapes.values())) != 1:
        raise ValueError(f"write_csv_table needs columns of one length; got the lengths "
                         f"{ {name: shape[0] for name, shape in shapes.items()} }.")
    np.savetxt(path, np.stack(list(values.values()), axis=1), delimiter=",", header=",".join(values), comments="")


def read_npz_arrays(path: str | Path) -> dict[str, np.ndarray]:
    """Every array of a NumPy ``.npz`` archive, by name.

    Raises:
        ValueError: for a file that is not a complete archive (truncated, corrupt or another
            format), or an array of Python objects (``dtype=object``: loading it would run
            pickled code, so it is refused); each names the file and the array.
    """
    path = Path(path)
    try:
        archive = np.load(path, allow_pickle=False)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as err:
        raise ValueError(f"{path} is not a complete .npz archive ({type(err).__name__}: {err}); the file is "
                         f"truncated or of another format: write it again with numpy.savez.") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValueError(f"{path} holds a single .npy array, not a .npz archive of named columns; save the columns "
                         f"with numpy.savez(path, time=..., position=...).")
    out = {}
    with archive:
        for name in archive.files:
            try:
                out[name] = archive[name]
            except ValueError as err:
                if "allow_pickle" not in str(err):
                    raise ValueError(f"{path}: the array {name!r} cannot be read ({err}); write the file again with "
                                     f"numpy.savez.") from None
                raise ValueError(f"{path}: the array {name!r} holds Python objects (dtype=object), which are not "
                                 f"loaded (that would run pickled code); save it as numbers, e.g. "
                                 f"numpy.savez(path, {name}=numpy.asarray(values, dtype=float)).") from None
            except (zipfile.BadZipFile, OSError, EOFError) as err:
                raise ValueError(f"{path}: the array {name!r} is cut short ({type(err).__name__}: {err}); the "
                                 f"archive is truncated: write it again with numpy.savez.") from None
    return out


def _read_columns(path: Path, wanted: Sequence[str], optional: str | None = None) -> dict[str, np.ndarray]:
    """The named columns of a file as float64 vectors (validated for presence and length); the ``optional``
    one of them (the time column where a rate is given too) is left out where the file lacks it."""
    time_name = wanted[0] if optional is None or optional == wanted[0] else None
    suffix = path.suffix.lower()
    if suffix == ".csv":
        header, data = read_csv_table(path)
        wanted = [c for c in wanted if c != optional or c in header]
        missing = [c for c in wanted if c not in header]
        if missing:
            raise ValueError(f"{path}: column(s) {missing} named in the config are not in the file's header; "
                             f"it has {header}. Fix data.time/states/inputs (a file without a time column: set "
                             f"data.file_rate, or --file-rate of torch-ude score).")
        return {c: data[:, header.index(c)] for c in wanted}
    if suffix == ".npz":
        content = read_npz_arrays(path)
    elif suffix == ".mat":
        try:
            if scipy.io.matlab.matfile_version(path)[0] == 2:
                raise ValueError("it is MATLAB v7.3, an HDF5 file")
            content = {k: v for k, v in scipy.io.loadmat(path).items() if not k.startswith("__")}
        except (ValueError, TypeError, OSError, EOFError, scipy.io.matlab.MatReadError) as err:
            raise ValueError(f"{path}: scipy.io.loadmat cannot read it ({err}); save it as MATLAB v5 "
                             f"(save -v7) or as CSV/NPZ.") from None
    else:
        raise ValueError(f"{path}: unknown file type {path.suffix!r}; a log must be .csv, .npz or .mat.")
    wanted = [c for c in wanted if c != optional or c in content]
    missing = [c for c in wanted if c not in content]
    if missing:
        raise ValueError(f"{path}: variable(s) {missing} named in the config are not in the file; it has "
                         f"{sorted(content)}. Fix data.time/states/inputs (a file without a time column: set "
                         f"data.file_rate, or --file-rate of torch-ude score).")
    out = {}
    for c in wanted:
        v = np.asarray(content[c])
        if v.ndim > 2 or (v.ndim == 2 and min(v.shape) != 1) or not np.issubdtype(v.dtype, np.number):
            raise ValueError(f"{path}: variable {c!r} must be a numeric vector (one value per sample); got "
                             f"shape {v.shape}, dtype {v.dtype}.")
        out[c] = v.astype(np.float64).reshape(-1)
    length = out[wanted[0]].shape[0]
    for c in wanted[1:]:
        if out[c].shape[0] != length:
            first = "the time variable" if wanted[0] == time_name else "the variable"
            raise ValueError(f"{path}: variable {c!r} has {out[c].shape[0]} samples but {first} "
                             f"{wanted[0]!r} has {length}; every column needs one value per time stamp.")
    return out


def read_log(path: str | Path, time: str | None, states: Sequence[str], inputs: Sequence[str] = (),
             fs: float = 100.0, max_gap: float | None = None, antialias: bool | str = False,
             limits: Sequence[float] | None = None, file_rate: float | None = None) -> RecordedLog:
    """Read, validate, split and resample one log (module doc).

    Args:
        path: a ``.csv``, ``.npz`` or ``.mat`` file.
        time: the time column (s); None for a file of sample vectors without one (then
            ``file_rate`` gives the time of row j, ``j / file_rate``).
        states: the state columns, in the order of the known model's state.
        inputs: the input columns (the known model's inputs), possibly none.
        fs: the nominal rate in Hz; the file's median rate must be ``k * fs``, k = 1, 2, ...
            (any rate with ``antialias``).
        max_gap: the longest step, in s, bridged by interpolation; a longer one splits the
            log. None: 5.5 nominal steps (with ``antialias``: 5.5 nominal steps or 5.5 of the
            file's median steps, whichever is longer).
        antialias: False: the rate rule above. True: a file at any rate is accepted (module doc,
            `resample_segment`); a faster file is low-pass filtered before it is decimated to
            ``fs``, a slower one interpolated. ``"other_rates"``: any rate is accepted, but a file at
            ``k * fs`` is read as with False (so a score equals the one its run computed), and only
            files at other rates are filtered.
        file_rate: the rate in Hz the rows of a file without the time column were recorded at (a file
            that has the ``time`` column is read by its stamps), or None: the time column is required.
        limits: the largest plausible absolute value of each state, then input column (its units),
            or None: rows with a value beyond its bound (a corrupted sample such as 1e30) are
            flagged, counted (``report.rejected_implausible``) and left out like rows with NaN.

    Returns:
        The `RecordedLog`; its ``report`` counts rejected rows, gaps and segments.

    Raises:
        FileNotFoundError: for a missing file.
        ValueError: for an unknown file type, missing columns, columns of unequal length,
            time stamps that do not increase, a rate that disagrees with the time stamps, or
            a log with no segment of at least two samples; each names the file (and the
            column or row).
    """
    path = Path(path)
    if (time is None or file_rate is not None) and not (
            isinstance(file_rate, (int, float)) and not isinstance(file_rate, bool) and math.isfinite(file_rate)
            and file_rate > 0):
        raise ValueError(f"{path}: a log without a time column (data.time: null) needs its sample rate: set "
                         f"data.file_rate to the rate in Hz its rows were recorded at; got {file_rate!r}.")
    names = ("time" if time is None else time, *states, *inputs)
    if len(states) < 1:
        raise ValueError(f"{path}: name at least one state column (data.states).")
    if len(set(names)) != len(names):
        raise ValueError(f"{path}: the time, state and input columns must be distinct; got {list(names)}.")
    if not (isinstance(fs, (int, float)) and math.isfinite(fs) and fs > 0):
        raise ValueError(f"fs (the nominal rate in Hz) must be positive; got {fs!r}.")
    if max_gap is not None and not (math.isfinite(max_gap) and max_gap > 0):
        raise ValueError(f"max_gap must be a positive number of seconds or null; got {max_gap!r}.")
    if not path.is_file():
        raise FileNotFoundError(f"the log {path} does not exist; check data.files / data.val_files "
                                f"(paths are relative to the working directory).")
    cols = _read_columns(path, names if time is not None else names[1:], optional=names[0] if file_rate else None)
    if names[0] not in cols:  # the sample vectors of a system-identification benchmark: row j at j / file_rate
        cols[names[0]] = np.arange(cols[names[1]].shape[0]) / float(file_rate)
    table = np.stack([cols[c] for c in names], axis=1)  # (rows, 1 + n + n_u)
    report = LogReport(file=str(path), rows=int(table.shape[0]))
    finite = np.isfinite(table).all(axis=1)
    if not finite.all():
        bad = np.flatnonzero(~finite)
        report.rejected_nonfinite, report.first_rejected_row = int(bad.size), int(bad[0]) + 1
        worst = [c for j, c in enumerate(names) if not np.isfinite(table[bad, j]).all()]
        warnings.warn(f"{path}: {bad.size} of {table.shape[0]} rows hold NaN or Inf (columns {worst}; first at data "
                      f"row {bad[0] + 1}); they are rejected and counted, not trained on.", stacklevel=2)
    if limits is not None:
        bound = np.asarray(limits, dtype=np.float64)
        if bound.shape != (table.shape[1] - 1,) or not (bound > 0).all():
            raise ValueError(f"limits must hold one positive bound per state and input column ({table.shape[1] - 1}); "
                             f"got {list(np.asarray(limits).reshape(-1))}.")
        with np.errstate(invalid="ignore"):
            wild = finite & (np.abs(table[:, 1:]) > bound).any(axis=1)
        if wild.any():
            bad = np.flatnonzero(wild)
            report.rejected_implausible = int(bad.size)
            worst = [c for j, c in enumerate(names[1:]) if (np.abs(table[bad, j + 1]) > bound[j]).any()]
            warnings.warn(f"{path}: {bad.size} of {table.shape[0]} rows hold values beyond the plausible bounds "
                          f"(columns {worst}; first at data row {bad[0] + 1}); they are flagged, counted and left "
                          f"out (the interpolation bridges them).", stacklevel=2)
            finite = finite & ~wild
    rows = np.flatnonzero(finite)
    table = table[rows]
    t = table[:, 0]
    step = np.diff(t)
    if (step <= 0).any():
        j = int(np.flatnonzero(step <= 0)[0])
        raise ValueError(f"{path}: the time column {time!r} does not increase at data row {rows[j + 1] + 1} "
                         f"(t = {float(t[j + 1]):.9g} s after {float(t[j]):.9g} s at row {rows[j] + 1}); sort the log or remove "
                         f"repeated rows.")
    if t.shape[0] < 2:
        raise ValueError(f"{path}: fewer than two valid rows; nothing to learn from.")
    dt = float(np.median(step))
    ratio = 1.0 / (dt * fs)
    k = round(ratio)
    report.dt_median, report.decimation = dt, max(k, 1)
    if antialias not in (False, True, "other_rates"):
        raise ValueError(f"antialias must be False, True or 'other_rates'; got {antialias!r}.")
    multiple = k >= 1 and abs(ratio - k) <= RATE_TOLERANCE * k
    if not antialias and not multiple:
        divisors = ", ".join(f"{1 / (dt * j):.6g}" for j in (1, 2, 3, 4, 5))
        raise ValueError(f"{path}: the time stamps have a median step of {dt:.6g} s ({1 / dt:.6g} Hz), which is "
                         f"not the nominal rate data.fs = {fs:g} Hz or an integer multiple of it; set data.fs to "
                         f"the file's rate or a divisor of it ({divisors} Hz), or read it at any rate with an "
                         f"anti-aliasing filter (data.antialias: other_rates).")
    if antialias is True or (antialias and not multiple):
        report.decimation = max(1, math.ceil(ratio - RATE_TOLERANCE))
        report.antialiased = report.decimation > 1
    limit = (5.5 * max(1.0 / fs, dt if antialias else 0.0)) if max_gap is None else float(max_gap)
    long = step > limit
    report.gaps = int(long.sum())
    report.bridged = int(((step > 1.5 * dt) & ~long).sum())
    cuts = np.flatnonzero(long) + 1
    log = RecordedLog(fs=float(fs), names=tuple(names[1:]), n_states=len(states), report=report)
    for piece in np.split(table, cuts):
        ts = piece[:, 0]
        count = int(math.floor((ts[-1] - ts[0]) * fs + 1e-9)) + 1
        if count < 2:
            continue  # an isolated sample between two gaps: no window fits it
        values = resample_segment(ts, piece[:, 1:], fs, count, report.decimation if report.antialiased else 1)
        grid = ts[0] + np.arange(count) / fs
        right = np.clip(np.searchsorted(ts, grid), 1, ts.shape[0] - 1)
        nearest = np.minimum(np.abs(grid - ts[right - 1]), np.abs(ts[right] - grid))
        report.filled += int((nearest > 0.5 / fs + 1e-9).sum())
        log.segments.append(values)
        log.starts.append(float(ts[0]))
    if not log.segments:
        raise ValueError(f"{path}: no stretch of the log between gaps holds two samples at {fs:g} Hz.")
    report.segments, report.samples = len(log.segments), log.samples
    if report.filled > FILLED_SHARE * report.samples:
        warnings.warn(f"{path}: {report.filled} of its {report.samples} samples on the {fs:g} Hz grid "
                      f"({100 * report.filled / report.samples:.0f} %) are filled in by interpolation, more than a "
                      f"real sample within half a step (bridged gaps, or a file slower than data.fs); they carry no "
                      f"measurement of their own: record faster or lower data.fs.", stacklevel=2)
    return log


def resample_segment(t: np.ndarray, values: np.ndarray, fs: float, count: int, decimation: int = 1) -> np.ndarray:
    """One segment of a log on the nominal grid ``t_0 + j / fs``, ``j = 0 .. count - 1``.

    With ``decimation`` 1, each grid value is the linear interpolation between the two neighbouring
    samples (module doc: no filter, the noise stays white). With ``decimation`` k > 1 (a file faster
    than ``fs``, `read_log` with ``antialias``), the segment is first interpolated linearly onto the
    finer grid ``t_0 + i / (k fs)`` (which absorbs jitter and any rate up to ``k fs``), then
    low-pass filtered and decimated by k by ``scipy.signal.resample_poly`` (a Kaiser-windowed FIR with
    its cut-off at the new Nyquist frequency, delay compensated, edges padded by a fitted line), so
    content above ``fs / 2`` does not fold onto the grid.

    Args:
        t: the sample times of the segment in s, (T,), increasing.
        values: the samples, (T, c), float64.
        fs: the nominal rate in Hz.
        count: grid points to return.
        decimation: k, fine-grid points per nominal step.

    Returns:
        The values on the nominal grid, (count, c), float64.
    """
    k = int(decimation)
    grid = t[0] + np.arange((count - 1) * k + 1) / (k * fs)
    fine = np.stack([np.interp(grid, t, values[:, j]) for j in range(values.shape[1])], axis=1)
    if k == 1:
        return fine
    return scipy.signal.resample_poly(fine, 1, k, axis=0, padtype="line")[:count]

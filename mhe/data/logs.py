"""Recordings read from files: BayesRace ``.npz``, the IAC racecar ``.csv`` and any CSV log.

Each reader is a `mhe.data.recording.RecordingSource` (so a config names it under
``data.problem.recording``) and shares one validation (`recording_from_columns`):

* a column the reader needs and the file lacks is an error naming both lists;
* rows with NaN or Inf in a used column are dropped and counted; the windows never span the
  gap they leave (`mhe.data.recording.Recording.breaks`);
* time must increase strictly (an error names the first offending row), and every step must be
  the sample time within ``dt_rtol`` or a whole gap (longer than ``(1 + dt_rtol) dt``): a step
  that is neither, or a median step that is not the given ``dt``, is an error;
* fewer than ``min_samples`` rows left is an error.

What was dropped is in the reader's ``load_report`` after `record` (also logged).

Input alignment: ``inputs[k]`` is the input applied from sample ``k`` to ``k + 1``. BayesRace's
files store it so (``inputs[:, k]`` drives ``k -> k + 1``). In the IAC log the commands of row
``k + 1`` are the ones that act over ``k -> k + 1`` in Deep Dynamics' parser (``align="next"``,
the default); ``align="same"`` uses row ``k``'s.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import torch

from torch_ude.recorded import read_csv_table, read_npz_arrays

from ..models.vehicle import BAYESRACE_TRUTH
from .recording import RecordingSource
from .recording import Recording

__all__ = ["recording_from_columns", "read_csv", "CSVRecording", "BayesRaceRecording", "IACRecording",
           "IAC_BRAKE_KPA"]

log = logging.getLogger(__name__)

IAC_BRAKE_KPA = 2757.8999
"""Brake pressure (kPa) that Deep Dynamics' IAC parser maps to a pedal of -1."""


def read_csv(path: str | Path) -> dict[str, np.ndarray]:
    """The numeric columns of a CSV file with a header line (a leading ``#`` is ignored), by name.

    The file is read as `torch_ude.recorded.read_csv_table` reads a recorded log: UTF-8 (a
    byte-order mark dropped), comma-separated, quoted fields read, an empty field is NaN.

    Raises:
        ValueError: for a missing file, an empty file or one without data rows, another separator
            than commas, rows of another length than the header, or a field that is not a number
            (its line and column); each names the file.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"No file at {path}; give the path of a CSV log (relative paths are from the working "
                         "directory).")
    names, values = read_csv_table(path, comment="#")
    return {n: values[:, i] for i, n in enumerate(names)}


def _require(columns: Mapping[str, np.ndarray], names: Sequence[str], where: str) -> None:
    missing = [n for n in names if n not in columns]
    if missing:
        raise ValueError(f"{where} has no column(s) {missing}; its columns are {sorted(columns)}. Name existing "
                         "columns in the reader's arguments.")


def recording_from_columns(time: np.ndarray, inputs: np.ndarray, outputs: np.ndarray, states: np.ndarray | None,
                           dt: float | None, dt_rtol: float = 0.05, min_samples: int = 2, where: str = "the data"
                           ) -> tuple[Recording, dict[str, int | float]]:
    """Validate columns of a log and make a `Recording` (NaN rows dropped, gaps marked).

    Args:
        time: sample times in seconds, shape (T,).
        inputs: inputs applied from each sample to the next, shape (T, n_u).
        outputs: measured outputs at each sample, shape (T, n_y).
        states: logged or true states, shape (T, n_x), or None (a (T, 0) table).
        dt: the sample time in seconds, or None for the median step.
        dt_rtol: relative tolerance of a step around ``dt``.
        min_samples: fewest rows to keep.
        where: the source's name in error messages.

    Returns:
        The recording and a report: ``rows`` read, ``dropped_nan``, ``kept``, ``gaps``, ``dt``.

    Raises:
        ValueError: for non-monotonic time, a wrong or irregular sample time, or too few samples.
    """
    states = np.zeros((len(time), 0)) if states is None else states
    table = np.column_stack([time, inputs, outputs, states]).astype(np.float64)
    finite = np.isfinite(table).all(axis=1)
    rows, dropped = len(table), int((~finite).sum())
    table = table[finite]
    if len(table) < max(min_samples, 2):
        raise ValueError(f"{where} has {len(table)} usable rows ({dropped} of {rows} dropped for NaN/Inf); at least "
                         f"{max(min_samples, 2)} are needed (one window of the MHE needs horizon + 1).")
    t = table[:, 0]
    steps = np.diff(t)
    back = np.flatnonzero(steps <= 0)
    if back.size:
        raise ValueError(f"Time in {where} must increase strictly; it does not from row {int(back[0])} to "
                         f"{int(back[0]) + 1} of the usable rows ({t[back[0]]} -> {t[back[0] + 1]} s; {back.size} such "
                         "steps). Sort the log or split it where the clock resets.")
    median = float(np.median(steps))
    dt = median if dt is None else float(dt)
    if not dt > 0 or abs(median - dt) > dt_rtol * dt:
        raise ValueError(f"The sample time of {where} is {median:.6g} s (median step), not the given dt = {dt} s "
                         f"(tolerance {dt_rtol:.0%}); give the right dt or resample the log.")
    odd = np.flatnonzero((np.abs(steps - dt) > dt_rtol * dt) & (steps <= (1 + dt_rtol) * dt))
    if odd.size:
        raise ValueError(f"{where} has {odd.size} steps that are neither dt = {dt} s nor a gap (first after row "
                         f"{int(odd[0])}: {steps[odd[0]]:.6g} s); resample the log to a uniform rate.")
    breaks = tuple(int(i) + 1 for i in np.flatnonzero(steps > (1 + dt_rtol) * dt))
    n_u, n_y = inputs.shape[1], outputs.shape[1]
    cols = torch.as_tensor(table[:, 1:])
    rec = Recording(cols[:, n_u + n_y:], cols[:, :n_u], cols[:, n_u:n_u + n_y], dt, breaks)
    report = {"rows": rows, "dropped_nan": dropped, "kept": len(table), "gaps": len(breaks), "dt": dt}
    if dropped or breaks:
        log.warning("%s: %d of %d rows dropped for NaN/Inf, %d gaps; windows do not span a gap.", where, dropped,
                    rows, len(breaks))
    return rec, report


class CSVRecording(RecordingSource):
    """A CSV log: column names for time, inputs, outputs (and optionally states), a sample time.

    Args:
        path: the CSV file (header line of names, a leading ``#`` allowed).
        time: the time column (seconds).
        inputs: input columns, in the model's input order.
        outputs: output columns, in the order of the problem's ``measured`` states.
        states: columns of the full state (for evaluation), or empty.
        dt: sample time in seconds (None: the median step).
        dt_rtol: relative tolerance of a step around ``dt``.
        min_samples: fewest usable rows.
    """

    recorded = True

    def __init__(self, path: str, time: str, inputs: Sequence[str], outputs: Sequence[str],
                 states: Sequence[str] = (), dt: float | None = None, dt_rtol: float = 0.05,
                 min_samples: int = 2) -> None:
        self.path, self.time, self.inputs, self.outputs = str(path), time, tuple(inputs), tuple(outputs)
        self.states, self.dt, self.dt_rtol, self.min_samples = tuple(states), dt, dt_rtol, min_samples
        self.load_report: dict[str, int | float] | None = None

    def record(self) -> Recording:
        """Read, validate and return the recording (see the module docstring)."""
        cols = read_csv(self.path)
        _require(cols, [self.time, *self.inputs, *self.outputs, *self.states], self.path)
        rec, self.load_report = recording_from_columns(
            cols[self.time], np.column_stack([cols[n] for n in self.inputs]),
            np.column_stack([cols[n] for n in self.outputs]),
            np.column_stack([cols[n] for n in self.states]) if self.states else None,
            self.dt, self.dt_rtol, self.min_samples, self.path)
        return rec


class BayesRaceRecording(RecordingSource):
    """A BayesRace ``.npz`` of Deep Dynamics (``time``, ``states``/``dstates``, ``inputs``), y = (vx, omega).

    States ``(vx, vy, omega)`` are rows 3:6 of ``trajectory``; inputs are reordered to the
    model's ``(delta, gamma)`` from the file's (throttle, steering). The file has one input
    fewer than samples; the last sample repeats the last input, which no window reads (a window
    starting at ``s`` uses inputs ``s..s+N-1`` and samples up to ``s+N``).

    Args:
        path: the ``.npz`` file.
        trajectory: ``"dstates"`` (explicit Euler, the identification data) or ``"states"``
            (one RKF45 step per sample).
        first: samples to skip at the start (the car starts at 0.1 m/s).
        dt: the simulator's sample time in seconds (the files' time stamps carry rounding).
        dt_rtol: relative tolerance of a time step around ``dt``.
    """

    recorded = True

    def __init__(self, path: str, trajectory: str = "dstates", first: int = 0, dt: float = 0.02,
                 dt_rtol: float = 1e-6) -> None:
        if trajectory not in ("dstates", "states"):
            raise ValueError(f"trajectory must be 'dstates' or 'states'; got {trajectory!r}.")
        if first < 0:
            raise ValueError(f"first must be >= 0; got {first}.")
        self.path, self.trajectory, self.first, self.dt, self.dt_rtol = str(path), trajectory, first, dt, dt_rtol
        self.load_report: dict[str, int | float] | None = None

    def with_path(self, path: str | Path) -> BayesRaceRecording:
        """Another BayesRace file read the same way (trajectory, first sample, sample time), e.g. the other track
        to validate on."""
        return BayesRaceRecording(str(path), self.trajectory, self.first, self.dt, self.dt_rtol)

    @property
    def truth(self) -> Mapping[str, float]:
        """The BayesRace simulator's parameters."""
        return BAYESRACE_TRUTH

    def record(self) -> Recording:
        """Read and validate the file (see the module docstring)."""
        path = Path(self.path)
        if not path.is_file():
            raise ValueError(f"No file at {path}; BayesRace data are in ../shared/data/bayesrace (see its README).")
        cols = read_npz_arrays(path)
        _require(cols, ["time", self.trajectory, "inputs"], self.path)
        t, x, u = cols["time"], cols[self.trajectory], cols["inputs"]
        if x.ndim != 2 or x.shape[0] < 6 or x.shape[1] != t.shape[0] or u.shape != (2, t.shape[0] - 1):
            raise ValueError(f"{self.path}: expected time (T,), {self.trajectory} (>=6, T) and inputs (2, T-1); got "
                             f"{t.shape}, {x.shape} and {u.shape}.")
        inputs = np.concatenate([u[[1, 0]].T, u[[1, 0], -1:].T])
        states = x[3:6].T
        s = self.first
        rec, self.load_report = recording_from_columns(t[s:], inputs[s:], states[s:, [0, 2]], states[s:], self.dt,
                                                       self.dt_rtol, 2, self.path)
        return rec


class IACRecording(RecordingSource):
    """The Indy Autonomous Challenge log (``../shared/data/iac``) as Deep Dynamics parses it, y = (vx, omega).

    Keeps the first contiguous stretch with ``|vx| >= min_speed``; the pedal input is
    ``throttle / 100``, or ``-brake / IAC_BRAKE_KPA`` where the brake pressure is positive; inputs
    ``(delta, pedal)``; states ``(vx, vy, omega)`` as logged. ``part`` keeps chronological parts
    of that stretch (a train/validation split): rows ``floor(a L)`` to ``floor(b L) - 1`` of its
    ``L`` aligned rows for ``part = (a, b)``, so ``(0, 0.7)`` and ``(0.7, 1)`` split it without
    overlap or gap. Several blocks are pairs in a row, ``(a1, b1, a2, b2, ...)`` with
    ``a1 < b1 <= a2 < b2 ...``: their rows are kept in time order, and the rows left out between
    two blocks make a gap (a ``break`` of the recording, which no window spans), so
    ``(0, 0.2, 0.3, 0.5)`` and ``(0.2, 0.3, 0.5, 1)`` are a blocked split of the stretch.

    Args:
        path: the CSV file.
        min_speed: speed gate in m/s.
        align: ``"next"``: the commands of row ``k + 1`` act over ``k -> k + 1`` (Deep Dynamics);
            ``"same"``: those of row ``k``.
        dt: the sample time in seconds (25 Hz).
        dt_rtol: relative tolerance of a step around ``dt``.
        min_samples: fewest usable rows.
        part: the fractions ``(a, b)``, ``0 <= a < b <= 1``, of the gated stretch to keep, or several
            such pairs in time order, ``(a1, b1, a2, b2, ...)`` with ``b1 <= a2``.

    Raises:
        ValueError: for an unknown ``align`` or a ``part`` that is not pairs of fractions
            ``0 <= a1 < b1 <= a2 < b2 ... <= 1``.
    """

    recorded = True

    COLUMNS = {"time": "time(s)", "vx": "vx(m/s)", "vy": "vy(m/s)", "omega": "omega(rad/s)", "delta": "delta(rad)",
               "throttle": "throttle_ped_cmd(%)", "brake": "brake_ped_cmd(kPa)"}
    """The log's column of each quantity."""

    def __init__(self, path: str, min_speed: float = 5.0, align: str = "next", dt: float = 0.04,
                 dt_rtol: float = 0.05, min_samples: int = 2, part: Sequence[float] = (0.0, 1.0)) -> None:
        if align not in ("next", "same"):
            raise ValueError(f"align must be 'next' (Deep Dynamics: row k+1's commands drive k -> k+1) or 'same'; "
                             f"got {align!r}.")
        self.path, self.min_speed, self.align, self.dt = str(path), float(min_speed), align, float(dt)
        part = tuple(float(v) for v in part)
        pairs = list(zip(part[0::2], part[1::2]))
        if (not part or len(part) % 2 or not 0.0 <= part[0] or not part[-1] <= 1.0
                or any(not a < b for a, b in pairs) or any(b > a for (_, b), (a, _) in zip(pairs, pairs[1:]))):
            raise ValueError(f"part must be fractions (a, b) of the gated stretch with 0 <= a < b <= 1, e.g. "
                             f"(0, 0.7) for training and (0.7, 1) for validation, or several such pairs in time "
                             f"order (a1, b1, a2, b2, ...) with b1 <= a2; got {part}.")
        self.dt_rtol, self.min_samples, self.part = dt_rtol, min_samples, part
        self.load_report: dict[str, int | float | list[list[int]]] | None = None

    def with_part(self, part: Sequence[float]) -> IACRecording:
        """This log, parsed the same way, with another ``part`` (see the class docstring)."""
        return IACRecording(self.path, self.min_speed, self.align, self.dt, self.dt_rtol, self.min_samples, part)

    def rest(self) -> IACRecording:
        """This log with the rest of the gated stretch: the blocks ``part`` leaves out (e.g. a split's validation).

        Raises:
            ValueError: if ``part`` keeps the whole stretch.
        """
        edges = (0.0, *self.part, 1.0)
        rest = [v for a, b in zip(edges[0::2], edges[1::2]) if a < b for v in (a, b)]
        if not rest:
            raise ValueError(f"part {self.part} keeps the whole stretch; there is no rest to validate on. Give the "
                             "validation part explicitly.")
        return self.with_part(rest)

    def record(self) -> Recording:
        """Read, gate, map the pedals, align the inputs, keep ``part`` and validate (see the class docstring)."""
        raw = read_csv(self.path)
        c = self.COLUMNS
        _require(raw, list(c.values()), self.path)
        col = {k: raw[v] for k, v in c.items()}
        moving = np.abs(col["vx"]) >= self.min_speed
        if not moving.any():
            raise ValueError(f"{self.path} has no row with |vx| >= {self.min_speed} m/s; lower min_speed.")
        start = int(np.argmax(moving))
        stops = np.flatnonzero(np.abs(col["vx"][start:]) < self.min_speed)  # a NaN row is dropped, not a stop
        stop = start + int(stops[0]) if stops.size else len(moving)
        pedal = np.where(col["brake"] > 0, -col["brake"] / IAC_BRAKE_KPA, col["throttle"] / 100.0)
        u = np.column_stack([col["delta"], pedal])
        shift = 1 if self.align == "next" else 0
        length = stop - shift - start
        blocks = [(start + int(a * length), start + int(b * length)) for a, b in zip(self.part[0::2], self.part[1::2])]
        rows = np.concatenate([np.arange(first, last) for first, last in blocks])
        x = np.column_stack([col["vx"], col["vy"], col["omega"]])
        rec, report = recording_from_columns(col["time"][rows], u[rows + shift], x[rows][:, [0, 2]], x[rows], self.dt,
                                             self.dt_rtol, self.min_samples, self.path)
        self.load_report = {**report, "first_row": blocks[0][0], "last_row": blocks[-1][1] - 1,
                            "blocks": [[first, last - 1] for first, last in blocks]}
        return rec

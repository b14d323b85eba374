"""The data module that streams recorded logs (CSV, NPZ, MAT) to the jet-matching trainer.

``torch-ude fit --config configs/NAME.yaml`` with ``data.class_path:
torch_ude.training.RecordedDataModule`` trains on files instead of a simulated plant. The
training files are read and validated once (`torch_ude.recorded.read_log`: rejected rows
counted, gaps split segments, each segment resampled onto the nominal grid), joined into
one stream (each segment of each file its own stream segment, so no window straddles a
gap or two files), and handed to the trainer in the same chunks as a live stream
(``{"y", "ticks", "segment", "replay"}``): calibration, gates and reservoir run unchanged.
States and inputs travel as channels (states first), so the inputs' SG jets come from the
same windows (`torch_ude.stream`). The validation files are never trained on: the
validation metrics are prediction errors on them (`torch_ude.prediction`).

Position-only logs (an encoder and no tachometer): ``data.states`` names the positions only
and ``data.velocity_from_position: {half_width: M, order: P}`` derives each velocity by a
centred SG derivative of its position at the nominal rate (`torch_ude.position_only`); from
then on the training and validation logs hold the full state ``(q, qdot_hat)`` and every
consumer (stream, baseline, prediction errors) reads them unchanged.
"""
from __future__ import annotations

import importlib
import math
from collections.abc import Iterator, Sequence

import lightning as L
import numpy as np
import torch
from matplotlib.figure import Figure
from torch.utils.data import DataLoader, IterableDataset

from ..position_only import VelocityFromPosition, velocity_name, with_velocities
from ..input_map import check_periodic
from ..prediction import prediction_errors
from ..recorded import RecordedLog, read_log
from ..systems.base import System, VectorField
from ..systems.controlled import ControlledField
from .data import run_seed

__all__ = ["RecordedDataModule", "RecordedPlant"]


class RecordedPlant(System):
    """A recorded machine as the trainer's plant: the known model and the channel names, no truth.

    It lets every trainer record and export a run on logs as for a simulated plant
    (``field.json`` names the known model and the channels); what needs the true field
    (simulation, field error) raises.

    Args:
        known: the known model (a `ControlledField` with inputs, or a `VectorField`), or
            its spec ``{"class_path": ..., "init_args": ...}``.
        states: the state channel names.
        inputs: the input channel names.
        periodic: the state channels that are angles in rad (names from ``states``); None
            takes the known model's declaration (its ``periodic`` indices, none if it has none).
        invariant: the state channels the dynamics do not depend on (the residual does not
            read them); None takes the known model's ``invariant``.
    """

    cases = ("RECORDED",)

    def __init__(self, known: ControlledField | VectorField | dict, states: Sequence[str],
                 inputs: Sequence[str] = (), periodic: Sequence[str] | None = None,
                 invariant: Sequence[str] | None = None) -> None:
        if isinstance(known, dict):
            module, _, name = str(known.get("class_path")).rpartition(".")
            known = getattr(importlib.import_module(module), name)(**known.get("init_args", {}))
        if not isinstance(known, (ControlledField, VectorField)):
            raise TypeError(f"known must be a ControlledField or VectorField (class_path in YAML); got "
                            f"{type(known).__name__}.")
        n_u = known.n_inputs if isinstance(known, ControlledField) else 0
        if len(states) != known.n_states or len(inputs) != n_u:
            raise ValueError(f"the known model {type(known).__name__} has {known.n_states} states and {n_u} inputs; "
                             f"the config names {len(states)} state columns {list(states)} and {len(inputs)} input "
                             f"columns {list(inputs)}.")
        self.known = known
        self.state_names, self.input_names = tuple(states), tuple(inputs)
        self.periodic = self._indices(periodic, "periodic")
        self.invariant = self._indices(invariant, "invariant")

    def _indices(self, names: Sequence[str] | None, what: str) -> tuple[int, ...]:
        """The state indices of ``names`` (None: the known model's ``what`` declaration), validated."""
        if names is None:
            return check_periodic(tuple(getattr(self.known, what, ())), len(self.state_names),
                                  f"the known model's {what}")
        if isinstance(names, str) or any(name not in self.state_names for name in names):
            raise ValueError(f"data.{what} must list state columns of data.states {list(self.state_names)}; got "
                             f"{names!r}.")
        return check_periodic([self.state_names.index(name) for name in names], len(self.state_names), f"data.{what}")

    def true_field(self) -> VectorField:
        """Raises: a recorded machine has no known true field."""
        raise RuntimeError("a recorded log has no true field; evaluate with prediction errors "
                           "(torch_ude.prediction) instead of the field error.")

    def build_known_field(self, case: str) -> ControlledField | VectorField:
        """The known model (the one case ``"RECORDED"``)."""
        return self.known

    def initial_state(self) -> np.ndarray:
        """Raises: a recorded log is not simulated."""
        raise RuntimeError("a recorded log is not simulated; it has no initial state to draw.")

    def reexcite(self, rng: np.random.Generator) -> np.ndarray:
        """Raises: a recorded log is not simulated."""
        raise RuntimeError("a recorded log is not simulated; it is not re-excited.")

    def damping_terms(self, case: str) -> tuple[tuple[int, int, float], ...]:
        """None known."""
        return ()

    def init_args(self) -> dict:
        """The known model's spec and the channel names."""
        return {"known": self.known.spec() if hasattr(self.known, "spec") else repr(self.known),
                "states": list(self.state_names), "inputs": list(self.input_names),
                "periodic": [self.state_names[i] for i in self.periodic],
                "invariant": [self.state_names[i] for i in self.invariant]}


class _Replay(IterableDataset):
    """Yields the log in chunks, then empty ``replay`` chunks forever."""

    def __init__(self, dm: RecordedDataModule) -> None:
        self.dm = dm

    def __iter__(self) -> Iterator[dict]:
        while True:
            yield self.dm.next_chunk()


class RecordedDataModule(L.LightningDataModule):
    """Streams recorded logs at their nominal rate, as a live sensor would.

    Args:
        known: the known model ``f_known(x, u)`` (YAML: ``class_path`` and ``init_args``),
            e.g. `torch_ude.systems.TorquePendulumModel`.
        files: the training logs (.csv, .npz, .mat); streamed one after the other.
        val_files: the validation logs (other files), scored by prediction errors.
        time: the time column (s); null for files without one (sample vectors), with ``file_rate``.
        states: the state columns, in the known model's order; with
            ``velocity_from_position`` the position columns only (the known model's first
            half of the state).
        inputs: the input columns, in the known model's order.
        fs: the nominal rate in Hz; every file is resampled onto it, at any rate (``antialias``).
        train_rate: training ticks per second; ``fs / train_rate`` must be an integer.
        max_gap: the longest step bridged inside a log, in s (None: 5.5 nominal steps).
        horizons: open-loop prediction horizons of the validation metrics, in s.
        seed: initial-weight and sampling seed; None uses the run seed.
        velocity_from_position: derive the velocities from the positions
            (`torch_ude.position_only.VelocityFromPosition`) for a position-only log; None
            (default) reads every state from the file.
        periodic: the state columns that are angles in rad (`RecordedPlant`); None (default)
            takes the known model's declaration, ``[]`` declares none.
        invariant: the state columns the residual does not read (`RecordedPlant`); None
            (default) takes the known model's declaration, ``[]`` declares none.
        antialias: how files at other rates than ``fs`` are read (`torch_ude.recorded.read_log`):
            ``"other_rates"`` (default) reads a file at ``k * fs`` by interpolation as before (no filter: its
            noise stays white for the estimator) and low-pass filters any other faster file before it is
            decimated; ``true`` filters every faster file; ``false`` refuses rates other than ``k * fs``.
            Files slower than ``fs`` are interpolated, with a warning when many samples are filled in.
        file_rate: the rate in Hz the rows of files without a time column were recorded at (``time: null``).

    Raises:
        TypeError, ValueError, FileNotFoundError: for a bad setting or a bad file, here,
            before any training (`torch_ude.recorded.read_log`).
    """

    def __init__(self, known: ControlledField | VectorField, files: Sequence[str], val_files: Sequence[str] = (),
                 time: str | None = "time", states: Sequence[str] = ("position", "velocity"),
                 inputs: Sequence[str] = (), fs: float = 100.0, train_rate: float = 25.0,
                 max_gap: float | None = None, horizons: Sequence[float] = (1.0, 5.0),
                 seed: int | None = None, velocity_from_position: VelocityFromPosition | None = None,
                 periodic: Sequence[str] | None = None, invariant: Sequence[str] | None = None,
                 antialias: bool | str = "other_rates", file_rate: float | None = None) -> None:
        super().__init__()
        if antialias not in (False, True, "other_rates"):
            raise ValueError(f"data.antialias must be other_rates (the default), true or false; got {antialias!r}.")
        self.antialias, self.file_rate = antialias, file_rate
        if velocity_from_position is not None:
            if not isinstance(velocity_from_position, VelocityFromPosition):
                raise TypeError(f"velocity_from_position must be a VelocityFromPosition ({{half_width, order}} in "
                                f"YAML) or null; got {type(velocity_from_position).__name__}.")
            velocity_from_position.validate()
        self.velocity_from_position = velocity_from_position
        derived = [velocity_name(c) for c in states] if velocity_from_position is not None else []
        try:
            self.system = RecordedPlant(known, [*states, *derived], inputs, periodic, invariant)
        except ValueError as err:
            if velocity_from_position is None:
                raise
            raise ValueError(f"{err} With velocity_from_position, data.states names the positions only (half of the "
                             f"known model's states); their velocities {derived} are derived.") from None
        self.case = "RECORDED"
        if isinstance(files, str) or not files:
            raise ValueError(f"data.files must be a non-empty list of log files; got {files!r}.")
        if not (isinstance(train_rate, (int, float)) and math.isfinite(train_rate) and train_rate > 0):
            raise ValueError(f"train_rate must be positive (Hz); got {train_rate!r}.")
        chunk = fs / train_rate
        if abs(chunk - round(chunk)) > 1e-9 or round(chunk) < 1:
            raise ValueError(f"fs / train_rate must be a positive integer; got {fs} / {train_rate} = {chunk}.")
        if any(not (isinstance(h, (int, float)) and h > 0) for h in horizons):
            raise ValueError(f"horizons must be positive durations in s; got {list(horizons)}.")
        self.files, self.val_files = [str(f) for f in files], [str(f) for f in val_files]
        self.columns = {"time": time, "states": list(states), "inputs": list(inputs)}
        self.fs, self.train_rate, self.max_gap = float(fs), float(train_rate), max_gap
        self.chunk, self.horizons, self._seed = int(round(chunk)), tuple(float(h) for h in horizons), seed
        self.train_logs = [self._read(f) for f in self.files]
        self.val_logs = [self._read(f) for f in self.val_files]
        self._y = torch.as_tensor(np.concatenate([s for log in self.train_logs for s in log.segments]))
        self._segment = torch.cat([torch.full((s.shape[0],), i, dtype=torch.int64) for i, s in
                                   enumerate(s for log in self.train_logs for s in log.segments)])
        self.total_ticks = int(self._y.shape[0])
        self.duration = self.total_ticks / self.fs
        self._tick = 0

    def _read(self, path: str) -> RecordedLog:
        log = self.read_as_logged(path)
        return log if self.velocity_from_position is None else with_velocities(log, self.velocity_from_position)

    def read_as_logged(self, path: str) -> RecordedLog:
        """The log at ``path`` read with this module's columns at ``fs``, before ``velocity_from_position``
        derives any velocity (what a device with position sensors receives; float64)."""
        return read_log(path, self.columns["time"], self.columns["states"], self.columns["inputs"], self.fs,
                        self.max_gap, antialias=self.antialias, file_rate=self.file_rate)

    @property
    def seed(self) -> int:
        """The run seed unless set explicitly."""
        return run_seed() if self._seed is None else int(self._seed)

    def stream_length(self) -> tuple[str, str]:
        """How long the training stream is and how to lengthen it, in this module's settings (for the
        trainer's messages; a recorded log has no ``data.duration``).

        Returns:
            ``(length, fix)``: the seconds the training logs hold at ``data.fs`` (after the trimming
            of ``velocity_from_position``), and the settings that make the stream longer.
        """
        trimmed = sum(log.report.trimmed for log in self.train_logs if log.report is not None)
        length = (f"the training logs data.files hold {self.duration:g} s at data.fs = {self.fs:g} Hz" +
                  (f" after velocity_from_position trimmed {trimmed} samples at segment ends" if trimmed else ""))
        fix = "add training logs to data.files" + (
            ", lower data.velocity_from_position.half_width" if self.velocity_from_position is not None else "")
        return length, fix

    @property
    def true_sigma(self) -> None:
        """A recorded log has no known noise level."""
        return None

    @property
    def derived_states(self) -> tuple[int, ...]:
        """The state channels derived from others by a filter: the velocities of position-only logs
        (`torch_ude.position_only.with_velocities` appends them after the positions), else none."""
        if self.velocity_from_position is None:
            return ()
        n = self.system.n_states
        return tuple(range(n // 2, n))

    @property
    def live(self) -> bool:
        """True while log samples remain."""
        return self._tick < self.total_ticks

    def config(self) -> dict:
        """The data settings and what reading the files found (recorded in the run's outputs)."""
        return {"system": self.system, "files": self.files, "val_files": self.val_files, **self.columns,
                "fs": self.fs, "train_rate": self.train_rate, "max_gap": self.max_gap, "antialias": self.antialias,
                "file_rate": self.file_rate,
                "seed": self.seed,
                "velocity_from_position": self.velocity_from_position,
                "reports": [log.report for log in self.train_logs + self.val_logs]}

    def next_chunk(self) -> dict:
        """The next ``fs / train_rate`` samples (states then inputs), or an empty replay chunk."""
        k = min(self.chunk, self.total_ticks - self._tick)
        lo, hi = self._tick, self._tick + k
        self._tick = hi
        return {"y": self._y[lo:hi], "ticks": torch.arange(lo, hi), "segment": self._segment[lo:hi],
                "replay": k == 0}

    # ----- evaluation ---------------------------------------------------------------------------
    eval_keys = ("one_step_nrmse", "open_loop_nrmse")
    #: a recorded machine: the trust envelope is on by default (`torch_ude.training.JetMatchingModule`)
    recorded = True

    def held_out_errors(self, field) -> dict:
        """Prediction errors of ``field`` on the validation logs (the training logs when there are
        none), with ``"scored_on"`` saying which: the residual check's evidence."""
        out = prediction_errors(field, self.val_logs or self.train_logs, self.horizons, periodic=self.system.periodic)
        out["scored_on"] = "the validation files" if self.val_logs else "the training files (no validation files)"
        return out

    def evaluate(self, field, states: dict | None = None) -> dict:
        """Prediction errors of ``field`` on the validation logs (the training logs without any),
        see `torch_ude.prediction.prediction_errors`; the field-error keys are None (no truth)."""
        logs = self.val_logs or self.train_logs
        out = prediction_errors(field, logs, self.horizons, periodic=self.system.periodic)
        out.update({"e_field": None, "e_field_visited": None, "c_hat": None,
                    "evaluated_on": "val_files" if self.val_logs else "files"})
        return out

    def summary(self, metrics: dict) -> str:
        """One line of the run's closing message."""
        where = "validation" if self.val_logs else "training-log"
        line = f"{where} one-step NRMSE = {metrics['one_step_nrmse']:.4f}"
        for h in self.horizons:
            value = metrics.get(f"open_loop_{h:g}s_nrmse")
            line += f", {h:g} s open-loop NRMSE = " + ("n/a (longer than every log)" if value is None else f"{value:.4f}")
        return line

    def figure(self, field) -> Figure | None:
        """No residual parity plot without a true field."""
        return None

    # ----- loaders ------------------------------------------------------------------------------
    def train_dataloader(self) -> DataLoader:
        """The log in chunks, then replay chunks (stop with ``trainer.max_steps``)."""
        return DataLoader(_Replay(self), batch_size=None, num_workers=0)

    def val_dataloader(self) -> DataLoader:
        """One placeholder batch: the module evaluates on the validation logs."""
        return DataLoader([{}], batch_size=None)

    def test_dataloader(self) -> DataLoader:
        """Same as the validation loader."""
        return self.val_dataloader()

    def state_dict(self) -> dict:
        """The stream position (for exact resumption)."""
        return {"tick": self._tick}

    def load_state_dict(self, state: dict) -> None:
        """Restore from `state_dict`."""
        self._tick = int(state["tick"])

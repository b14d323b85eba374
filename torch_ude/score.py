"""``torch-ude score``: a trained model's prediction errors on any recorded logs, per file and pooled.

    torch-ude score RUN_OR_FIELD --files A.csv B.mat ... [--horizons 0.5 1 5] [--per-channel]
                    [--config CONFIG] [--out DIR] [--tensorboard]

``RUN_OR_FIELD`` is a run folder of ``torch-ude fit`` (jet matching, the RK4 baseline, or PEM-MHE on
recorded logs: ``configs/mhe_dfki_pendulum.yaml``, read on its MHE rate unless ``--fs`` says otherwise) or its
``field.pt`` (`torch_ude.export.load_field`). The files are read with the columns, the nominal rate
``fs`` and the velocity derivation the model was trained with (recorded in its ``field.json``;
``--time``, ``--states``, ``--inputs``, ``--fs`` name them for a model trained on a simulated
plant; ``--file-rate`` reads files without a time column, their rows at that rate), at any rate: a file at an integer multiple of ``fs`` is read as training reads its files
(so a run's validation file scores what its ``metrics.json`` says), a file at any other rate is
low-pass filtered before it is decimated to ``fs`` (``--antialias``: every faster file), a slower
one interpolated (`torch_ude.recorded.read_log` with ``antialias``). Each file is scored
by `torch_ude.prediction.prediction_errors`: the one-step NRMSE and the open-loop NRMSE at every
horizon (angles of the plant's periodic states compared on the circle) and the share of its samples
outside the model's trust envelope; the pooled row scores all files together. Rows with NaN, Inf or a
value more than `PLAUSIBLE_RMS` training RMS from zero (a corrupted sample) are flagged, counted in
the table and left out. A horizon longer
than every segment of a file is reported as too short for it, never dropped silently.

A PEM-MHE run folder is also scored the way its users judge it, by free run (output error,
`pem_free_run`): its estimator is rebuilt from the run's ``config.yaml``
(`mhe.training.config.load_experiment`) with the trained parameters and arrival cost of the run's newest
checkpoint (`torch_ude.training.run_folder.newest_checkpoint`; the run writes ``last.ckpt`` again at its end,
so it holds the model of ``field.pt``, a free-run refinement included); every file is read on the model's own
grid (the MHE rate, whatever ``--fs`` says) and cut into back-to-back windows of each horizon (at least one
step; the tail shorter than one window left out); each window is simulated from its own initial state by
`mhe.outer.free_run.simulate_free_run` with the configured input hold, the state estimated from that window's
measured outputs with the parameters fixed (`mhe.outer.free_run.estimate_initial_states`: the initial state of least
free-run error, residuals weighted by the MHE's ``R``; a gray-box's network written out with its weights and
trust envelope, which comes from the checkpoint or, where that lacks it, from ``field.json``). Its NRMSE per
measured output is that of the open-loop columns (`torch_ude.prediction.nrmse`: the RMSE over every sample
after each window's start, over the output's RMS, angles on the circle; the mean over outputs in
``free_run_<h>s_nrmse``); the table adds one ``free <h> s`` column per horizon, ``score.json`` the keys per
file and pooled. The state a window starts from is fitted to that window's own outputs there; the ``mhe <h> s``
columns (``mhe_free_run_<h>s_nrmse``) start each window instead from the MHE's own estimate, from the ``N``
samples before it (the windows start ``N`` samples into each segment), as a user runs the model online: nothing
the window predicts is read, so these are the honest forecast errors (a window whose MHE fails is left out and
counted, ``mhe_free_run_<h>s_failed``). A file with no window of a horizon is ``too short`` for it. Jet-matching
and RK4 runs, and a bare ``field.pt``, have no such columns; a PEM-MHE run whose estimator cannot be rebuilt (no checkpoint, its
config's training files relative to another directory, ...) is scored without them, the reason printed and in
``free_run_skipped``.

Outputs (in ``--out``, default ``RUN/score``): ``score.json`` (settings, per-file and pooled
errors, what reading each file found), one figure per file (``<file stem>.png``: the open-loop
rollouts at the shortest horizon the file holds against the measured states, the samples outside
the envelope shaded), and with ``--tensorboard`` the same figures and numbers as TensorBoard events
under ``OUT/tensorboard``.

It refuses, in one line (``torch-ude: error: ...``, exit status 2), what it cannot score honestly:
a run with no trained model (its ``metrics.json`` says ``"failed"`` or ``"running"``), a
``field.pt`` whose network does not match its ``field.json``, and, with ``--config`` (the config
the user means the model to be), a model of another plant, case, known model, state or input
layout, or network shape (a PEM-MHE model: another trainer, physics, identified parameters, column layout or
residual); also column names whose count differs from the model's states or inputs.
"""
from __future__ import annotations

import argparse
import importlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
import yaml
from torch import Tensor
from matplotlib.figure import Figure

from .export import LoadedField, load_field
from .atomic import write_text_atomic
from .position_only import VelocityFromPosition, velocity_name, with_velocities
from .prediction import nrmse, open_loop_rollouts, prediction_errors
from .recorded import RecordedLog, read_log

if TYPE_CHECKING:  # CasADi loads only for a PEM-MHE run
    from mhe import MovingHorizonEstimator

__all__ = ["LogColumns", "columns_of", "check_against_config", "check_network", "read_scored_log", "score_logs",
           "score_table", "rollout_figure", "comparison_figure", "score", "main", "plausible_limits", "class_of",
           "SCORE_FILE", "DEFAULT_HORIZONS", "PLAUSIBLE_RMS", "pem_free_run", "pem_run_estimator"]

SCORE_FILE = "score.json"
#: A value more than this many training RMS of its channel from zero is implausible (a corrupted sample):
#: its row is flagged, counted and left out. Real data beyond the training range is scored (and counted
#: outside the envelope); only values no sensor of the machine could give are removed.
PLAUSIBLE_RMS = 1000.0
#: Open-loop horizons in s when ``--horizons`` is not given (the recorded-log trainers' default).
DEFAULT_HORIZONS = (1.0, 5.0)


@dataclass
class LogColumns:
    """How to read a log for a model: the columns, the model's grid and the velocity derivation.

    Attributes:
        time: the time column (s).
        states: the state columns (the positions only with ``velocity_from_position``).
        inputs: the input columns.
        fs: the model's nominal rate in Hz (every file is resampled onto it).
        max_gap: the longest step bridged in s, or None (`torch_ude.recorded.read_log`).
        velocity_from_position: the velocity derivation of a position-only log, or None.
        file_rate: the rows' rate in Hz of logs without the time column, or None.
    """

    time: str | None
    states: list[str]
    inputs: list[str]
    fs: float
    max_gap: float | None = None
    velocity_from_position: VelocityFromPosition | None = None
    file_rate: float | None = None


def _run_data(field: LoadedField) -> dict:
    """The data settings the model's run recorded (``field.json`` -> extra -> config -> data; for a PEM-MHE
    model the columns and rate of its recording of logs, `mhe.problems.torque_pendulum.LogsRecording`, and the velocity's
    window of a position-only one, `mhe.problems.emps.PositionLogsRecording`), or {}."""
    config = (field.sidecar.get("extra") or {}).get("config", {})
    if field.separate_inputs:
        recording = (config.get("problem") or {}).get("recording")
        if not isinstance(recording, dict) or "states" not in recording:
            return {}
        return {"time": recording.get("time"), "states": recording["states"], "inputs": recording.get("inputs"),
                "fs": recording.get("rate"), "max_gap": recording.get("max_gap"),
                "velocity_from_position": recording.get("velocity_from_position")}
    data = config.get("data", {})
    return data if isinstance(data, dict) else {}


def columns_of(field: LoadedField, time: str | None = None, states: Sequence[str] | None = None,
               inputs: Sequence[str] | None = None, fs: float | None = None,
               file_rate: float | None = None) -> LogColumns:
    """The columns and grid to read logs with for ``field``: the run's recorded settings, replaced by
    any given here.

    Raises:
        ValueError: when a setting is neither recorded nor given (a model of a simulated plant: name
            ``--time``, ``--states``, ``--fs``), or when the given columns do not match the model's
            number of states or inputs.
    """
    data = _run_data(field)
    if field.separate_inputs and not data and (time is None or states is None or fs is None):
        recording = ((field.sidecar.get("extra") or {}).get("config", {}).get("problem") or {}).get("recording")
        kind = recording.get("class") if isinstance(recording, dict) else recording
        raise ValueError(f"this PEM-MHE model was trained on a recording of class {kind}, which maps its file's columns "
                         f"itself (e.g. the pedal from throttle and brake): score it with torch-ude validate --config "
                         f"ITS_CONFIG --ckpt_path RUN/checkpoints/last.ckpt --data.problem.recording.init_args.path "
                         f"FILE, or name plain log columns with --time --states --inputs --fs (its states are "
                         f"{list(field.state_names)}, inputs {list(field.input_names)}).")
    vfp = data.get("velocity_from_position")
    vfp = VelocityFromPosition(**vfp) if isinstance(vfp, dict) else None
    file_rate = file_rate if file_rate is not None else data.get("file_rate")
    time = time or data.get("time")
    states = list(states) if states is not None else data.get("states")
    inputs = list(inputs) if inputs is not None else data.get("inputs", list(field.input_names))
    fs = fs if fs is not None else data.get("fs")
    missing = [f"--{name}" for name, value in (("time", time if file_rate is None else "-"), ("states", states),
                                                ("fs", fs)) if value is None]
    if missing:
        raise ValueError(f"the model's field.json records no log columns or rate (it was trained on a simulated plant "
                         f"or by an older torch-ude); name them with {' '.join(missing)} (its states are "
                         f"{list(field.state_names)}).")
    if not (isinstance(fs, (int, float)) and math.isfinite(fs) and fs > 0):
        raise ValueError(f"--fs (the model's grid in Hz) must be a positive number; got {fs!r}.")
    n_read = field.n_states // 2 if vfp is not None else field.n_states
    if len(states) != n_read or len(inputs) != field.n_inputs:
        raise ValueError(f"the model reads {n_read} state column(s) and {field.n_inputs} input column(s) "
                         f"({list(field.state_names)}, inputs {list(field.input_names)}); got states {list(states)} "
                         f"and inputs {list(inputs)}: name columns of the model's layout with --states/--inputs.")
    return LogColumns(None if time is None else str(time), list(states), list(inputs), float(fs), data.get("max_gap"),
                      vfp, file_rate)


def check_network(field: LoadedField) -> None:
    """Check that ``field.pt``'s network has the layer sizes its ``field.json`` records.

    Raises:
        ValueError: for a ``field.pt`` of another network (e.g. copied beside another run's sidecar).
    """
    weights = sorted((k, v) for k, v in field.program.state_dict().items() if ".mlp.weight" in k)
    widths = [int(v.shape[0]) for _, v in sorted(weights, key=lambda kv: int(kv[0].rsplit("weight", 1)[1]))]
    recorded = list(field.sidecar.get("layer_sizes") or field.sidecar.get("residual_sizes") or [])[1:]
    if widths != recorded:
        raise ValueError(f"field.pt holds a network with layer widths {widths} but its field.json records "
                         f"{recorded}: the two files come from different runs; export the run again (torch-ude fit).")


def class_of(spec: object) -> type | None:
    """The class a ``{"class_path": ...}`` spec names (None when it names none that imports)."""
    path = spec.get("class_path") if isinstance(spec, dict) else None
    if not isinstance(path, str) or "." not in path:
        return None
    module, _, name = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None


def check_against_config(field: LoadedField, config: str | Path) -> None:
    """Refuse a model that is not the one ``config`` describes (module doc).

    Compared: the plant (simulated: its class and case; recorded: the known model's class), the state
    and input columns, and the network's hidden widths, linear term and input-affine form
    (``model.init_args``; absent keys take the trainers' defaults: ``[16, 16]``, off, off).

    Raises:
        ValueError: naming the first setting that differs, the model's value and the config's.
    """
    path = Path(config)
    if not path.is_file():
        raise FileNotFoundError(f"the config {config} given as --config does not exist; pass the YAML the model was "
                                f"trained with (configs/...).")
    content = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    data = (content.get("data") or {}).get("init_args") or {}
    model = (content.get("model") or {}).get("init_args") or {}
    plant = field.sidecar.get("plant") or {}
    mine = plant.get("init_args") or {}
    fix = f"score the model with the config it was trained with, or train one with {config}"

    def refuse(what: str, ours: object, theirs: object) -> None:
        raise ValueError(f"the model is not the one {config} describes: its {what} is {ours!r}, the config's is "
                         f"{theirs!r}; {fix}.")

    problem = data.get("problem")
    if field.separate_inputs or isinstance(problem, dict):
        if not (field.separate_inputs and isinstance(problem, dict)):
            refuse("trainer", "PEM-MHE" if field.separate_inputs else (field.sidecar.get("extra") or {}).get("trainer"),
                   "PEM-MHE" if isinstance(problem, dict) else content.get("model", {}).get("class_path"))
        _check_pem_config(field, problem, refuse)
        return

    if "known" in data:  # a recorded log: the known model's class and the columns
        known, ours = class_of(data["known"]), class_of(mine.get("known"))
        if known is not ours:
            refuse("known model", (mine.get("known") or {}).get("class_path"), data["known"].get("class_path"))
        states = list(data.get("states", ["position", "velocity"]))
        if data.get("velocity_from_position") is not None:
            states += [velocity_name(c) for c in states]
        if states != list(mine.get("states", [])):
            refuse("state layout", mine.get("states"), states)
        if list(data.get("inputs", [])) != list(mine.get("inputs", [])):
            refuse("input layout", mine.get("inputs"), data.get("inputs"))
    elif "system" in data:  # a simulated plant: its class and case
        if class_of(data["system"]) is not class_of(plant):
            refuse("plant", plant.get("class_path"), data["system"].get("class_path"))
        case = str(data.get("case", "A")).upper()
        if case != str(field.sidecar.get("case", "")).upper():
            refuse("case", field.sidecar.get("case"), case)
    hidden = list(model.get("hidden", [16, 16]))
    if hidden != list(field.sidecar.get("layer_sizes", []))[1:-1]:
        refuse("network's hidden widths (model.hidden)", list(field.sidecar["layer_sizes"])[1:-1], hidden)
    for key in ("linear", "input_affine"):
        if bool(model.get(key, False)) != bool(field.sidecar.get(key, False)):
            refuse(f"model.{key}", bool(field.sidecar.get(key, False)), bool(model.get(key, False)))


def _check_pem_config(field: LoadedField, problem: dict, refuse) -> None:
    """`check_against_config` for a PEM-MHE model and a PEM-MHE config's ``data.init_args.problem``: the physics
    class and its identified parameters, the recording's state and input columns, the residual's width."""
    physics = problem.get("physics") or {}
    name = str(physics.get("class_path", "")).rpartition(".")[2] or None
    if name != field.sidecar.get("physics"):
        refuse("physics", field.sidecar.get("physics"), name)
    identify = list((physics.get("init_args") or {}).get("identify", []))
    if identify != list(field.sidecar.get("identified", [])):
        refuse("identified parameters", field.sidecar.get("identified"), identify)
    ran = ((field.sidecar.get("extra") or {}).get("config", {}).get("problem") or {}).get("recording") or {}
    recording = (problem.get("recording") or {}).get("init_args") or {}
    for key in ("states", "inputs"):
        if key in recording and list(recording[key]) != list(ran.get(key, [])):
            refuse(f"{key[:-1]} layout", ran.get(key), recording[key])
    width = (problem.get("residual") or {}).get("width")
    sizes = field.sidecar.get("residual_sizes")
    if (width is None) != (sizes is None) or (sizes is not None and width != sizes[1]):
        refuse("residual (problem.residual.width)", None if sizes is None else sizes[1], width)


def plausible_limits(field: LoadedField, columns: LogColumns) -> list[float]:
    """The largest plausible absolute value of each column read from a file (its states, then its inputs):
    `PLAUSIBLE_RMS` times the channel's RMS in the training data (the field's scales ``in_scale``,
    ``input_scale``); a row beyond one (a corrupted sample) is flagged, counted and left out. A model that
    records no scales (a PEM-MHE model) has no limit: only its NaN and Inf rows are left out."""
    if "in_scale" not in field.sidecar:
        return [math.inf] * (len(columns.states) + len(columns.inputs))
    scale = list(field.sidecar["in_scale"])[: len(columns.states)] + list(field.sidecar.get("input_scale", []))
    return [PLAUSIBLE_RMS * abs(float(v)) if v else math.inf for v in scale]


def read_scored_log(path: str | Path, columns: LogColumns, antialias: bool = False,
                    limits: Sequence[float] | None = None) -> RecordedLog:
    """One log on the model's grid, at any file rate, with derived velocities where the model was trained so.

    A file at an integer multiple of the grid's rate is read exactly as training reads its files (so a
    run's own validation file scores what its ``metrics.json`` says), a file at any other rate is
    low-pass filtered before decimation (`torch_ude.recorded.read_log` with ``antialias="other_rates"``);
    ``antialias`` True filters every faster file. Rows beyond ``limits`` (`plausible_limits`) are flagged,
    counted and left out.
    """
    log = read_log(path, columns.time, columns.states, columns.inputs, columns.fs, columns.max_gap,
                   antialias=True if antialias else "other_rates", limits=limits, file_rate=columns.file_rate)
    return log if columns.velocity_from_position is None else with_velocities(log, columns.velocity_from_position)


def _periodic(field: LoadedField) -> tuple[int, ...]:
    """The plant's periodic states (compared on the circle): the recorded plant's declaration, else the
    states the field reads as (sin, cos)."""
    names = ((field.sidecar.get("plant") or {}).get("init_args") or {}).get("periodic")
    if isinstance(names, list) and all(n in field.state_names for n in names):
        return tuple(field.state_names.index(n) for n in names)
    return tuple(field.sidecar.get("periodic", ()))


def score_logs(field, logs: Sequence[RecordedLog], horizons: Sequence[float],
               periodic: Sequence[int]) -> dict:
    """Prediction errors of ``field`` per log and pooled (`torch_ude.prediction.prediction_errors`).

    Args:
        field: a `LoadedField` or `torch_ude.field.HybridField`.
        logs: logs on the field's grid, all with its channels.
        horizons: open-loop horizons in s.
        periodic: the state indices compared on the circle.

    Returns:
        ``{"files": [per log: its report, flagged_rows (rows left out: NaN, Inf or implausible values),
        duration_s, the errors, too_short: the horizons longer than every segment], "pooled": the errors of
        all logs together}``.
    """
    files = []
    for log in logs:
        errors = prediction_errors(field, [log], horizons, periodic=periodic)
        longest = max(s.shape[0] for s in log.segments) / log.fs
        too_short = [h for h in horizons if errors[f"open_loop_{h:g}s_nrmse"] is None]
        flagged = log.report.rejected_nonfinite + log.report.rejected_implausible if log.report else 0
        files.append({"file": log.report.file if log.report else None, "report": log.report, "flagged_rows": flagged,
                      "duration_s": log.samples / log.fs, "longest_segment_s": longest, "too_short": too_short,
                      **errors})
    pooled = prediction_errors(field, list(logs), horizons, periodic=periodic)
    pooled["too_short"] = [h for h in horizons if pooled[f"open_loop_{h:g}s_nrmse"] is None]
    return {"files": files, "pooled": pooled}


def pem_run_estimator(folder: Path, sidecar: dict | None = None) -> MovingHorizonEstimator:
    """The trained MHE (`mhe.MovingHorizonEstimator`, float64) of a PEM-MHE run folder, to score it on a recording
    of one's own (module doc): the run's newest complete checkpoint
    (`torch_ude.training.run_folder.newest_checkpoint`, under a logger's version folder or not) and the
    ``config.yaml`` beside its ``checkpoints/``; a residual's trust envelope comes from the checkpoint or, for a
    checkpoint written before the run recorded it, from ``field.json`` (``sidecar``).

    Raises:
        ValueError: for a folder without a checkpoint or without the config beside it.
    """
    from .training.run_folder import newest_checkpoint
    ckpt = newest_checkpoint(folder)
    if ckpt is None:
        raise ValueError(f"{folder} holds no checkpoint of the run")
    config = ckpt.parent.parent / "config.yaml"
    if not config.is_file():
        raise ValueError(f"no config.yaml beside {ckpt.parent}")
    import tempfile
    from mhe.training.config import load_experiment  # (CasADi: only for a PEM-MHE run)
    saved = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
    # the experiment's sections; the run-level keys the saved config adds (ckpt_path, weights_only, ...) are no fit's
    saved = {k: v for k, v in saved.items() if k in ("seed_everything", "trainer", "model", "data")}
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "config.yaml").write_text(yaml.safe_dump(saved), encoding="utf-8")
        estimator = load_experiment(Path(tmp) / "config.yaml").problem.estimator(clip_start=True)
    state = torch.load(ckpt, map_location="cpu", weights_only=True)["state_dict"]  # a user-supplied file: no code
    estimator.load_state_dict({k[len("estimator."):]: v for k, v in state.items() if k.startswith("estimator.")})
    residual, envelope = estimator.model.residual, (sidecar or {}).get("envelope")
    if residual is not None and residual.envelope is None and envelope is not None:
        residual.set_envelope(*(torch.tensor(envelope[k], dtype=torch.float64) for k in ("low", "high", "margin")))
    return estimator


def _mhe_starts(estimator, rows: Tensor, n_states: int, measured: list[int], starts: Sequence[int],
                cold_starts: int) -> tuple[Tensor, Tensor]:
    """The MHE's own estimate of the state at each of ``starts`` (row indices of ``rows``): the last state of the
    window of the ``N`` samples before it, solved as the module validates (`mhe.estimator.solver.lowest_cost_solve`,
    ``cold_starts`` cold starts per window spread over the arrival box, one where an unmeasured state's box is
    open: `mhe.estimator.solver.cold_guesses`); returns the states (S, n_x) and which windows solved (S,) bool."""
    import tempfile
    from mhe.data.windows import Windows
    from mhe.estimator.solver import WindowSolver, lowest_cost_solve
    n, bounds = estimator.settings.horizon, estimator.arrival_mean_bounds
    hidden = [j for j in range(estimator.model.n_x) if j not in estimator.model.measured]
    if any(bounds[j].lower is None or bounds[j].upper is None for j in hidden):
        cold_starts = 1
    first = torch.as_tensor(list(starts)) - n
    k = first[:, None] + torch.arange(n)[None, :]
    u, y = rows[:, n_states:], rows[:, measured]
    windows = Windows(u[k], y[k + 1], first, u[first + n])
    with tempfile.TemporaryDirectory() as build, WindowSolver(estimator, build) as solver:
        best = lowest_cost_solve(solver, windows, cold_starts)
    return best.point.x[:, -1].detach(), best.ok


def pem_free_run(estimator, logs: Sequence[RecordedLog], horizons: Sequence[float],
                 periodic: Sequence[int] = (), cold_starts: int = 3) -> dict:
    """Free-run NRMSE of a PEM-MHE model per log and pooled (module doc), from two initial states per window:

    * ``free_run_<h>s_nrmse``: back-to-back windows of each horizon (at least one step), each from the initial state
      that fits it best (`mhe.outer.free_run.estimate_initial_states`, the parameters fixed; the window's own
      outputs choose it: how a model is judged by output error);
    * ``mhe_free_run_<h>s_nrmse``: windows of the same length, starting ``N`` (the MHE horizon) samples into each
      segment, each from the MHE's own estimate of its first state from the ``N`` samples before it (`_mhe_starts`:
      nothing the window predicts is read; how a user runs the model online). Windows whose MHE fails are left
      out and counted (``mhe_free_run_<h>s_failed``).

    The NRMSE is that of the open-loop columns (`torch_ude.prediction.nrmse`: RMSE over the measured output's RMS,
    angles on the circle) over every sample after each window's start.

    Args:
        estimator: the trained `mhe.MovingHorizonEstimator`.
        logs: logs on the model's grid (``1 / model.dt``), its states then inputs.
        horizons: window lengths in s.
        periodic: the measured outputs that are angles (indices into the outputs).
        cold_starts: cold starts per MHE window (the module's ``validation_starts``), >= 1.

    Returns:
        ``{"files": [per log: {"<kind>_<h>s_nrmse": float or None, "<kind>_<h>s_nrmse_per_output": list or None,
        "mhe_free_run_<h>s_failed": int}], "pooled": the same over all logs}`` for both kinds; None where no window
        of the horizon fits (or every MHE window failed).
    """
    from mhe.outer.free_run import estimate_initial_states, simulate_free_run
    from mhe.data.recording import Recording
    model = estimator.model
    measured, n = list(model.measured), estimator.settings.horizon
    per_file = [dict() for _ in logs]
    pooled: dict = {}
    for h in horizons:
        for kind, skip in (("free_run", 0), ("mhe_free_run", n)):
            key = f"{kind}_{h:g}s_nrmse"
            predicted_all, outputs_all, failed_all = [], [], 0
            for log, entry in zip(logs, per_file):
                length = max(2, int(round(h * log.fs)) + 1)  # a start and at least one step
                cut = [(seg, a) for seg in log.segments for a in range(skip, seg.shape[0] - length + 1, length)]
                if kind == "mhe_free_run":
                    entry[f"{kind}_{h:g}s_failed"] = 0
                if not cut:
                    entry[key] = entry[key + "_per_output"] = None
                    continue
                rows = torch.as_tensor(np.concatenate([seg[a:a + length] for seg, a in cut]), dtype=torch.float64)
                y, u = rows[:, measured], rows[:, log.n_states:]
                breaks = tuple(range(length, rows.shape[0], length))
                if kind == "free_run":
                    recording = Recording(torch.zeros(rows.shape[0], 0, dtype=torch.float64), u, y, 1.0 / log.fs,
                                          breaks)
                    x0, _ = estimate_initial_states(estimator, recording)
                    ok = torch.ones(len(cut), dtype=torch.bool)
                else:
                    x0, ok = [], []
                    for seg in {id(seg): seg for seg, _ in cut}.values():  # the MHE reads the samples before a start
                        at = [a for s, a in cut if s is seg]
                        full = torch.as_tensor(seg, dtype=torch.float64)
                        states, solved = _mhe_starts(estimator, full, log.n_states, measured, at, cold_starts)
                        x0.append(states)
                        ok.append(solved)
                    x0, ok = torch.cat(x0), torch.cat(ok)
                    entry[f"{kind}_{h:g}s_failed"] = int((~ok).sum())
                    failed_all += int((~ok).sum())
                if not bool(ok.any()):
                    entry[key] = entry[key + "_per_output"] = None
                    continue
                with torch.no_grad():
                    predicted = simulate_free_run(model, x0, u, breaks).outputs
                ahead = torch.ones(rows.shape[0], dtype=torch.bool)
                ahead[::length] = False  # each window's start sample is its initial state's, not a prediction
                ahead &= ok.repeat_interleave(length)  # a window whose MHE failed has no start to predict from
                predicted_all.append(predicted[ahead])
                outputs_all.append(y[ahead])
                _, per_output = nrmse(predicted[ahead], y[ahead], periodic)
                entry[key], entry[key + "_per_output"] = float(np.mean(per_output)), per_output
            if kind == "mhe_free_run":
                pooled[f"{kind}_{h:g}s_failed"] = failed_all
            if predicted_all:
                _, per_output = nrmse(torch.cat(predicted_all), torch.cat(outputs_all), periodic)
                pooled[key], pooled[key + "_per_output"] = float(np.mean(per_output)), per_output
            else:
                pooled[key] = pooled[key + "_per_output"] = None
    return {"files": per_file, "pooled": pooled}


def _cell(value: float | None, short: bool) -> str:
    if value is None:
        return "too short" if short else "n/a"
    return f"{value:.4f}" if math.isfinite(value) else "inf"


def score_table(result: dict, horizons: Sequence[float], per_channel: bool = False,
                channels: Sequence[str] = ()) -> str:
    """The per-file table and the pooled row as text: file, rate, seconds, rows flagged (NaN, Inf or implausible
    values: left out), one-step and open-loop NRMSE per
    horizon (``too short`` where no segment of the file spans it), share outside the envelope; with
    ``per_channel`` one line per channel under each row."""
    free = [h for h in horizons if f"free_run_{h:g}s_nrmse" in result["pooled"]]
    online = [h for h in horizons if f"mhe_free_run_{h:g}s_nrmse" in result["pooled"]]
    head = (["file", "rate Hz", "s", "flagged", "one-step"] + [f"{h:g} s" for h in horizons]
            + [f"free {h:g} s" for h in free] + [f"mhe {h:g} s" for h in online] + ["outside"])
    rows = []

    def line(name: str, rate: str, seconds: str, flagged: int, errors: dict) -> None:
        out = errors.get("outside_envelope")
        rows.append([name, rate, seconds, str(flagged), _cell(errors["one_step_nrmse"], False)]
                    + [_cell(errors[f"open_loop_{h:g}s_nrmse"], True) for h in horizons]
                    + [_cell(errors[f"free_run_{h:g}s_nrmse"], True) for h in free]
                    + [_cell(errors[f"mhe_free_run_{h:g}s_nrmse"], True) for h in online]
                    + ["-" if out is None else f"{100 * out:.1f} %"])
        if per_channel:
            for i, c in enumerate(channels):
                rows.append([f"  {c}", "", "", "", _cell(errors["one_step_nrmse_per_channel"][i], False)]
                            + [_cell(None if errors[f"open_loop_{h:g}s_nrmse_per_channel"] is None else
                                     errors[f"open_loop_{h:g}s_nrmse_per_channel"][i], True) for h in horizons]
                            + [""] * (len(free) + len(online)) + [""])

    for f in result["files"]:
        report = f["report"]
        rate = f"{1.0 / report.dt_median:.1f}" if report is not None else "?"
        line(Path(f["file"]).name if f["file"] else "?", rate, f"{f['duration_s']:.1f}", f["flagged_rows"], f)
    total = sum(f["duration_s"] for f in result["files"])
    line("all files (pooled)", "", f"{total:.1f}", sum(f["flagged_rows"] for f in result["files"]), result["pooled"])
    widths = [max(len(r[j]) for r in [head, *rows]) for j in range(len(head))]
    fmt = lambda r: "  ".join(c.ljust(w) if j == 0 else c.rjust(w) for j, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    return "\n".join([fmt(head), fmt(["-" * w for w in widths]), *map(fmt, rows)])


def rollout_figure(field, log: RecordedLog, horizon: float, title: str = "") -> Figure:
    """Open-loop rollouts of ``field`` at ``horizon`` s from the measured states against the measured states,
    one panel per state, the samples outside the trust envelope shaded (backend-free `Figure`).

    Args:
        field: a `LoadedField` or `torch_ude.field.HybridField` on the log's channels.
        log: the log on the field's grid.
        horizon: the rollout length in s (each segment is cut into stretches of it).
        title: the figure's title.
    """
    n, h = log.n_states, 1.0 / log.fs
    steps = max(1, int(round(horizon * log.fs)))
    dtype = field.dtype
    has_inputs = field.n_inputs > 0

    def f(x, u):
        return field.evaluate_unchecked(x, u) if has_inputs else field.evaluate_unchecked(x)

    fig = Figure(figsize=(9.0, 2.2 * n + 0.6))
    axes = fig.subplots(n, 1, sharex=True, squeeze=False)[:, 0]
    names = log.names[:n]
    for seg, start in zip(log.segments, log.starts):
        s = torch.as_tensor(seg, dtype=dtype)
        t = start + np.arange(seg.shape[0]) * h
        rows = torch.as_tensor(seg, dtype=dtype)
        outside = field.outside(rows[:, :n], rows[:, n:] if has_inputs else None).numpy()
        rollouts = open_loop_rollouts(f, s, n, steps, h)
        for i, ax in enumerate(axes):
            ax.plot(t, seg[:, i], color="k", lw=0.8, label="measured" if start == log.starts[0] else None)
            if outside.any():
                ax.fill_between(t, 0, 1, where=outside, transform=ax.get_xaxis_transform(), color="tab:red",
                                alpha=0.15, lw=0, label="outside envelope" if start == log.starts[0] else None)
            if rollouts is not None:
                idx, traj = rollouts
                tt = np.vstack([t[idx.numpy()], np.full((1, idx.shape[1]), np.nan)]).T.reshape(-1)
                yy = np.vstack([traj[:, :, i].numpy(), np.full((1, idx.shape[1]), np.nan)]).T.reshape(-1)
                ax.plot(tt, yy, color="tab:blue", lw=1.0,
                        label=f"open loop, {horizon:g} s" if start == log.starts[0] else None)
    for ax, name in zip(axes, names):
        ax.set_ylabel(name)
    axes[0].legend(loc="upper right", fontsize=7)
    axes[-1].set_xlabel("time (s)")
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def comparison_figure(models: Mapping[str, Callable[[Tensor, Tensor], Tensor]], log: RecordedLog,
                      horizon: float = 1.0, ylabel: str | None = None) -> Figure:
    """The first measured state of ``log``'s first segment and several models' open-loop predictions over
    ``horizon`` s from the measured states, one colour per model (backend-free `Figure`).

    Args:
        models: name -> ``F(x, u)``, (B, n), (B, n_u) -> (B, n), float64 (e.g. a field's ``evaluate_unchecked``).
        log: a validation log (`torch_ude.recorded.read_log`).
        horizon: the open-loop horizon in s; a prediction starts every ``horizon``.
        ylabel: the axis label of the state; None for its column name.
    """
    seg = torch.as_tensor(log.segments[0], dtype=torch.float64)
    n, h = log.n_states, 1.0 / log.fs
    steps = int(round(horizon / h))
    t = np.arange(seg.shape[0]) * h
    fig = Figure(figsize=(9.0, 4.0))
    ax = fig.add_subplot(1, 1, 1)
    ax.plot(t, seg[:, 0].numpy(), color="k", lw=2.0, label="measured")
    for i, (name, field) in enumerate(models.items()):
        rollouts = open_loop_rollouts(field, seg, n, steps, h)
        if rollouts is None:  # the segment is shorter than the horizon: the measured state only
            break
        idx, traj = rollouts
        for b in range(idx.shape[1]):
            ax.plot(t[idx[:, b].numpy()], traj[:, b, 0].numpy(), color=f"C{i}", lw=1.0,
                    label=name if b == 0 else None)
    ax.set_xlabel("time (s)")
    ax.set_ylabel(log.names[0] if ylabel is None else ylabel)
    ax.set_title(f"{Path(log.report.file).name if log.report else 'validation'}: {horizon:g} s open-loop predictions")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one-line `ValueError`s (the console prints them, exit status 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ValueError(f"torch-ude score: {message}; see torch-ude score --help.")


def _parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="torch-ude score", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="a run folder of torch-ude fit, or its field.pt")
    ap.add_argument("--files", nargs="+", required=True, help="the logs to score (.csv, .npz, .mat), any rate")
    ap.add_argument("--horizons", nargs="+", type=float, default=list(DEFAULT_HORIZONS),
                    help="open-loop horizons in s (default 1 5)")
    ap.add_argument("--per-channel", action="store_true", help="also print the NRMSE of every state channel")
    ap.add_argument("--config", help="the training config the model should match (refused if it does not)")
    ap.add_argument("--out", help="output folder (default: RUN/score)")
    ap.add_argument("--tensorboard", action="store_true", help="also write the figures and numbers as TensorBoard "
                                                               "events under OUT/tensorboard")
    ap.add_argument("--time", help="the time column (default: the run's)")
    ap.add_argument("--states", nargs="+", help="the state columns (default: the run's)")
    ap.add_argument("--inputs", nargs="*", help="the input columns (default: the run's)")
    ap.add_argument("--fs", type=float, help="the model's grid in Hz (default: the run's data.fs)")
    ap.add_argument("--file-rate", type=float, help="files without a time column: the rate in Hz their rows were "
                                                    "recorded at (default: the run's data.file_rate)")
    ap.add_argument("--antialias", action="store_true", help="low-pass filter every file faster than the grid "
                                                             "before decimation (default: only files whose rate is "
                                                             "not a multiple of it, as training reads the others)")
    return ap


def score(model: str | Path, files: Sequence[str | Path], horizons: Sequence[float] = DEFAULT_HORIZONS,
          per_channel: bool = False, config: str | Path | None = None, out: str | Path | None = None,
          tensorboard: bool = False, time: str | None = None, states: Sequence[str] | None = None,
          inputs: Sequence[str] | None = None, fs: float | None = None, antialias: bool = False,
          file_rate: float | None = None) -> dict:
    """Score a trained model on logs (module doc): print the table, write ``score.json`` and the figures.

    Args: as the command's options (module doc); ``horizons`` in s, ``fs`` in Hz.

    Returns:
        The contents of ``score.json`` (``"files"``, ``"pooled"``, the settings), with ``"table"``.

    Raises:
        FileNotFoundError, ValueError: for a run without a trained model, a model the config does not
            describe, a file that cannot be read or a bad setting, each in one line (module doc).
    """
    if any(not (math.isfinite(h) and h > 0) for h in horizons):
        raise ValueError(f"--horizons must be positive durations in s; got {list(horizons)}.")
    if not Path(model).exists():
        raise FileNotFoundError(f"the model {model} does not exist; pass a run folder of torch-ude fit (holding "
                                f"field.pt and field.json) or its field.pt.")
    field = load_field(model)
    check_network(field)
    if config is not None:
        check_against_config(field, config)
    columns = columns_of(field, time, states, inputs, fs, file_rate)
    limits = plausible_limits(field, columns)
    logs = [read_scored_log(f, columns, antialias, limits) for f in files]
    periodic = _periodic(field)
    result = score_logs(field, logs, horizons, periodic)
    folder = Path(model) if Path(model).is_dir() else Path(model).parent
    estimator, skipped = None, None
    if field.separate_inputs and Path(model).is_dir():
        try:
            estimator = pem_run_estimator(folder, field.sidecar)
        except Exception as error:  # noqa: BLE001 - whatever stops the rebuild, the open-loop score stands
            skipped = (f"the free run is not scored: the run's estimator could not be rebuilt from {folder} "
                       f"({type(error).__name__}: {error}); if the run's config names its files relative to "
                       f"another directory, run torch-ude score from there.")
            print(f"torch-ude score: {skipped}")
        result["free_run_skipped"] = skipped
    if estimator is not None:  # a PEM-MHE run: also the free run on the model's own grid (module doc)
        grid = LogColumns(**{**vars(columns), "fs": 1.0 / float(estimator.model.dt)})
        angles = [k for k, j in enumerate(estimator.model.measured) if j in periodic]
        free = pem_free_run(estimator, [read_scored_log(f, grid, antialias, limits) for f in files], horizons,
                            angles)
        for entry, extra in zip(result["files"], free["files"]):
            entry.update(extra)
        result["pooled"].update(free["pooled"])
    target = Path(out) if out is not None else folder / "score"
    target.mkdir(parents=True, exist_ok=True)
    stems = [Path(f).stem for f in files]
    writer = None
    if tensorboard:
        from torch.utils.tensorboard import SummaryWriter
        writer = SummaryWriter(str(target / "tensorboard"))
    for j, (log, entry) in enumerate(zip(logs, result["files"])):
        scorable = [h for h in horizons if h not in entry["too_short"]]
        if not scorable:
            entry["figure"] = None
            continue
        name = stems[j] if stems.count(stems[j]) == 1 else f"{j}_{stems[j]}"
        fig = rollout_figure(field, log, min(scorable), title=f"{Path(str(files[j])).name}: {min(scorable):g} s "
                                                              f"open-loop rollouts")
        fig.savefig(target / f"{name}.png", dpi=110)
        entry["figure"] = f"{name}.png"
        if writer is not None:
            writer.add_figure(f"score/{name}", fig)
            for key in ("one_step_nrmse", *(f"open_loop_{h:g}s_nrmse" for h in scorable)):
                writer.add_scalar(f"score/{name}/{key}", entry[key])
    if writer is not None:
        writer.close()
    table = score_table(result, horizons, per_channel, field.state_names)
    from .training.outputs import to_jsonable  # (the run outputs' JSON conversion: inf, tensors, dataclasses)
    record = {"model": str(model), "trainer": (field.sidecar.get("extra") or {}).get("trainer"),
              "fs": columns.fs, "horizons": list(horizons), "periodic": [field.state_names[i] for i in periodic],
              "columns": columns, "antialias": "every faster file" if antialias else "files at other rates", **result}
    write_text_atomic(target / SCORE_FILE, json.dumps(to_jsonable(record), indent=2) + "\n")
    print(table)
    print(f"torch-ude score: {SCORE_FILE} and {sum(1 for e in result['files'] if e.get('figure'))} figure(s) in "
          f"{target}")
    return record | {"table": table, "out": str(target)}


def main(argv: Sequence[str]) -> dict:
    """``torch-ude score`` from command-line arguments (module doc); returns `score`'s result."""
    args = _parser().parse_args(list(argv))
    return score(args.model, args.files, args.horizons, args.per_channel, args.config, args.out, args.tensorboard,
                 args.time, args.states, args.inputs, args.fs, args.antialias, args.file_rate)

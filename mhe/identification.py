"""The identification problem: what is identified from which data, built once for every front-end.

An `IdentificationProblem` holds the recording (or where it comes from), the model to
identify (known physics with its start values, a neural residual, or both), the measured
states, the MHE settings (horizon, weights, IPOPT), the windows cut from the recording
(Eq. 3) and the arrival cost with its optional physical box (`mhe.estimator.arrival`). The CLI
(`mhe.training.IdentificationData`), the in-process `mhe.pem.PEMIdentifier` and the
benchmarks all build their estimator from it (`IdentificationProblem.estimator`), so one
experiment gives one result whichever way it is run. Dimensions come from the model and the
recording: the sample time is the recording's, ``n_u`` the physics' or the recording's (times
``1 + input_lags`` with an input history, `mhe.data.input_history`). The input between samples is the
problem's ``hold`` (`mhe.models.hold`; zero-order by default): with a first-order or midpoint hold the
recording's step inputs are the rows ``[u_k, u_{k+1}]``. The output is ``C x`` unless the problem
has an output map (`mhe.models.output`).
"""
from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from functools import cached_property

from torch_ude.envelope import DEFAULT_MARGIN

from .models.discretization import tableau
from .models.hold import input_hold
from .models.model import NeuralResidual, PhysicsField, StateSpaceModel, float64_default
from .models.output import OutputMap
from .data.input_history import with_input_history
from .data.recording import Recording, RecordingSource, held_inputs
from .data.windows import Windows, make_windows
from .estimator.arrival import arrival_bounds
from .estimator.estimator import MHESettings, MovingHorizonEstimator

__all__ = ["ArrivalCost", "ResidualSettings", "IdentificationProblem", "start_from_estimator", "start_from_run"]


@dataclass(frozen=True)
class ArrivalCost:
    """Start and box of the arrival cost ``||x_0 - s_bar||^2_{Sigma^-1}``, ``Sigma = diag(sigma^2)`` (Eq. 4a).

    Attributes:
        mean: start of ``s_bar``, one number per state (state units).
        std: start of ``sigma``, one positive number per state.
        box: per state ``[lo, hi]`` of ``s_bar`` or None (a measured state: the range of its
            output in the data); None for the whole list leaves ``s_bar`` unbounded and
            ``sigma = softplus(rho)`` (`mhe.estimator.arrival.arrival_bounds`).
        margin: widening of each box on both sides, as a fraction of its width.
        std_range: ``sigma`` within these multiples of the ``s_bar`` box width.
    """

    mean: tuple[float, ...]
    std: tuple[float, ...]
    box: tuple[tuple[float, float] | None, ...] | None = None
    margin: float = 0.1
    std_range: tuple[float, float] = (0.05, 10.0)


@dataclass(frozen=True)
class ResidualSettings:
    """The neural residual of a neural or gray-box model (`mhe.models.model.NeuralResidual`).

    Attributes:
        width: hidden width of both hidden layers.
        in_scale: typical magnitudes of ``[x, u]``, n_x + n_u numbers (None: ones).
        out_scale: typical magnitudes of the residual ``dx/dt``, n_x numbers (None: ones).
        seed: seed of the hidden layers' initial weights (the last layer starts at zero).
        outputs: the state channels the residual drives (None: all), see
            `mhe.models.model.NeuralResidual`.
        start: a run folder (jet matching, the RK4 baseline, the C trainer) whose trained field
            gives the initial weights and both scales instead (`mhe.models.trained_field`; a
            single-pendulum field, no inputs, ``width`` hidden units); ``in_scale``,
            ``out_scale`` and ``seed`` must then be left at their defaults.
        input_lags: the residual also reads the inputs of this many previous samples
            (`mhe.data.input_history`): the problem's inputs become ``[u_k, u_{k-1}, ...]`` and the
            network reads ``[x, u_k, ..., u_{k-input_lags}]``; the physics reads ``u_k``. An
            ``in_scale`` of n_x + n_u numbers gives each earlier input its input's scale.
        envelope: fade the trained residual to zero outside the inputs it was trained on (the trust
            envelope, `mhe.models.envelope`: recorded at the end of the run from the states the MHE estimated
            on the training windows and their inputs). None: on for recorded data
            (`RecordingSource.recorded`), off for a simulator.
        envelope_margin: the envelope's fade band on each side, as a fraction of its width per input
            column (`torch_ude.envelope.DEFAULT_MARGIN`).
        check: the residual check of a gray-box run (`mhe.outer.residual_check`): hold back the last
            ``check_share`` of the recording from the PEM windows, and at the end of the run score the model
            and its physics alone there; where the residual does not predict better, the run's model is its
            physics alone. Ignored without physics (nothing to fall back to).
        check_free_run: the check also scores each model by free run on the held-back tail (initial states
            estimated, `mhe.outer.free_run.estimate_initial_states`), and the residual must be no worse there
            too: a residual that lowers the one-step error can still make the free run worse than the physics
            (measured: a two-tank gray-box started from an output-error-refined physics-only run). Off for a plant
            whose free run over the tail is not meaningful (an unstable one).
        check_share: the share of the recording's samples held back for the check, in (0, 1); its windows
            (`IdentificationProblem.held_out_windows`) must hold at least one.
        keep_rejected: keep (and export) the residual even when the check rejects it.

    Raises:
        ValueError: for ``start`` together with scales, a seed or an input history, negative
            ``input_lags``, an ``envelope`` other than true, false or null, an ``envelope_margin``
            that is not a positive number, ``check``, ``keep_rejected`` or ``check_free_run`` other than true
            or false, or a
            ``check_share`` outside (0, 1).
    """

    width: int
    in_scale: tuple[float, ...] | None = None
    out_scale: tuple[float, ...] | None = None
    seed: int = 0
    outputs: tuple[int, ...] | None = None
    start: str | None = None
    input_lags: int = 0
    envelope: bool | None = None
    envelope_margin: float = DEFAULT_MARGIN
    check: bool = True
    check_share: float = 0.2
    keep_rejected: bool = False
    check_free_run: bool = True

    def __post_init__(self) -> None:
        for name in ("check", "keep_rejected", "check_free_run"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"residual.{name} must be true or false; got {getattr(self, name)!r}.")
        share = self.check_share
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 < share < 1.0:
            raise ValueError(f"residual.check_share (the share of the recording held back for the residual check) "
                             f"must be a number in (0, 1); got {share!r}. Give e.g. 0.2, or set residual.check: "
                             f"false to train on the whole recording.")
        if self.envelope is not None and not isinstance(self.envelope, bool):
            raise ValueError(f"residual.envelope must be true, false or null (on for recorded data); got "
                             f"{self.envelope!r}.")
        m = self.envelope_margin
        if isinstance(m, bool) or not isinstance(m, (int, float)) or not math.isfinite(m) or m <= 0:
            raise ValueError(f"residual.envelope_margin (the fade band as a fraction of the envelope's width) must be "
                             f"a positive number; got {m!r}.")
        if isinstance(self.input_lags, bool) or not isinstance(self.input_lags, int) or self.input_lags < 0:
            raise ValueError(f"input_lags (previous samples of input history the residual reads) must be an integer "
                             f">= 0; got {self.input_lags!r}.")
        if self.start is not None and (self.in_scale is not None or self.out_scale is not None or self.seed != 0
                                       or self.input_lags):
            raise ValueError(f"A residual started from the trained field in {self.start} takes its weights and "
                             "scales from it and reads no inputs; leave in_scale, out_scale, seed and input_lags "
                             "unset.")

    def build(self, n_x: int, n_u: int) -> NeuralResidual:
        """The residual at its start: seeded with a zero last layer, or the trained field of ``start``.

        Args:
            n_x: state dimension.
            n_u: inputs of the physics (without the input history); the network reads
                ``n_u (1 + input_lags)`` of them.

        Raises:
            ValueError: if the trained field's network does not have ``n_x`` states, no inputs
                and ``width`` hidden units.
        """
        if self.start is None:
            in_scale = self.in_scale
            if in_scale is not None and self.input_lags and len(in_scale) == n_x + n_u:
                in_scale = tuple(in_scale) + tuple(in_scale[n_x:]) * self.input_lags
            return NeuralResidual(n_x, n_u * (1 + self.input_lags), self.width, in_scale, self.out_scale, self.seed,
                                  self.outputs)
        from .models.trained_field import TrainedField  # it loads CasADi: only for a trained start

        net = TrainedField.load(self.start).residual(self.outputs)
        if (net.n_x, net.n_u, net.mlp.sizes[1]) != (n_x, n_u, self.width):
            raise ValueError(f"The trained field in {self.start} has {net.n_x} states, {net.n_u} inputs and "
                             f"{net.mlp.sizes[1]} hidden units; this problem's residual needs {n_x}, {n_u} and "
                             f"{self.width}.")
        return net


def start_from_run(start: str, physics: PhysicsField | None, output: OutputMap | None,
                 arrival: ArrivalCost) -> tuple[PhysicsField | None, OutputMap | None, ArrivalCost]:
    """The physics, output map and arrival cost of a problem, started where the physics-only PEM-MHE run in the
    folder ``start`` ended (`IdentificationProblem`'s ``start``): copies, the inputs are not changed.

    Args:
        start: a run folder holding a PEM-MHE model (``field.json`` of format ``torch-ude-mhe-model``; its
            ``parameters`` and, with an output map, ``output_map.parameters``).
        physics, output: the problem's physics and output map with their bounds (the identified parameters of
            both are set to the run's values; fixed ones keep theirs).
        arrival: the problem's arrival cost; ``mean`` and ``std`` become the run's trained ones (one number per
            state each).

    Raises:
        FileNotFoundError: no model in ``start`` (`torch_ude.export.load_field`).
        ValueError: a run of another kind (not PEM-MHE), with a neural residual, of another physics class or
            number of states, without a value for an identified parameter, or a value outside its bounds.
    """
    from torch_ude.export import MHE_FORMAT, load_field

    run = load_field(start).sidecar
    if run.get("format") != MHE_FORMAT:
        raise ValueError(f"start={start!r} holds no PEM-MHE model (format {run.get('format')!r}); give the folder of "
                         f"a physics-only torch-ude fit of a mhe config.")
    if run.get("residual_sizes"):
        raise ValueError(f"start={start!r} is a gray-box run (a residual {run['residual_sizes']}); start from a "
                         f"physics-only run, whose physics has not traded terms with a residual.")
    if physics is None or run.get("physics") != type(physics).__name__:
        raise ValueError(f"start={start!r} is a run of the physics {run.get('physics')!r}; this problem's physics "
                         f"is {type(physics).__name__ if physics is not None else None!r}.")
    if len(run["arrival"]["mean"]) != physics.n_x or len(run["arrival"]["std"]) != physics.n_x:
        raise ValueError(f"start={start!r} has an arrival cost of {len(run['arrival']['mean'])} states; this "
                         f"problem's physics has {physics.n_x}.")
    physics, output = copy.deepcopy(physics), copy.deepcopy(output)
    output_values = (run.get("output_map") or {}).get("parameters", {})
    for part, values in ((physics, run["parameters"]), (output, output_values)):
        if part is None:
            continue
        missing = [n for n in part.params.free_names if n not in values]
        if missing:
            raise ValueError(f"start={start!r} has no value for the identified parameter {missing[0]!r} (of "
                             f"{type(part).__name__}).")
        try:
            part.params.assign({n: values[n] for n in part.params.free_names})
        except ValueError as err:
            raise ValueError(f"start={start!r}: {err}") from None
    return physics, output, replace(arrival, mean=tuple(float(v) for v in run["arrival"]["mean"]),
                                    std=tuple(float(v) for v in run["arrival"]["std"]))


def start_from_estimator(problem: IdentificationProblem, estimator: MovingHorizonEstimator) -> IdentificationProblem:
    """``problem`` started where an estimator in memory ended, as `start_from_run` starts from a run folder: copies
    of its physics (values, identified names, bounds) and output map, and its trained arrival mean and standard
    deviations (the problem's arrival box, margin and range kept); e.g. a gray-box problem from a physics-only fit.

    Args:
        problem: the problem to start (of the same physics and number of states as ``estimator``'s model).
        estimator: the MHE after its run.

    Returns:
        The started copy of ``problem``.
    """
    a = problem.arrival
    return problem.replace(physics=copy.deepcopy(estimator.model.physics),
                           output=copy.deepcopy(estimator.model.output_map),
                           arrival=ArrivalCost(tuple(estimator.arrival_mean.detach().tolist()),
                                               tuple(estimator.arrival_std().detach().tolist()), a.box, a.margin,
                                               a.std_range))


class IdentificationProblem:
    """Model, data windows, measured outputs, MHE settings and arrival cost of one PEM-MHE experiment.

    Args:
        recording: the data, or the `RecordingSource` that produces it on first use.
        mhe: horizon N, the weights Q and R, and the IPOPT and refinement settings.
        arrival: start (and optional box) of the arrival cost.
        measured: indices of the measured states, in the order of the recording's outputs.
        physics: the known physics with its start values (None: neural only).
        residual: the neural residual (None: physics only).
        stride: samples between window starts.
        windows: use only the first this many windows (None: all); with the residual check (`checks_residual`)
            the first this many of each part, the fitted and the held-out.
        n_x: state dimension, needed only without physics.
        discretization: the model's ``f_d``, one step of ``"euler"``, ``"rk4"`` or ``"rkf45"``
            (`mhe.models.discretization`); the one that generated the data where known (BayesRace's
            ``dstates``: Euler).
        hold: the input between samples, ``"zoh"`` (zero-order), ``"foh"`` (first-order) or
            ``"midpoint"`` (`mhe.models.hold`).
        output: the output map ``y = h(x, u; p_y)`` with its start values (None: ``y = C x``); its
            ``measured`` must be ``measured``.
        start: a physics-only PEM-MHE run folder (``torch-ude fit`` of a config of the same physics without a
            residual, its ``field.json``): the identified physical and output-map parameters start at that run's
            trained values and the arrival cost's ``mean`` and ``std`` at its trained ones, instead of the
            config's (its fixed parameters, bounds and box stay). A gray-box started so is the physics-only fit
            plus a residual, and its residual check falls back to that fit (`mhe.outer.residual_check`).

    Raises:
        ValueError: without physics and residual, for ``windows < 1``, for an arrival box
            whose length is not the number of states, for an unknown discretization or hold, for
            an output map that observes other states than ``measured``, or for a ``start`` that is not
            a physics-only run of this physics (`start_from_run`).
    """

    def __init__(self, recording: RecordingSource | Recording, mhe: MHESettings, arrival: ArrivalCost,
                 measured: Sequence[int], physics: PhysicsField | None = None,
                 residual: ResidualSettings | None = None, stride: int = 1, windows: int | None = None,
                 n_x: int | None = None, discretization: str = "rk4", hold: str = "zoh",
                 output: OutputMap | None = None, start: str | None = None) -> None:
        tableau(discretization)
        input_hold(hold)
        if output is not None and output.measured != tuple(int(i) for i in measured):
            raise ValueError(f"The output map observes the states {list(output.measured)} but measured is "
                             f"{list(measured)}; give the output map the problem's measured states.")
        if physics is None and residual is None:
            raise ValueError("An identification problem needs physics, a residual or both; got neither.")
        if windows is not None and windows < 1:
            raise ValueError(f"windows must be None (all) or >= 1; got {windows}.")
        if physics is None and n_x is None:
            raise ValueError("A model without physics needs n_x, the number of states; got n_x=None.")
        self.source, self.mhe, self.arrival = recording, mhe, arrival
        self.measured, self.physics, self.residual = tuple(int(i) for i in measured), physics, residual
        self.stride, self.limit, self.discretization = stride, windows, discretization
        self.hold, self.output = hold, output
        self.n_x = physics.n_x if physics is not None else int(n_x)
        if arrival.box is not None and len(arrival.box) != self.n_x:
            raise ValueError(f"arrival.box needs one entry ([lo, hi] or null) per state, {self.n_x}; got "
                             f"{list(arrival.box)}.")
        self.start = start
        if start is not None:
            self.physics, self.output, self.arrival = start_from_run(start, physics, output, arrival)

    def replace(self, **changes: object) -> "IdentificationProblem":
        """A copy with some constructor arguments changed; a recording already produced is shared, not redone. A
        problem started from a run (``start``) hands its started physics and arrival cost over without reading the
        run again (unless ``start`` is among the changes).

        Raises:
            ValueError: for a name that is not a constructor argument.
        """
        args = {"recording": self.source, "mhe": self.mhe, "arrival": self.arrival, "measured": self.measured,
                "physics": self.physics, "residual": self.residual, "stride": self.stride, "windows": self.limit,
                "n_x": self.n_x, "discretization": self.discretization, "hold": self.hold, "output": self.output,
                "start": None}
        unknown = sorted(set(changes) - set(args))
        if unknown:
            raise ValueError(f"replace() takes the constructor arguments {sorted(args)}; got unknown {unknown}.")
        new = IdentificationProblem(**{**args, **changes})
        if "start" not in changes:
            new.start = self.start  # the record only: the started values came over with physics and arrival
        if new.source is self.source and "logged" in self.__dict__:
            new.__dict__["logged"] = self.logged
        return new

    @cached_property
    def logged(self) -> Recording:
        """The source's recording (produced on first use, in float64), without an input history."""
        if isinstance(self.source, Recording):
            return self.source
        with float64_default():
            return self.source.record()

    @cached_property
    def recording(self) -> Recording:
        """The recording the model runs on: `logged`, its inputs extended by the residual's input
        history (`mhe.data.input_history`) where ``residual.input_lags > 0``, then turned into the step
        inputs ``[u_k, u_{k+1}]`` of a paired hold (`mhe.data.recording.held_inputs`)."""
        history = with_input_history(self.logged, 0 if self.residual is None else self.residual.input_lags)
        return held_inputs(history, input_hold(self.hold))

    @property
    def checks_residual(self) -> bool:
        """Whether a run checks its residual against its physics alone on a held-back tail of the recording
        (`ResidualSettings.check`; a gray-box model only: a neural model has no physics to fall back to)."""
        return self.residual is not None and self.physics is not None and self.residual.check

    @property
    def windows(self) -> Windows:
        """The windows of Eq. (3) that PEM fits: horizon ``mhe.horizon``, ``stride`` apart, the first ``windows`` of
        them; with the residual check (`checks_residual`) only those before the held-back tail."""
        return self._windows[0]

    @property
    def held_out_windows(self) -> Windows | None:
        """The windows of the tail held back for the residual check (`checks_residual`; None without it): the last
        ``residual.check_share`` of the recording's samples, cut as `windows` are from the tail's first sample on (the
        first ``windows`` of them where that limit is set), ``Windows.start`` counted in the whole recording. No window
        of either part reads an output of the other."""
        return self._windows[1]

    @property
    def held_out_recording(self) -> Recording | None:
        """The held-back tail as a recording (the samples of `held_out_windows` on: states, the inputs at the samples
        with the residual's input history, before the model's hold, outputs; breaks counted from the tail's first
        sample), for the residual check's free run; None without the check."""
        cut = self._cut
        if cut == len(self.recording.outputs):
            return None
        rec = with_input_history(self.logged, self.residual.input_lags)
        return Recording(rec.states[cut:], rec.inputs[cut:], rec.outputs[cut:], rec.dt,
                         tuple(int(b) - cut for b in rec.breaks if int(b) > cut))

    @cached_property
    def _cut(self) -> int:
        """The first sample of the held-back tail; the recording's length without the residual check."""
        total = len(self.recording.outputs)
        return total - math.ceil(self.residual.check_share * total) if self.checks_residual else total

    @cached_property
    def _windows(self) -> tuple[Windows, Windows | None]:
        rec = self.recording
        if rec.outputs.shape[-1] != len(self.measured):
            raise ValueError(f"The recording has {rec.outputs.shape[-1]} output columns but measured lists "
                             f"{len(self.measured)} states {list(self.measured)}; give one index per output.")
        n, total, cut = self.mhe.horizon, len(rec.outputs), self._cut
        if cut < total:
            share = self.residual.check_share
            for part, rows in (("held back for the residual check", total - cut), ("left for PEM", cut)):
                if rows < n + 1:
                    raise ValueError(f"residual.check_share = {share} leaves {rows} of the recording's {total} samples "
                                     f"{part}, fewer than one window's N + 1 = {n + 1}; choose a check_share that "
                                     f"leaves a window on both sides, or set residual.check: false.")
        with float64_default():
            fit = make_windows(rec.inputs[:cut], rec.outputs[:cut], n, self.stride, [b for b in rec.breaks if b < cut])
            if cut == total:
                return (fit if self.limit is None else fit[: self.limit]), None
            tail = make_windows(rec.inputs[cut:], rec.outputs[cut:], n, self.stride,
                                [b - cut for b in rec.breaks if b > cut])
        held = Windows(tail.u, tail.y, tail.start + cut, tail.u_end)
        return (fit, held) if self.limit is None else (fit[: self.limit], held[: self.limit])

    @property
    def truth(self) -> Mapping[str, float] | None:
        """True physical values by name (simulated data), or None."""
        return None if isinstance(self.source, Recording) else self.source.truth

    def start_values(self) -> dict[str, float]:
        """The start values of all physical parameters (identified and fixed), by name (physical units); {} without
        physics."""
        return {} if self.physics is None else {n: float(v.detach()) for n, v in self.physics.params().items()}

    def model(self) -> StateSpaceModel:
        """A new state-space model at the start values (its parameters are not shared with earlier models)."""
        physics = copy.deepcopy(self.physics)
        n_u = physics.n_u if physics is not None else self.logged.inputs.shape[-1]
        residual = None if self.residual is None else self.residual.build(self.n_x, n_u)
        return StateSpaceModel(physics, residual, dt=self.logged.dt, measured=self.measured, n_x=self.n_x,
                               n_u=n_u if residual is None else residual.n_u, discretization=self.discretization,
                               hold=self.hold, output=copy.deepcopy(self.output))

    def estimator(self, clip_start: bool = False) -> MovingHorizonEstimator:
        """A new MHE of a new `model`, with the arrival cost at its start (bounded when ``arrival.box`` is set).

        Args:
            clip_start: move a start of ``s_bar`` or ``sigma`` that lies outside the data's bounds inside them
                (`mhe.models.bounds.Bound.clip`) instead of refusing it. For scoring a trained model on another
                recording, whose trained arrival cost replaces the start (``torch-ude validate``): the start
                was set for the training data's box, not this recording's.

        Raises:
            ValueError: without ``clip_start``, for a start outside its bound (`MovingHorizonEstimator`).
        """
        model, a = self.model(), self.arrival
        bounds: tuple = (None, None)
        mean, std = a.mean, a.std
        if a.box is not None:
            hidden = {j: box for j, box in enumerate(a.box) if box is not None}
            bounds = arrival_bounds(self.windows, model, hidden, a.margin, a.std_range)
            if clip_start:
                mean = tuple(b.clip(v) for v, b in zip(mean, bounds[0]))
                std = tuple(b.clip(v) for v, b in zip(std, bounds[1]))
        return MovingHorizonEstimator(model, self.mhe, mean, std, *bounds)

    @property
    def envelope_wanted(self) -> bool:
        """Whether a run records the residual's trust envelope (`ResidualSettings.envelope`; None: recorded data)."""
        if self.residual is None:
            return False
        if self.residual.envelope is not None:
            return self.residual.envelope
        return bool(getattr(self.source, "recorded", False))

    def relative_errors(self, estimator: MovingHorizonEstimator) -> dict[str, float]:
        """``|theta^_j - theta*_j| / |theta*_j|`` of the identified physical and output-map parameters with a
        known truth.

        Returns:
            By parameter name; empty without a truth.
        """
        truth, model = self.truth, estimator.model
        if truth is None:
            return {}
        out = {}
        for part in (model.physics, model.output_map):
            if part is not None:
                values = part.params()
                out.update({n: abs(float(values[n].detach()) - truth[n]) / abs(truth[n])
                            for n in part.params.free_names if n in truth})
        return out

    def describe(self) -> dict[str, object]:
        """The problem's settings as plain values (for run files)."""
        source = self.source
        return {"recording": type(source).__name__ if isinstance(source, Recording) else
                {"class": type(source).__name__, **{k: v for k, v in vars(source).items() if not k.startswith("_")}},
                "physics": None if self.physics is None else {
                    "class": type(self.physics).__name__,
                    "start": self.start_values(),
                    "identified": list(self.physics.params.free_names)},
                "residual": None if self.residual is None else asdict(self.residual),
                "measured": list(self.measured), "stride": self.stride, "windows": self.limit,
                "discretization": self.discretization, "hold": self.hold,
                "output": None if self.output is None else {
                    "class": type(self.output).__name__,
                    "start": {n: float(v.detach()) for n, v in self.output.params().items()},
                    "identified": list(self.output.params.free_names)},
                "mhe": asdict(self.mhe), "arrival": asdict(self.arrival), "start": self.start}

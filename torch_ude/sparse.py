"""Equations from a learned residual: sparse regression of ``N_theta`` on a user-given library.

The last step of the UDE workflow ("learn the residual, then sparsify it"): after
training ``F = f_known + N_theta``, evaluate the residual ``F(x) - f_known(x)`` on the
states the stream visited and regress it on a library of candidate terms with a
sparse optimizer, PySINDy's STLSQ by default or any scikit-learn linear estimator
(`fit_residual`). The recovered terms come with uncertainties from a bootstrap over
the states: the optimizer (selection included) is refitted on states resampled with
replacement, giving each coefficient's standard deviation and how often its term was
selected. This spread measures how well the library explains the learned residual;
it does not contain the training data's noise, whose effect shows as the spread
between fields trained on different seeds.

From the command line, on a run folder written by ``torch-ude fit``::

    python -m torch_ude.sparse runs/pendulum_case_a --library omega "sin(theta)" "omega**3"
    python -m torch_ude.sparse RUN --library omega "tanh(omega/0.02)" --channels omega
    python -m torch_ude.sparse runs/dfki_pendulum --library velocity "atan(100*velocity)" 1 torque \
        --channels velocity

(the last on a run trained on recorded logs: the residual ``F(x, u) - f_known(x, u)`` on
the training logs' samples, the library in the state and input names) prints the equations and writes them to ``RUN/equations.json``. Needs the optional
extra ``peers`` (``pip install 'torch-ude[peers]'``: pysindy, scikit-learn).

Beside a network's reading of recorded logs stands what the logs say without one: `fit_logs`
regresses the same library on a Savitzky–Golay derivative of the logged states minus ``f_known``.
"""
from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from .export import load_field
from .metrics import evaluation_states
from .recorded import read_log
from .systems.base import System, check_states

__all__ = ["Library", "ResidualEquations", "OutsideVisitedRegionWarning", "bootstrap_fit", "fit_residual", "fit_run",
           "fit_logs", "main"]


class OutsideVisitedRegionWarning(UserWarning):
    """States outside the region the stream visited: the learned residual there is an extrapolation."""


class Library:
    """Candidate terms, each an expression in the plant's state names.

    Expressions use the state names (e.g. ``theta``, ``omega``) and, for a plant with
    recorded inputs, the input names (e.g. ``torque``), numbers, ``+ - * / **`` and the
    functions sympy knows (``sin``, ``cos``, ``tanh``, ``exp``, ``Abs``, ``sign``,
    ``atan``, ...), e.g. ``["omega", "tanh(omega/0.02)", "omega*Abs(omega)", "1"]``
    (``"1"`` is a constant term, e.g. an offset).

    Args:
        expressions: the terms, at least one, no duplicates.
        state_names: the names of the ``n`` state variables, in state order.
        input_names: the names of the ``m`` inputs, in input order (none for an
            autonomous plant).

    Raises:
        ValueError: for an empty library, a duplicate, an expression that does not parse,
            or one that uses a name that is not a state or a function sympy does not know.
    """

    def __init__(self, expressions: Sequence[str], state_names: Sequence[str], input_names: Sequence[str] = ()
                 ) -> None:
        import sympy  # here, not at module import: it takes most of a second to load
        from sympy.core.function import AppliedUndef

        if isinstance(expressions, str) or not expressions:
            raise ValueError(f"the library must be a non-empty list of expressions in the states "
                             f"{list(state_names)}, e.g. ['{state_names[-1]}']; got {expressions!r}.")
        self.state_names = tuple(str(s) for s in state_names)
        self.input_names = tuple(str(s) for s in input_names)
        variables = self.state_names + self.input_names
        among = f"the {len(self.state_names)} state variables {list(self.state_names)}" + (
            f" or the inputs {list(self.input_names)}" if self.input_names else "")
        symbols = {name: sympy.Symbol(name) for name in variables}
        self.names, exprs = [], []
        for text in expressions:
            try:
                expr = sympy.parse_expr(str(text), local_dict=symbols)
            except (SyntaxError, TypeError, ValueError, sympy.SympifyError) as err:
                raise ValueError(f"the library term {text!r} is not an expression ({err}); write it in the names "
                                 f"{list(variables)}, e.g. 'tanh({self.state_names[-1]}/0.02)'.") from None
            unknown = sorted(str(s) for s in expr.free_symbols - set(symbols.values()))
            undefined = sorted(str(f.func) for f in expr.atoms(AppliedUndef))
            if unknown or undefined:
                raise ValueError(
                    f"the library term {text!r} uses {', '.join(unknown + undefined)}, which "
                    f"{'is' if len(unknown + undefined) == 1 else 'are'} not among {among} (or a known "
                    f"function); build the library for this plant's states.")
            if expr in exprs:  # equal in sympy's canonical form (2*omega/2 is omega)
                raise ValueError(f"the library term {text!r} repeats an earlier term; give each term once.")
            self.names.append(str(text).strip())
            exprs.append(expr)
        args = [symbols[s] for s in variables]
        self._functions = [sympy.lambdify(args, e, "numpy") for e in exprs]

    def __len__(self) -> int:
        return len(self.names)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """The library matrix ``Theta(x)``: (N, n + m) states then inputs -> (N, L) term values, float64."""
        cols = [np.broadcast_to(np.asarray(f(*x.T), dtype=np.float64), (x.shape[0],)) for f in self._functions]
        return np.stack(cols, axis=1)


@dataclass
class ResidualEquations:
    """Terms recovered from a learned residual.

    Attributes:
        channels: the residual channels regressed (state names), length C.
        terms: the library's term names, length L.
        coefficients: fitted on all states, shape (C, L); 0 where a term was not selected.
        std: bootstrap standard deviation of each coefficient, shape (C, L).
        inclusion: fraction of bootstrap fits that selected each term, shape (C, L).
        r2: fraction of each channel's residual variance the equation explains, (C,); None
            for a channel whose residual is constant.
        residual_rms: RMS of each channel's learned residual, (C,), units of dx/dt.
        misfit_rms: RMS of learned residual minus equation, (C,).
        n_states: states regressed on.
        n_outside: of them, states outside the plant's visited region.
        bootstrap: number of bootstrap fits.
    """

    channels: list[str]
    terms: list[str]
    coefficients: list[list[float]]
    std: list[list[float]]
    inclusion: list[list[float]]
    r2: list[float | None]
    residual_rms: list[float]
    misfit_rms: list[float]
    n_states: int
    n_outside: int
    bootstrap: int

    def coefficient(self, channel: str, term: str) -> tuple[float, float]:
        """``(coefficient, std)`` of ``term`` in ``channel`` (0 when not selected)."""
        i, j = self.channels.index(channel), self.terms.index(term)
        return self.coefficients[i][j], self.std[i][j]

    def compare(self, truth: Sequence[tuple[str, str, float]]) -> dict[str, dict]:
        """Known coefficients against the recovered ones (a simulated plant's truth, a lab's fit).

        Args:
            truth: ``(channel, term, value)`` triples, e.g. ``[("omega", "omega", -0.40)]``; a value of 0
                says the term should not be selected.

        Returns:
            Per ``"<channel>: <term>"``: ``true``, ``found`` (0 when not selected), its bootstrap ``std``
            and ``relative_error``, ``found / true - 1`` (None for a true value of 0).
        """
        out = {}
        for channel, term, value in truth:
            found, std = self.coefficient(channel, term)
            out[f"{channel}: {term}"] = {"true": value, "found": found, "std": std,
                                         "relative_error": found / value - 1.0 if value else None}
        return out

    def selected(self) -> list[dict]:
        """The selected terms: ``{"channel", "term", "coefficient", "std", "inclusion"}`` each."""
        return [{"channel": ch, "term": t, "coefficient": self.coefficients[i][j], "std": self.std[i][j],
                 "inclusion": self.inclusion[i][j]}
                for i, ch in enumerate(self.channels) for j, t in enumerate(self.terms) if self.coefficients[i][j]]

    def equations(self, precision: int = 4) -> list[str]:
        """One line per channel, e.g. ``"omega' residual = -0.3998(+-0.0002) omega   (R^2 0.9996)"``."""
        lines = []
        for i, ch in enumerate(self.channels):
            parts = [f"{c:+.{precision}f}(+-{s:.{precision}f}) {t}"
                     for c, s, t in zip(self.coefficients[i], self.std[i], self.terms) if c]
            fit = "-" if self.r2[i] is None else f"{self.r2[i]:.4f}"
            lines.append(f"{ch}' residual = {' '.join(parts) if parts else '0'}   (R^2 {fit})")
        return lines

    def to_dict(self) -> dict:
        """JSON-ready dictionary, with the equations and the uncertainty method."""
        return asdict(self) | {"equations": self.equations(), "uncertainty": "bootstrap over the states"}


def _default_optimizer(threshold: float):
    try:
        import pysindy
    except ImportError:
        raise ImportError("torch_ude.sparse's default optimizer is PySINDy's STLSQ; install it with "
                          "pip install 'torch-ude[peers]', or pass a scikit-learn estimator as optimizer.") from None
    return pysindy.STLSQ(threshold=threshold)


def bootstrap_fit(theta: np.ndarray, y: np.ndarray, estimator: object, bootstrap: int, seed: int = 0
                  ) -> tuple[np.ndarray, np.ndarray]:
    """A sparse regression ``y ~ theta coef^T`` and its refits on rows resampled with replacement.

    Args:
        theta: the library evaluated at the samples, shape (N, L).
        y: the targets, shape (N, C).
        estimator: a PySINDy optimizer or scikit-learn linear estimator (``fit``, ``coef_`` (C, L)); cloned
            for every fit.
        bootstrap: number of refits.
        seed: seed of the resampling.

    Returns:
        The coefficients, shape (C, L), and those of every refit, shape (bootstrap, C, L).
    """
    from sklearn.base import clone  # a dependency of pysindy and of any scikit-learn estimator

    rng = np.random.default_rng(seed)
    with warnings.catch_warnings():  # a channel without any selected term is a result ("0"), not a problem
        warnings.filterwarnings("ignore", message="Sparsity parameter is too big")
        coef = np.atleast_2d(clone(estimator).fit(theta, y).coef_)
        draws = np.stack([np.atleast_2d(clone(estimator).fit(theta[i], y[i]).coef_)
                          for i in (rng.integers(0, len(y), len(y)) for _ in range(bootstrap))])
    return coef, draws


def fit_residual(field: Callable[[Tensor], Tensor], system: System, case: str, library: Library | Sequence[str],
                 states: Tensor | None = None, channels: Sequence[str] | None = None, threshold: float = 0.05,
                 optimizer: object | None = None, bootstrap: int = 200, seed: int = 0,
                 inputs: Tensor | None = None) -> ResidualEquations:
    """Regress a trained field's residual ``F(x) - f_known(x)`` on a library, sparsely.

    For a plant with recorded inputs (``system.input_names``, e.g. a recorded machine's
    `RecordedPlant`), the residual is ``F(x, u) - f_known(x, u)`` on given samples
    ``(x, u)`` (a log has no evaluation grid: pass the training log's samples), and the
    library may use the input names too.

    Args:
        field: the trained field, ``(N, n) -> (N, n)``, or ``(N, n), (N, m) -> (N, n)``
            with inputs (a `HybridField`, or a wrapper of a run's ``field.pt``), float64.
        system: the plant it was trained on.
        case: the case of its known model.
        library: a `Library`, or expressions in ``system.state_names`` (and
            ``system.input_names``) to build one.
        states: states to regress on, shape (N, n); default the visited evaluation states
            (`torch_ude.metrics.evaluation_states`); required with inputs.
        channels: the residual channels (state names) to regress; default all.
        threshold: STLSQ threshold of the default optimizer, in the coefficient's units.
        optimizer: a PySINDy optimizer or scikit-learn linear estimator with
            ``fit(Theta, Y)`` and ``coef_`` of shape (C, L), without intercept; default
            ``pysindy.STLSQ(threshold)``.
        bootstrap: bootstrap refits over resampled states (>= 2).
        seed: seed of the resampling.
        inputs: the recorded inputs at ``states``, shape (N, m), for a plant with ``m``
            inputs; None for an autonomous plant.

    Returns:
        The `ResidualEquations`.

    Raises:
        ValueError: for a library built for other state variables, unknown channels,
            bad states or inputs (missing, extra, or of the wrong shape), or ``bootstrap < 2``.

    Warns:
        OutsideVisitedRegionWarning: when some ``states`` lie outside the plant's visited
            region, where the residual is an extrapolation of the network.
    """
    names, input_names = list(system.state_names), list(getattr(system, "input_names", ()))
    if not isinstance(library, Library):
        library = Library(library, names, input_names)
    if list(library.state_names) != names or list(library.input_names) != input_names:
        has = f"{len(names)}: {names}" + (f" and the inputs {input_names}" if input_names else "")
        raise ValueError(
            f"the library is built for {len(library.state_names)} state variables {list(library.state_names)}"
            f"{f' and the inputs {list(library.input_names)}' if library.input_names else ''} but "
            f"{type(system).__name__} has {has}; build it with Library(expressions, system.state_names"
            f"{', system.input_names' if input_names else ''}).")
    channels = names if channels is None else list(channels)
    if not channels or any(c not in names for c in channels):
        raise ValueError(f"channels must name residual channels among the states {names}; got {channels!r}.")
    if isinstance(bootstrap, bool) or not isinstance(bootstrap, int) or bootstrap < 2:
        raise ValueError(f"bootstrap must be an integer >= 2 (refits for the uncertainties); got {bootstrap!r}.")
    if input_names:
        if states is None or inputs is None:
            raise ValueError(f"{type(system).__name__} has the inputs {input_names}: pass the samples to regress "
                             f"on as states (N, {len(names)}) and inputs (N, {len(input_names)}), e.g. the "
                             f"training logs' samples (fit_run does this for a run folder).")
        check_states(inputs, len(input_names), "inputs")
        if inputs.shape[0] != states.shape[0]:
            raise ValueError(f"inputs must have one row per state; got {inputs.shape[0]} rows of inputs for "
                             f"{states.shape[0]} states.")
        inputs = inputs.to(torch.float64)
    elif inputs is not None:
        raise ValueError(f"{type(system).__name__} has no inputs; got inputs of shape {tuple(inputs.shape)}. "
                         f"Pass inputs only for a plant with recorded inputs.")
    if states is None:
        states = evaluation_states(system)["visited"]
    check_states(states, system.n_states, "states")
    states = states.to(torch.float64)
    outside = int((~system.visited_region(states)).sum())
    if outside:
        warnings.warn(f"{outside} of the {states.shape[0]} states lie outside the region the stream visited "
                      f"({type(system).__name__}.visited_region): the learned residual there is the network's "
                      f"extrapolation, not something it was trained on; regress on visited states only "
                      f"(the default) to read the physics it learned.", OutsideVisitedRegionWarning, stacklevel=2)
    args = (states,) if inputs is None else (states, inputs)
    with torch.no_grad():
        residual = (field(*args) - system.known_field(case)(*args)).numpy()
    cols = [names.index(c) for c in channels]
    y, theta = residual[:, cols], library(torch.cat(args, dim=1).numpy())
    coef, draws = bootstrap_fit(theta, y, _default_optimizer(threshold) if optimizer is None else optimizer,
                                bootstrap, seed)
    misfit = y - theta @ coef.T
    centred = ((y - y.mean(0)) ** 2).sum(0)
    r2 = [1.0 - float((misfit[:, k] ** 2).sum() / centred[k]) if centred[k] > 0 else None
          for k in range(len(cols))]
    return ResidualEquations(
        channels=channels, terms=list(library.names), coefficients=coef.tolist(),
        std=draws.std(axis=0, ddof=1).tolist(), inclusion=(draws != 0).mean(axis=0).tolist(), r2=r2,
        residual_rms=np.sqrt((y**2).mean(0)).tolist(), misfit_rms=np.sqrt((misfit**2).mean(0)).tolist(),
        n_states=int(states.shape[0]), n_outside=outside, bootstrap=bootstrap)


def fit_run(run: str | Path, library: Library | Sequence[str], states: str = "visited", **kwargs
            ) -> ResidualEquations:
    """`fit_residual` on the trained field of a run folder (``field.pt`` and ``field.json``).

    For a run trained on recorded logs (a plant with inputs, or any `RecordedPlant`),
    "visited" means the samples of the run's training logs, read again from the paths in
    its saved config (`torch_ude.recorded.read_log`, relative to the working directory)
    on the same nominal grid; there is no grid.

    Args:
        run: a folder written by ``torch-ude fit`` (any trainer).
        library: as for `fit_residual`, in the state (and input) names of the run's plant.
        states: ``"visited"`` (the visited evaluation states) or ``"grid"`` (all of them).
        **kwargs: further arguments of `fit_residual` (channels, threshold, optimizer, bootstrap, seed).

    Raises:
        FileNotFoundError: if the folder lacks the field files, or a recorded run's
            training log is missing.
        ValueError: for an unknown ``states``, ``"grid"`` for a recorded run, or what
            `fit_residual` rejects.
    """
    if states not in ("visited", "grid"):
        raise ValueError(f"states must be 'visited' or 'grid'; got {states!r}.")
    module, sidecar = load_field(run)
    system = System.from_spec(sidecar["plant"])
    dtype = getattr(torch, sidecar["dtype"])
    if sidecar.get("case") != "RECORDED":
        return fit_residual(lambda x: module(x.to(dtype)).to(torch.float64), system, sidecar["case"], library,
                            states=evaluation_states(system)[states], **kwargs)
    if states != "visited":
        raise ValueError(f"{run} was trained on recorded logs, which have no evaluation grid; use "
                         f"states='visited' (the training logs' samples).")
    data = sidecar["extra"]["config"]["data"]
    samples = np.concatenate([seg for path in data["files"] for seg in read_log(
        path, data["time"], data["states"], data.get("inputs", ()), data["fs"], data.get("max_gap")).segments])
    z = torch.as_tensor(samples, dtype=torch.float64)
    n = system.n_states
    return fit_residual(lambda x, u: module(torch.cat([x, u], dim=1).to(dtype)).to(torch.float64), system,
                        sidecar["case"], library, states=z[:, :n], inputs=z[:, n:], **kwargs)


def fit_logs(config: str | Path, library: Sequence[str], channel: str | None = None, threshold: float = 0.05,
             bootstrap: int = 200, seed: int = 0, window_s: float = 0.31, order: int = 3) -> dict:
    """What a recorded config's training logs say without a network: STLSQ of ``a - f_known(x, u)`` on a library.

    The reference beside `fit_run` on a run trained on the same logs: ``a`` is the Savitzky–Golay
    derivative (window ``window_s``, order ``order``, per segment of at least a window, on the
    config's nominal grid) of the recorded ``channel``, ``f_known`` the config's known model in that
    channel, the samples those of the config's training logs (`torch_ude.recorded.read_log`, paths
    relative to the working directory). Uncertainties: `bootstrap_fit` over the samples.

    Args:
        config: a config on recorded logs (``data.init_args``: ``known``, ``files``, ``time``,
            ``states``, ``inputs``, ``fs``).
        library: expressions in the state and input names (`Library`).
        channel: the state whose derivative is regressed (e.g. ``velocity``); default the last state.
        threshold: STLSQ threshold, in the coefficient's units.
        bootstrap: bootstrap refits over resampled samples.
        seed: seed of the resampling.
        window_s: Savitzky–Golay window in s (rounded to an odd number of samples).
        order: Savitzky–Golay polynomial order.

    Returns:
        ``{"terms", "coefficients", "std", "r2", "samples", "acceleration"}``: the library's term names,
        the coefficients and their bootstrap standard deviations (L each), the fraction of the target's
        variance the equation explains, the number of samples and how ``a`` was computed.

    Raises:
        ValueError: for a ``channel`` that is not a state of the config.
    """
    import yaml
    from scipy.signal import savgol_filter

    from .score import class_of

    data = yaml.safe_load(Path(config).read_text())["data"]["init_args"]
    states, inputs = data["states"], data.get("inputs", [])
    channel = states[-1] if channel is None else channel
    if channel not in states:
        raise ValueError(f"channel must be one of the config's states {states}; got {channel!r}.")
    j, n = states.index(channel), len(states)
    known = class_of(data["known"])(**data["known"].get("init_args", {}))
    fs = float(data["fs"])
    window = 2 * int(round(window_s * fs / 2)) + 1
    z, y = [], []
    for path in data["files"]:
        for seg in read_log(path, data["time"], states, inputs, fs).segments:
            if seg.shape[0] < window:
                continue
            acc = savgol_filter(seg[:, j], window, order, deriv=1, delta=1.0 / fs)
            x, u = torch.as_tensor(seg[:, :n]), torch.as_tensor(seg[:, n:])
            with torch.no_grad():
                y.append(acc - known(x, u)[:, j].numpy())
            z.append(seg)
    z, y = np.concatenate(z), np.concatenate(y)[:, None]
    library = Library(library, states, inputs)
    theta = library(z)
    coef, draws = bootstrap_fit(theta, y, _default_optimizer(threshold), bootstrap, seed)
    coef, draws = coef[0], draws[:, 0]
    misfit = y[:, 0] - theta @ coef
    return {"terms": list(library.names), "coefficients": coef.tolist(), "std": draws.std(0, ddof=1).tolist(),
            "r2": float(1.0 - (misfit**2).sum() / ((y[:, 0] - y[:, 0].mean()) ** 2).sum()), "samples": len(y),
            "acceleration": f"Savitzky-Golay derivative of the {channel}, window {window} samples, order {order}"}


def main(argv: list[str] | None = None) -> ResidualEquations:
    """``python -m torch_ude.sparse RUN_FOLDER --library ...``: equations from a run's learned residual.

    Errors (a missing run, a bad library) are printed as one line with exit status 2.
    """
    ap = argparse.ArgumentParser(prog="python -m torch_ude.sparse", description=__doc__.split("\n\n")[0],
                                 epilog="example: python -m torch_ude.sparse runs/pendulum_case_a --library omega "
                                        "'sin(theta)' 'omega**3'")
    ap.add_argument("run", type=Path, help="run folder with field.pt and field.json (written by torch-ude fit)")
    ap.add_argument("--library", nargs="+", required=True,
                    help="candidate terms in the plant's state (and input) names; '1' is a constant")
    ap.add_argument("--channels", nargs="+", default=None, help="residual channels to regress (default: all)")
    ap.add_argument("--states", choices=("visited", "grid"), default="visited",
                    help="regress on the visited evaluation states (default) or the whole grid")
    ap.add_argument("--threshold", type=float, default=0.05, help="STLSQ threshold (coefficient units)")
    ap.add_argument("--bootstrap", type=int, default=200, help="bootstrap refits for the uncertainties")
    ap.add_argument("--seed", type=int, default=0, help="seed of the bootstrap")
    ap.add_argument("--out", type=Path, default=None, help="JSON output (default: RUN/equations.json)")
    args = ap.parse_args(argv)
    try:
        result = fit_run(args.run, args.library, args.states, channels=args.channels, threshold=args.threshold,
                         bootstrap=args.bootstrap, seed=args.seed)
    except (ValueError, FileNotFoundError, ImportError) as err:
        ap.exit(2, f"{ap.prog}: error: {err}\n")
    out = args.out or args.run / "equations.json"
    out.write_text(json.dumps(result.to_dict() | {"run": str(args.run), "library": args.library}, indent=2) + "\n")
    print("\n".join(result.equations()))
    print(f"({result.n_states} states, uncertainties: standard deviation over {result.bootstrap} bootstrap fits; "
          f"written to {out})")
    return result


if __name__ == "__main__":
    main(sys.argv[1:])

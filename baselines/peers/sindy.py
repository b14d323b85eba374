"""The PySINDy peer: sparse regression of the field on numerically differentiated stream samples.

What a PySINDy user would do with the jet-matching stream: split it at the
re-excitations (the segment ids every trainer also gets; no derivative straddles a
jump), differentiate each segment with one of PySINDy's methods, and regress with
STLSQ on its standard library, polynomials up to ``degree`` plus ``sin``/``cos`` of
every state (``PolynomialLibrary + FourierLibrary(n_frequencies=1)``), either

* ``"residual"``: the residual ``xdot - f_known(x)`` on top of the known model
  (the UDE's split), ``F = f_known + SINDy``; or
* ``"whole"``: the whole field, ``F = SINDy``.

Differentiation: ``"default"`` is PySINDy's default (``FiniteDifference``, second-order
centred differences of the raw samples); ``"savgol"`` its ``SmoothedFiniteDifference``
with a Savitzky-Golay smoother (cubic) of ``window`` samples, whose smoothed states are
also the regression's states. The settings (window, STLSQ threshold, degree) are chosen
per plant and noise level on seed 0 only (`choose`), by the field error of the fit,
then fixed for every seed: a generous tuning (a user has no true field to score on).
"""
from __future__ import annotations

import itertools
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pysindy as ps
import torch
from torch import Tensor

from torch_ude.metrics import evaluate_field
from torch_ude.systems.base import System, VectorField
from torch_ude.systems.simulate import SimulatedStream

__all__ = ["DIFFERENTIATIONS", "SINDY_MODES", "SINDY_VARIANTS", "WINDOWS", "THRESHOLDS", "DEGREES", "SindySettings",
           "SindyField", "sindy_fit", "choose", "choose_variants"]

#: PySINDy's default finite differences, or its Savitzky-Golay smoothed ones.
DIFFERENTIATIONS = ("default", "savgol")
#: The residual on top of the known model, or the whole field.
SINDY_MODES = ("residual", "whole")
#: The variants' names, ``sindy_<mode>_<differentiation>`` (`choose_variants`).
SINDY_VARIANTS = tuple(f"sindy_{mode}_{diff}" for mode, diff in itertools.product(SINDY_MODES, DIFFERENTIATIONS))
#: The seed-0 search: Savitzky-Golay windows (samples at 1 kHz; 11 is PySINDy's default
#: smoother), STLSQ thresholds and polynomial degrees.
WINDOWS = (11, 51, 101, 201, 401)
THRESHOLDS = (0.01, 0.03, 0.1, 0.3)
DEGREES = (3, 5)


@dataclass(frozen=True)
class SindySettings:
    """One PySINDy configuration.

    Attributes:
        mode: ``"residual"`` or ``"whole"``.
        differentiation: ``"default"`` or ``"savgol"``.
        window: Savitzky-Golay window in samples (None for ``"default"``).
        threshold: STLSQ threshold.
        degree: highest polynomial degree of the library.
    """

    mode: str
    differentiation: str
    window: int | None
    threshold: float
    degree: int

    def method(self) -> ps.BaseDifferentiation:
        """The PySINDy differentiation object of these settings."""
        if self.differentiation == "default":
            return ps.FiniteDifference()
        return ps.SmoothedFiniteDifference(smoother_kws={"window_length": self.window, "polyorder": 3})


class SindyField:
    """A fitted PySINDy model as a field ``(N, n) -> (N, n)`` (plus ``f_known`` in residual mode).

    Args:
        model: the fitted ``pysindy.SINDy``.
        known: the known model, added in ``"residual"`` mode, or None (``"whole"``).
    """

    def __init__(self, model: ps.SINDy, known: VectorField | None) -> None:
        self.model, self.known = model, known

    def __call__(self, x: Tensor) -> Tensor:
        """The field at states ``x`` (N, n), same dtype."""
        out = torch.as_tensor(self.model.predict(x.detach().numpy()), dtype=x.dtype)
        return out if self.known is None else out + self.known(x)

    def equations(self) -> list[str]:
        """The regressed equations, one per state (residual equations in ``"residual"`` mode)."""
        return [f"{name}' {'residual ' if self.known is not None else ''}= {eq}"
                for name, eq in zip(self.model.feature_names, self.model.equations(precision=4))]


def _segments(rec: SimulatedStream, shortest: int) -> list[np.ndarray]:
    """Sample indices of each re-excitation segment that holds at least ``shortest`` samples."""
    cuts = np.flatnonzero(rec.segment[1:] != rec.segment[:-1]) + 1
    return [idx for idx in np.split(np.arange(len(rec)), cuts) if idx.size >= shortest]


def _derivatives(rec: SimulatedStream, settings: SindySettings) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """States (smoothed where the method smooths) and derivatives of every segment."""
    method = settings.method()
    xs, xdots = [], []
    for idx in _segments(rec, max(settings.window or 0, 5)):
        xdots.append(np.asarray(method(rec.y[idx], 1.0 / rec.fs)))
        xs.append(np.asarray(getattr(method, "smoothed_x_", rec.y[idx])))
    return xs, xdots


def _regress(xs: list[np.ndarray], xdots: list[np.ndarray], dt: float, known: VectorField,
             settings: SindySettings, names: Sequence[str]) -> SindyField:
    """STLSQ on the standard library for the derivatives of `_derivatives`."""
    if settings.mode == "residual":
        targets = [xd - known(torch.as_tensor(x)).numpy() for x, xd in zip(xs, xdots)]
    else:
        targets = xdots
    library = ps.PolynomialLibrary(degree=settings.degree) + ps.FourierLibrary(n_frequencies=1)
    model = ps.SINDy(optimizer=ps.STLSQ(threshold=settings.threshold), feature_library=library)
    with warnings.catch_warnings():  # "eliminated all coefficients" of a channel is a valid outcome here
        warnings.filterwarnings("ignore", message="Sparsity parameter is too big")
        model.fit(xs, t=dt, x_dot=targets, feature_names=list(names))
    return SindyField(model, known if settings.mode == "residual" else None)


def sindy_fit(system: System, case: str, rec: SimulatedStream, settings: SindySettings) -> tuple[SindyField, dict]:
    """Differentiate the stream and regress; the timed fit of one run.

    Args:
        system: the plant.
        case: the case of its known model.
        rec: the 1 kHz stream (states (T, n) in ``rec.y``, segment ids in ``rec.segment``).
        settings: the configuration.

    Returns:
        The field and ``{"wall_s"}``: differentiation plus regression.
    """
    start = time.perf_counter()
    xs, xdots = _derivatives(rec, settings)
    field = _regress(xs, xdots, 1.0 / rec.fs, system.known_field(case), settings, system.state_names)
    return field, {"wall_s": time.perf_counter() - start}


def choose(system: System, case: str, rec: SimulatedStream, states: dict[str, Tensor], mode: str, differentiation: str,
           windows: Sequence[int] = WINDOWS, thresholds: Sequence[float] = THRESHOLDS,
           degrees: Sequence[int] = DEGREES) -> tuple[SindySettings, list[dict]]:
    """The settings with the lowest ``e_field_visited`` on one stream (seed 0's).

    Args:
        system, case, rec: the plant, its case and the stream.
        states: the evaluation states (`torch_ude.metrics.evaluation_states`).
        mode, differentiation: which variant (see `SINDY_MODES`, `DIFFERENTIATIONS`).
        windows, thresholds, degrees: the candidates (windows only for ``"savgol"``).

    Returns:
        The best settings and every candidate's ``{"settings", "e_field_visited", "e_field"}``.
    """
    known = system.known_field(case)
    tried = []
    for window in windows if differentiation == "savgol" else (None,):
        xs, xdots = _derivatives(rec, SindySettings(mode, differentiation, window, thresholds[0], degrees[0]))
        for threshold, degree in itertools.product(thresholds, degrees):
            settings = SindySettings(mode, differentiation, window, threshold, degree)
            field = _regress(xs, xdots, 1.0 / rec.fs, known, settings, system.state_names)
            metrics = evaluate_field(field, system, case, states)
            tried.append({"settings": settings, "e_field_visited": metrics["e_field_visited"],
                          "e_field": metrics["e_field"]})
    best = min(tried, key=lambda r: r["e_field_visited"])
    return best["settings"], tried


def choose_variants(system: System, case: str, rec: SimulatedStream, states: dict[str, Tensor],
                    windows: Sequence[int] = WINDOWS, thresholds: Sequence[float] = THRESHOLDS,
                    degrees: Sequence[int] = DEGREES) -> dict[str, dict]:
    """`choose` for every variant (`SINDY_VARIANTS`) on one stream, JSON-ready.

    Args:
        system, case, rec, states, windows, thresholds, degrees: as for `choose`.

    Returns:
        Per variant name ``{"settings": ..., "tried": [{"settings": ..., "e_field_visited": ...}, ...]}``,
        the settings as dictionaries of the `SindySettings` fields.
    """
    out = {}
    for name, (mode, diff) in zip(SINDY_VARIANTS, itertools.product(SINDY_MODES, DIFFERENTIATIONS)):
        best, tried = choose(system, case, rec, states, mode, diff, windows, thresholds, degrees)
        out[name] = {"settings": vars(best), "tried": [{"settings": vars(t["settings"]),
                                                        "e_field_visited": t["e_field_visited"]} for t in tried]}
    return out

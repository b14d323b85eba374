"""SUBNET (Beintema et al., 2023), the black-box peer of Tables 1 and 2, through the peer's own package deepSI.

``deepSI.SUBNET`` (``deepsi==0.4.4``, the ``peers`` extra) builds the encoder ``psi``, state map ``f`` and output
map ``h`` (its residual MLPs, its input/output normalization from the training data) and ``deepSI.fit`` trains them
with its multiple-shooting loss (Adam on the mean normalized squared output error over ``T`` simulated steps from
each encoded sub-section), keeping the iterate with the lowest simulation error on the *training* record
(`subnet_simulation_records`), so validation data are never seen in training. This module feeds it a recording
(`subnet_data`: u = the recording's inputs, y = its outputs, one record per stretch between gaps), trains it
(`train_subnet`) and scores it in output units, not normalized (`subnet_errors`, `subnet_simulation_error`):

* one-step: ``x^_t = psi(u_{t-nb..t-1}, y_{t-na..t-1})`` is SUBNET's state at sample t (the encoder holds the
  step from t - 1 to t), ``y^_t = h(x^_t)``; every t >= max(na, nb). It uses the outputs and inputs up to
  t - 1, the information of the MHE rows' ``C x^_N`` vs ``y~_N`` (Eq. 9);
* one-f-step: ``y^_{t+1} = h(f(x^_t, u_t))``, one further step of f (y_t unused);
* n-step: the error after ``horizon - 1`` steps of f from each encoded state, and its mean per step;
* simulation: deepSI's ``simulate`` of the whole record from the encoded first state.

deepSI is imported by the functions that need it, so importing this module needs only torch and numpy.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..data.recording import Recording

__all__ = ["SubnetSettings", "count_sub_sections", "subnet_data", "subnet_errors", "subnet_predictions",
           "subnet_rollouts", "subnet_simulation_error", "subnet_simulation_records", "train_subnet"]


@dataclass(frozen=True)
class SubnetSettings:
    """SUBNET's structure and training (deepSI's names).

    Attributes:
        nx: latent state dimension (the paper: 3, the physical dimension).
        na: past outputs the encoder reads.
        nb: past inputs the encoder reads.
        T: simulated steps per sub-section in the loss (truncation length).
        batch_size: sub-sections per Adam step.
        iterations: Adam steps (``n_its``).
        val_freq: steps between the simulation checks that pick the kept iterate.
        horizon: steps of the n-step error (50 = 1 s).
        seed: torch seed of the networks' initialization.
    """

    nx: int = 3
    na: int = 10
    nb: int = 10
    T: int = 50
    batch_size: int = 256
    iterations: int = 6000
    val_freq: int = 250
    horizon: int = 50
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("nx", "na", "nb", "T", "batch_size", "iterations", "val_freq", "horizon"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer; got {value!r}.")
        if self.horizon < 2:
            raise ValueError(f"horizon must be >= 2 (the n-step error needs at least one step of f); "
                             f"got {self.horizon}.")


def subnet_data(rec: Recording, name: str) -> Any:
    """A recording as deepSI's ``Input_output_data``: u = its inputs (T, n_u), y = its outputs (T, n_y), float32.

    A recording with gaps (``breaks``) becomes a list, one ``Input_output_data`` per contiguous stretch
    (`mhe.data.recording.Recording.stretches`), which deepSI takes wherever it takes one record; no sub-section
    spans a gap. Concatenated in order, the stretches are the recording's rows.

    Args:
        rec: the recording (inputs and outputs at its sample time ``dt`` in seconds).
        name: the record's name (a stretch's adds its rows).

    Returns:
        One ``deepSI.Input_output_data``, or a list of them (one per stretch).
    """
    from deepSI import Input_output_data

    def part(a: int, b: int, label: str) -> Any:
        return Input_output_data(u=rec.inputs[a:b].numpy().astype(np.float32),
                                 y=rec.outputs[a:b].numpy().astype(np.float32), sampling_time=rec.dt, name=label)

    if not rec.breaks:
        return part(0, len(rec.outputs), name)
    return [part(a, b, f"{name}, rows {a}-{b - 1}") for a, b in rec.stretches()]


def count_sub_sections(data: Any, settings: SubnetSettings, steps: int, label: str) -> int:
    """The sub-sections of ``steps`` samples after an encoder's past window (``max(na, nb)`` samples) in ``data``.

    Args:
        data: ``Input_output_data``, or a list of stretches (`subnet_data`).
        settings: the encoder's ``na`` and ``nb``.
        steps: samples per sub-section after the past window (``T``, or the n-step ``horizon``).
        label: what ``data`` is, for the error message.

    Returns:
        Their number, summed over the stretches.

    Raises:
        ValueError: a stretch shorter than ``max(na, nb) + steps``.
    """
    need = max(settings.na, settings.nb) + steps
    stretches = data if isinstance(data, list) else [data]
    short = [len(d) for d in stretches if len(d) < need]
    if short:
        raise ValueError(f"{label} has stretches of {short} samples, fewer than max(na, nb) + {steps} = {need}; "
                         "lower na, nb, T or horizon, or choose longer blocks.")
    return sum(len(d) - need + 1 for d in stretches)


def train_subnet(data: Any, settings: SubnetSettings) -> tuple[torch.nn.Module, dict]:
    """Build deepSI's SUBNET on ``data`` and train it with ``deepSI.fit`` (validation = ``data`` itself,
    `subnet_simulation_records`).

    Args:
        data: training ``Input_output_data``, or a list of stretches (`subnet_data`).
        settings: structure and training.

    Returns:
        The model (deepSI keeps the iterate with the lowest training simulation error) and a dict
        with ``seconds`` (fit's wall time), the loss of deepSI's objective on all training
        sub-sections before and after (``loss_initial``, ``loss_final``: mean normalized squared
        error over T steps), fit's ``NRMS_train``/``NRMS_val`` histories and the epochs.

    Raises:
        ValueError: the record is too short for na, nb and T, or batch_size exceeds its sub-sections.
    """
    import deepSI as dsi
    from deepSI.fitting import compute_NMSE

    windows = count_sub_sections(data, settings, settings.T, "the training record")
    if settings.batch_size > windows:
        raise ValueError(f"batch_size must be at most the {windows} training sub-sections of T = {settings.T} "
                         f"steps; got {settings.batch_size}.")
    torch.manual_seed(settings.seed)
    nu, ny, norm = dsi.get_nu_ny_and_auto_norm(data)
    model = dsi.SUBNET(nu, ny, norm, nx=settings.nx, nb=settings.nb, na=settings.na).float()
    arrays, ids = model.create_arrays(data, T=settings.T)
    batch = [a[ids] for a in arrays]
    with torch.no_grad():
        before = float(compute_NMSE(model, *batch))
    start = time.perf_counter()
    fitted = dsi.fit(model, data, subnet_simulation_records(data), n_its=settings.iterations, T=settings.T,
                     batch_size=settings.batch_size, val_freq=settings.val_freq)
    seconds = time.perf_counter() - start
    with torch.no_grad():
        after = float(compute_NMSE(model, *batch))
    info = {"seconds": seconds, "loss_initial": before, "loss_final": after, "sub_sections": windows,
            "epochs": settings.iterations * settings.batch_size / windows,
            "NRMS_train": [float(v) for v in fitted["NRMS_train"]],
            "NRMS_val_on_train": [float(v) for v in fitted["NRMS_val"]]}
    return model, info


def subnet_simulation_records(data: Any) -> Any:
    """The records deepSI's ``fit`` simulates to keep its best iterate: ``data`` itself, or for a list of
    stretches each cut to the shortest one's length (``fit`` simulates a list only of equal lengths)."""
    if not isinstance(data, list):
        return data
    from deepSI import Input_output_data

    n = min(len(d) for d in data)
    return [Input_output_data(u=d.u[:n], y=d.y[:n], sampling_time=d.sampling_time, name=d.name) for d in data]


def subnet_predictions(model: torch.nn.Module, data: Any, steps: int) -> tuple[np.ndarray, np.ndarray, torch.Tensor]:
    """SUBNET's predictions of ``steps`` samples from every encoded state, the measured outputs and their samples.

    A row starting at sample ``t`` (``t >= max(na, nb)``) has ``x^_t = psi(u_{t-nb..t-1}, y_{t-na..t-1})`` and
    predicts ``h(x^_t), h(f(x^_t, u_t)), ...`` of samples ``t..t+steps-1`` (outputs up to ``t - 1`` only).
    For one record row ``i`` starts at ``t = i + max(na, nb)``; for a list of stretches (`subnet_data`) ``t``
    counts the rows of the stretches in order and no row spans two stretches.

    Args:
        model: a trained ``deepSI.SUBNET``.
        data: ``Input_output_data``, or a list of them.
        steps: samples predicted from each encoded state (>= 1).

    Returns:
        Predicted and measured outputs, each (R, steps, n_y), and each row's first sample ``t``, (R,);
        R = T - max(na, nb) - steps + 1 for one record of T samples.
    """
    from deepSI.models import past_future_arrays

    with torch.no_grad():
        (upast, ypast, ufuture, yfuture), ids = past_future_arrays(data, model.na, model.nb, T=steps)
        pred = model(upast[ids], ypast[ids], ufuture[ids]).numpy()
    return pred, yfuture[ids].numpy(), torch.as_tensor(ids) + max(model.na, model.nb)


def subnet_errors(model: torch.nn.Module, data: Any, horizon: int) -> dict:
    """One-step and n-step output errors of a trained SUBNET on ``data`` (module docstring).

    Args:
        model: a trained ``deepSI.SUBNET``.
        data: ``Input_output_data``, or a list of stretches (no sub-section spans two).
        horizon: steps of the n-step error.

    Returns:
        ``one_step``, ``one_f_step`` and ``n_step`` dicts (``mse`` over samples and outputs, ``rmse`` per
        output, ``samples``), and ``curve``: the mse at each of the ``horizon`` steps.
    """
    def score(err: np.ndarray) -> dict:
        return {"mse": float((err ** 2).mean()), "rmse": np.sqrt((err ** 2).mean(0)).tolist(), "samples": len(err)}

    one = np.subtract(*subnet_predictions(model, data, 1)[:2])[:, 0]
    err = np.subtract(*subnet_predictions(model, data, horizon)[:2])
    return {"one_step": score(one), "one_f_step": score(err[:, 1]), "n_step": {**score(err[:, -1]),
            "steps_of_f": horizon - 1}, "curve": (err ** 2).mean(axis=(0, 2)).tolist()}


def subnet_simulation_error(model: torch.nn.Module, data: Any) -> tuple[dict, np.ndarray]:
    """deepSI's simulation of the whole record ``data`` (one ``Input_output_data``) from the encoded first state.

    Returns:
        ``mse`` over the simulated samples and outputs, ``rmse`` and ``nrms`` (RMSE / std of y) per
        output, ``samples``; and the simulated outputs, shape (T, n_y) (the first max(na, nb) are the data).
    """
    with torch.no_grad():
        y_sim = model.simulate(data).y
    k = max(model.na, model.nb)
    err = y_sim[k:] - data.y[k:]
    rmse = np.sqrt((err ** 2).mean(0))
    return {"mse": float((err ** 2).mean()), "rmse": rmse.tolist(), "nrms": (rmse / data.y[k:].std(0)).tolist(),
            "samples": len(err)}, y_sim


def subnet_rollouts(model: torch.nn.Module, data: Any, first: torch.Tensor, steps: int
                    ) -> tuple[torch.Tensor, np.ndarray, np.ndarray]:
    """SUBNET's open-loop predictions of samples ``f .. f + steps - 1`` for each ``f`` in ``first`` (where possible).

    The encoder reads u and y up to ``f - 1``; a start needs ``max(na, nb)`` samples before it and
    ``steps`` samples from it on, all in one stretch of the recording.

    Args:
        model: a ``deepSI.SUBNET``.
        data: ``Input_output_data``, or a list of stretches (`subnet_data`).
        first: the first predicted sample of each rollout, shape (M,).
        steps: samples per rollout.

    Returns:
        The starts kept (M',), the predictions and the measured outputs, each (M', steps, n_y).
    """
    pred, meas, starts = subnet_predictions(model, data, steps)
    first = first[torch.isin(first, starts)]
    rows = torch.searchsorted(starts, first).numpy()
    return first, pred[rows], meas[rows]

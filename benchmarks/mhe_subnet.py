"""Table 1's SUBNET row: deepSI's SUBNET (latent dimension 3) on BayesRace, train ETHZ, validate ETHZMobil.

The peer's own package (``deepsi==0.4.4``, Beintema et al. 2023) does everything that is SUBNET:
``deepSI.SUBNET`` builds the encoder ``psi``, state map ``f`` and output map ``h`` (its residual
MLPs, its input/output normalization from the training data) and ``deepSI.fit`` trains them with
its multiple-shooting loss (Adam on the mean normalized squared output error over ``T`` simulated
steps from each encoded sub-section), keeping the iterate with the lowest validation simulation
error. That selection runs on the *training* record (``fit``'s ``val`` = the training data), so
the validation track is never seen in training.

Data are those of the PEM-MHE row (`benchmarks.mhe_bayesrace`): the ``dstates`` trajectories read by
`mhe.data.logs.BayesRaceRecording`, inputs u = (delta, gamma) (the two recorded inputs), outputs
y = (vx, omega), dt = 0.02 s; DYN-PP-ETHZ trains, DYN-PP-ETHZMobil validates. Metrics, in m/s and
rad/s, not normalized (Table 1's r^2, mean over samples and both outputs):

* ``one_step``: ``x^_t = psi(u_{t-nb..t-1}, y_{t-na..t-1})`` is SUBNET's state at sample t (the
  encoder holds the step from t - 1 to t), ``y^_t = h(x^_t)``; every t >= max(na, nb). It uses
  the outputs and inputs up to t - 1, the information of the MHE rows' ``C x^_N`` vs ``y~_N``.
* ``one_f_step``: ``y^_{t+1} = h(f(x^_t, u_t))``, one further step of f (y_t unused).
* ``n_step``: the error after ``horizon - 1`` steps of f from each encoded state (every start t),
  and ``curve``, its mean per step;
* ``simulation``: deepSI's ``simulate`` of the whole record from the encoded first state.

No parameter error: SUBNET is a black box. Training time = the wall time of ``deepSI.fit``.
Prints the row and writes ``subnet.json`` and ``subnet.png`` to ``--out``::

    python -m benchmarks.mhe_subnet
    python -m benchmarks.mhe_subnet --iterations 50 --out results/mhe_subnet_short
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from mhe.data.logs import BayesRaceRecording
from mhe.data.recording import Recording

__all__ = ["PAPER", "SubnetSettings", "recording_data", "io_data", "train", "simulation_records", "predictions",
           "prediction_errors", "simulation_error", "main"]

TRAIN = "../shared/data/bayesrace/DYN-PP-ETHZ.npz"
VALIDATION = "../shared/data/bayesrace/DYN-PP-ETHZMobil.npz"
PAPER = {"one_step_train": 2.85e-2, "one_step_validation": 1.66e-1, "training_time": "2 min"}


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


def recording_data(rec: Recording, name: str):
    """A recording as deepSI's ``Input_output_data``: u = its inputs (T, n_u), y = its outputs (T, n_y), float32.

    A recording with gaps (``breaks``) becomes a list, one ``Input_output_data`` per contiguous stretch
    (`mhe.data.recording.Recording.stretches`), which deepSI takes wherever it takes one record; no sub-section
    spans a gap. Concatenated in order, the stretches are the recording's rows.
    """
    from deepSI import Input_output_data

    def part(a: int, b: int, label: str):
        return Input_output_data(u=rec.inputs[a:b].numpy().astype(np.float32),
                                 y=rec.outputs[a:b].numpy().astype(np.float32), sampling_time=rec.dt, name=label)

    if not rec.breaks:
        return part(0, len(rec.outputs), name)
    return [part(a, b, f"{name}, rows {a}-{b - 1}") for a, b in rec.stretches()]


def io_data(path: str | Path):
    """A BayesRace recording as deepSI's ``Input_output_data``: u = (delta, gamma), y = (vx, omega), float32.

    Raises:
        ValueError: no such file, or not a BayesRace ``.npz`` (from `mhe.data.logs.BayesRaceRecording`).
    """
    return recording_data(BayesRaceRecording(str(path), trajectory="dstates").record(), Path(path).stem)


def _check_length(data, settings: SubnetSettings, steps: int, label: str) -> int:
    need = max(settings.na, settings.nb) + steps
    stretches = data if isinstance(data, list) else [data]
    short = [len(d) for d in stretches if len(d) < need]
    if short:
        raise ValueError(f"{label} has stretches of {short} samples, fewer than max(na, nb) + {steps} = {need}; "
                         "lower na, nb, T or horizon, or choose longer blocks.")
    return sum(len(d) - need + 1 for d in stretches)


def train(data, settings: SubnetSettings) -> tuple[torch.nn.Module, dict]:
    """Build deepSI's SUBNET on ``data`` and train it with ``deepSI.fit`` (validation = ``data`` itself,
    `simulation_records`).

    Args:
        data: training ``Input_output_data`` (see `io_data`), or a list of stretches (`recording_data`).
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

    windows = _check_length(data, settings, settings.T, "the training record")
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
    fitted = dsi.fit(model, data, simulation_records(data), n_its=settings.iterations, T=settings.T,
                     batch_size=settings.batch_size, val_freq=settings.val_freq)
    seconds = time.perf_counter() - start
    with torch.no_grad():
        after = float(compute_NMSE(model, *batch))
    info = {"seconds": seconds, "loss_initial": before, "loss_final": after, "sub_sections": windows,
            "epochs": settings.iterations * settings.batch_size / windows,
            "NRMS_train": [float(v) for v in fitted["NRMS_train"]],
            "NRMS_val_on_train": [float(v) for v in fitted["NRMS_val"]]}
    return model, info


def simulation_records(data):
    """The records deepSI's ``fit`` simulates to keep its best iterate: ``data`` itself, or for a list of
    stretches each cut to the shortest one's length (``fit`` simulates a list only of equal lengths)."""
    if not isinstance(data, list):
        return data
    from deepSI import Input_output_data

    n = min(len(d) for d in data)
    return [Input_output_data(u=d.u[:n], y=d.y[:n], sampling_time=d.sampling_time, name=d.name) for d in data]


def predictions(model: torch.nn.Module, data, steps: int) -> tuple[np.ndarray, np.ndarray, torch.Tensor]:
    """SUBNET's predictions of ``steps`` samples from every encoded state, the measured outputs and their samples.

    A row starting at sample ``t`` (``t >= max(na, nb)``) has ``x^_t = psi(u_{t-nb..t-1}, y_{t-na..t-1})`` and
    predicts ``h(x^_t), h(f(x^_t, u_t)), ...`` of samples ``t..t+steps-1`` (outputs up to ``t - 1`` only).
    For one record row ``i`` starts at ``t = i + max(na, nb)``; for a list of stretches (`recording_data`) ``t``
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


def prediction_errors(model: torch.nn.Module, data, horizon: int) -> dict:
    """One-step and n-step output errors of a trained SUBNET on ``data`` (see the module docstring).

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

    one = np.subtract(*predictions(model, data, 1)[:2])[:, 0]
    err = np.subtract(*predictions(model, data, horizon)[:2])
    return {"one_step": score(one), "one_f_step": score(err[:, 1]), "n_step": {**score(err[:, -1]),
            "steps_of_f": horizon - 1}, "curve": (err ** 2).mean(axis=(0, 2)).tolist()}


def simulation_error(model: torch.nn.Module, data) -> tuple[dict, np.ndarray]:
    """deepSI's simulation of the whole record from the encoded first state.

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


def _plot(path: Path, data, y_sim: np.ndarray, model: torch.nn.Module, info: dict) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    one = predictions(model, data, 1)[0][:, 0]
    k = max(model.na, model.nb)
    t = np.arange(len(data)) * data.sampling_time
    fig, axes = plt.subplots(3, 1, figsize=(9, 8))
    for j, (ax, label) in enumerate(zip(axes[:2], ("vx [m/s]", "omega [rad/s]"))):
        ax.plot(t, data.y[:, j], "k", label="measured (ETHZMobil)")
        ax.plot(t[k:], one[:, j], "C0--", label="SUBNET one-step")
        ax.plot(t[k:], y_sim[k:, j], "C3", lw=0.8, label="SUBNET simulation")
        ax.set_ylabel(label)
    axes[0].legend(fontsize=8)
    axes[1].set_xlabel("t [s]")
    its = np.arange(len(info["NRMS_train"])) * info["val_freq"]
    axes[2].semilogy(its, info["NRMS_train"], label="fit: NRMS train (T steps)")
    axes[2].semilogy(its, info["NRMS_val_on_train"], label="fit: NRMS simulation of the training record")
    axes[2].set_xlabel("Adam step")
    axes[2].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    """Train, score, print the row and write ``subnet.json`` and ``subnet.png``; returns the JSON dict."""
    d = SubnetSettings()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", default=TRAIN, help="the BayesRace recording to train on")
    ap.add_argument("--validation", default=VALIDATION, help="the BayesRace recording to validate on")
    ap.add_argument("--nx", type=int, default=d.nx)
    ap.add_argument("--na", type=int, default=d.na)
    ap.add_argument("--nb", type=int, default=d.nb)
    ap.add_argument("--T", type=int, default=d.T, help="truncation length of the multiple-shooting loss")
    ap.add_argument("--batch-size", type=int, default=d.batch_size)
    ap.add_argument("--iterations", type=int, default=d.iterations, help="Adam steps")
    ap.add_argument("--val-freq", type=int, default=d.val_freq)
    ap.add_argument("--horizon", type=int, default=d.horizon, help="steps of the n-step error")
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--out", default="results/mhe_subnet")
    args = ap.parse_args(argv)
    settings = SubnetSettings(nx=args.nx, na=args.na, nb=args.nb, T=args.T, batch_size=args.batch_size,
                              iterations=args.iterations, val_freq=args.val_freq, horizon=args.horizon,
                              seed=args.seed)
    train_data, val_data = io_data(args.train), io_data(args.validation)
    for data, label in ((train_data, "the training record"), (val_data, "the validation record")):
        _check_length(data, settings, settings.horizon, label)
    model, info = train(train_data, settings)
    info["val_freq"] = settings.val_freq
    rows, sims = {}, {}
    for label, data in (("train", train_data), ("validation", val_data)):
        rows[label] = prediction_errors(model, data, settings.horizon)
        rows[label]["simulation"], sims[label] = simulation_error(model, data)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result = {"settings": asdict(settings), "train_file": args.train, "validation_file": args.validation,
              "deepsi_version": _deepsi_version(), "torch_threads": torch.get_num_threads(),
              "training": info, "rows": rows, "paper": PAPER}
    (out / "subnet.json").write_text(json.dumps(result, indent=1))
    _plot(out / "subnet.png", val_data, sims["validation"], model, info)
    print("| method | one-step train | one-step validation | n-step validation | training time |")
    print("| --- | --- | --- | --- | --- |")
    print(f"| SUBNET, paper | {PAPER['one_step_train']:.3g} | {PAPER['one_step_validation']:.3g} | - | "
          f"{PAPER['training_time']} |")
    print(f"| SUBNET (deepSI, nx = {settings.nx}), ours | {rows['train']['one_step']['mse']:.3g} | "
          f"{rows['validation']['one_step']['mse']:.3g} | {rows['validation']['n_step']['mse']:.3g} "
          f"({settings.horizon - 1} steps) | {info['seconds']:.1f} s |")
    print(f"loss {info['loss_initial']:.4g} -> {info['loss_final']:.4g}; {info['epochs']:.0f} epochs; "
          f"wrote {out / 'subnet.json'} and {out / 'subnet.png'}")
    return result


def _deepsi_version() -> str:
    from importlib.metadata import version
    return version("deepsi")


if __name__ == "__main__":
    main()

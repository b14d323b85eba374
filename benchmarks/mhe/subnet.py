"""Table 1's SUBNET row: deepSI's SUBNET (latent dimension 3) on BayesRace, train ETHZ, validate ETHZMobil.

The peer's own package (``deepsi==0.4.4``, Beintema et al. 2023) does everything that is SUBNET
(`mhe.peers.subnet` feeds and scores it):
``deepSI.SUBNET`` builds the encoder ``psi``, state map ``f`` and output map ``h`` (its residual
MLPs, its input/output normalization from the training data) and ``deepSI.fit`` trains them with
its multiple-shooting loss (Adam on the mean normalized squared output error over ``T`` simulated
steps from each encoded sub-section), keeping the iterate with the lowest validation simulation
error. That selection runs on the *training* record (``fit``'s ``val`` = the training data), so
the validation track is never seen in training.

Data are those of the PEM-MHE row (``benchmarks.mhe.bayesrace``): the ``dstates`` trajectories read by
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

    python -m benchmarks.mhe.subnet
    python -m benchmarks.mhe.subnet --iterations 50 --out results/mhe_subnet_short
"""
from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from benchmarks.common import BAYESRACE_VALIDATION as VALIDATION, markdown_table
from mhe.data.logs import BayesRaceRecording
from mhe.peers.subnet import (SubnetSettings, count_sub_sections, subnet_data, subnet_errors, subnet_predictions,
                              subnet_simulation_error, train_subnet)

__all__ = ["PAPER", "io_data", "main"]

TRAIN = "../shared/data/bayesrace/DYN-PP-ETHZ.npz"
PAPER = {"one_step_train": 2.85e-2, "one_step_validation": 1.66e-1, "training_time": "2 min"}


def io_data(path: str | Path) -> object:
    """A BayesRace recording as deepSI's ``Input_output_data``: u = (delta, gamma), y = (vx, omega), float32.

    Raises:
        ValueError: no such file, or not a BayesRace ``.npz`` (from `mhe.data.logs.BayesRaceRecording`).
    """
    return subnet_data(BayesRaceRecording(str(path), trajectory="dstates").record(), Path(path).stem)


def _plot(path: Path, data, y_sim: np.ndarray, model: torch.nn.Module, info: dict) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    one = subnet_predictions(model, data, 1)[0][:, 0]
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
        count_sub_sections(data, settings, settings.horizon, label)
    model, info = train_subnet(train_data, settings)
    info["val_freq"] = settings.val_freq
    rows, sims = {}, {}
    for label, data in (("train", train_data), ("validation", val_data)):
        rows[label] = subnet_errors(model, data, settings.horizon)
        rows[label]["simulation"], sims[label] = subnet_simulation_error(model, data)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result = {"settings": asdict(settings), "train_file": args.train, "validation_file": args.validation,
              "deepsi_version": _deepsi_version(), "torch_threads": torch.get_num_threads(),
              "training": info, "rows": rows, "paper": PAPER}
    (out / "subnet.json").write_text(json.dumps(result, indent=1))
    _plot(out / "subnet.png", val_data, sims["validation"], model, info)
    markdown_table(("method", "one-step train", "one-step validation", "n-step validation", "training time"), [
        ("SUBNET, paper", f"{PAPER['one_step_train']:.3g}", f"{PAPER['one_step_validation']:.3g}", "-",
         PAPER["training_time"]),
        (f"SUBNET (deepSI, nx = {settings.nx}), ours", f"{rows['train']['one_step']['mse']:.3g}",
         f"{rows['validation']['one_step']['mse']:.3g}",
         f"{rows['validation']['n_step']['mse']:.3g} ({settings.horizon - 1} steps)", f"{info['seconds']:.1f} s")])
    print(f"loss {info['loss_initial']:.4g} -> {info['loss_final']:.4g}; {info['epochs']:.0f} epochs; "
          f"wrote {out / 'subnet.json'} and {out / 'subnet.png'}")
    return result


def _deepsi_version() -> str:
    from importlib.metadata import version
    return version("deepsi")


if __name__ == "__main__":
    main()

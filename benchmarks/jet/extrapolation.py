"""Trust outside the data: jet matching against its own physics on splits that leave the training range.

    python -m benchmarks.jet.extrapolation [--splits single double simulated] [--seeds 0 1 2]
                                           [--config-set NAME CONFIG [CONFIG ...]] [--margins 0.1 0.25 0.5 1 2]

Splits (issue 31):

* ``single``: ``configs/dfki_pendulum.yaml`` + ``configs/dfki_pendulum_extrapolate.yaml`` (trained on
  energy shaping and gravity compensation, |tau| <= 3.5 N m; validated on the DDP swing-up and
  the PD run, up to 16.6 N m);
* ``double``: ``configs/dfki_double_pendulum.yaml`` + ``configs/dfki_double_pendulum_extrapolate.yaml``
  (trained on the three lowest-torque trajectories, validated on the two highest);
* ``simulated``: the DFKI double pendulum simulated with the lab's model 3.0 (friction, rotor
  inertia) as the truth and the config's model 3.1 as the known model: trained on the recorded
  torques of trajectories 00-02 replayed on model 3.0 (at most 1.0 N m), validated on two
  simulated swing-ups driven to 5 N m with joint speeds up to 31 rad/s (a speed-limited energy
  pump, `torch_ude.systems.swing_up_torques`; both simulated by `torch_ude.systems.simulate_torque_law`);
  500 Hz with encoder-like noise, written to ``results/jet_extrapolation/simulated/``.

Per split and seed, one ``torch-ude fit`` of the split's configs (``--config-set`` replaces them),
then on every validation file the 1 s and 5 s open-loop NRMSE (`torch_ude.prediction`, angles on
the circle) of:

* ``exported``: the field the run exported (the hybrid with its trust envelope, or its physics
  alone where the residual check rejected the residual);
* ``hybrid``: the hybrid with the envelope, before the check;
* ``no_envelope``: the same trained weights without the envelope (what the library did before);
* ``f_known``: the config's known model alone;
* ``margin_M``: with ``--margins``, the hybrid with an envelope of fade band M (the margin study).

A rollout diverges when its NRMSE is not finite. The target: ``exported`` at most ``f_known`` at
1 s and 5 s on every file and seed, no divergence. Writes
``results/jet_extrapolation/jet_extrapolation.json`` and ``nrmse.png``.
"""
from __future__ import annotations

import argparse
import copy
import math
import sys
from pathlib import Path

import numpy as np
import torch
from matplotlib.figure import Figure

from benchmarks.common import RESULTS, save
from torch_ude.cli import main as cli_main
from torch_ude.envelope import install_span
from torch_ude.field import HybridField
from torch_ude.prediction import prediction_errors
from torch_ude.recorded import write_csv_table
from torch_ude.systems import TorqueDoublePendulumModel, simulate_torque_law, swing_up_torques

NAME = "jet_extrapolation"
DATA = Path("../shared/data")
SPLITS = {
    "single": ["configs/dfki_pendulum.yaml", "configs/dfki_pendulum_extrapolate.yaml"],
    "double": ["configs/dfki_double_pendulum.yaml", "configs/dfki_double_pendulum_extrapolate.yaml"],
    "simulated": ["configs/dfki_double_pendulum.yaml"],
}
HORIZONS = ("open_loop_1s_nrmse", "open_loop_5s_nrmse")
#: Encoder-like noise of the simulated logs: rad, rad/s (the real trajectories' quantization is about 1e-3 rad).
NOISE = (1e-3, 2e-2)
#: The columns of the simulated logs: the DFKI double pendulum's.
COLUMNS = ("time", "pos_meas1", "pos_meas2", "vel_meas1", "vel_meas2", "tau_meas1", "tau_meas2")


def _write_log(path: Path, times: np.ndarray, states: np.ndarray, torques: np.ndarray, seed: int) -> None:
    """One simulated log in the DFKI double pendulum's columns, the states with encoder-like noise (`NOISE`)."""
    rng = np.random.default_rng(seed)
    noisy = states + rng.standard_normal(states.shape) * np.repeat(NOISE, 2)
    write_csv_table(path, dict(zip(COLUMNS, np.column_stack((times, noisy, torques)).T)))


def simulated_logs(folder: Path) -> tuple[list[str], list[str]]:
    """Write the simulated split's logs (module doc) into ``folder``; returns (training, validation) paths."""
    folder.mkdir(parents=True, exist_ok=True)
    truth = TorqueDoublePendulumModel.from_lab_file(DATA / "dfki_double_pendulum/model_3.0_parameters.yml")
    h, decimate = 1e-3, 2  # 1 kHz RK4, logged at 500 Hz
    train, val = [], []
    for i in range(3):
        rec = np.genfromtxt(DATA / f"dfki_double_pendulum/trajectory_0{i}.csv", delimiter=",", names=True)
        t_rec, tau = rec["time"], np.column_stack((rec["tau_meas1"], rec["tau_meas2"]))
        x0 = np.array([rec["pos_meas1"][0], rec["pos_meas2"][0], 0.0, 0.0])

        def replay(t: float, x: np.ndarray, t_rec=t_rec, tau=tau) -> np.ndarray:
            return np.array([np.interp(t, t_rec, tau[:, 0]), np.interp(t, t_rec, tau[:, 1])])
        states, torques = simulate_torque_law(truth, x0, replay, float(t_rec[-1]), h)
        path = folder / f"replay_0{i}.csv"
        _write_log(path, np.arange(len(states))[::decimate] * h, states[::decimate], torques[::decimate], i)
        train.append(str(path))
    for j, (gains, speeds) in enumerate((((1.0, 0.5), (12.0, 20.0)), ((2.0, 1.0), (15.0, 25.0)))):
        states, torques = simulate_torque_law(truth, np.array([0.1, -0.1, 0.0, 0.0]), swing_up_torques(gains, speeds),
                                              10.0, h)
        path = folder / f"swing_up_{j}.csv"
        _write_log(path, np.arange(len(states))[::decimate] * h, states[::decimate], torques[::decimate], 10 + j)
        val.append(str(path))
    return train, val


def _score(field, dm, log) -> dict:
    errors = prediction_errors(field, [log], dm.horizons, periodic=dm.system.periodic)
    return {k: errors.get(k) for k in ("one_step_nrmse", *HORIZONS, "outside_envelope")}


def run_split(name: str, configs: list[str], seed: int, folder: Path, margins: list[float]) -> list[dict]:
    """One fit of the split and the per-file scores of every model (module doc)."""
    args = ["fit"] + [a for c in configs for a in ("--config", c)] + [
        "--seed_everything", str(seed), "--trainer.logger", "false", "--trainer.enable_progress_bar", "false",
        "--trainer.default_root_dir", str(folder)]
    cli = cli_main(args)
    dm, module = cli.datamodule, cli.model
    hybrid = module.averaged_field()
    models = {"exported": module.exported, "hybrid": hybrid, "no_envelope": hybrid.without_envelope(),
              "f_known": HybridField(copy.deepcopy(dm.system.known)).without_residual()}
    span = module.training_span()
    for m in margins:
        f = copy.deepcopy(hybrid)
        install_span([f], dm.system, span, m)
        models[f"margin_{m:g}"] = f
    rows = []
    for log, path in zip(dm.val_logs, dm.val_files):
        row = {"split": name, "seed": seed, "file": Path(path).name,
               "residual_rejected": module.exported is not hybrid}
        for key, field in models.items():
            row[key] = _score(field, dm, log)
        rows.append(row)
        print(f"{name} seed {seed} {row['file']}: " + ", ".join(
            f"{k} {row[k]['open_loop_1s_nrmse']:.3f}/{row[k]['open_loop_5s_nrmse'] or math.nan:.3f}"
            for k in ("exported", "hybrid", "no_envelope", "f_known")), flush=True)
    return rows


def _met(rows: list[dict], model: str = "exported") -> dict:
    """Per horizon: how many (file, seed) pairs have ``model`` at most f_known, and the divergences."""
    out = {}
    for key in HORIZONS:
        pairs = [(r[model][key], r["f_known"][key]) for r in rows if r[model][key] is not None]
        out[key] = {"at_most_f_known": sum(1 for a, b in pairs if math.isfinite(a) and a <= b), "pairs": len(pairs),
                    "diverged": sum(1 for a, _ in pairs if not math.isfinite(a))}
    return out


def figure(rows: list[dict]) -> Figure:
    """1 s NRMSE per (split, file, seed) of the exported model, the hybrid without envelope and f_known."""
    fig = Figure(figsize=(max(6.0, 0.5 * len(rows)), 4.0))
    ax = fig.add_subplot(1, 1, 1)
    labels = [f"{r['split']}\n{r['file'].removesuffix('.csv')}\ns{r['seed']}" for r in rows]
    x = np.arange(len(rows))
    for i, key in enumerate(("exported", "no_envelope", "f_known")):
        ax.bar(x + (i - 1) * 0.27, [min(r[key]["open_loop_1s_nrmse"], 20.0) for r in rows], 0.27, label=key)
    ax.set_xticks(x, labels, fontsize=6)
    ax.set_yscale("log")
    ax.set_ylabel("1 s open-loop NRMSE (capped at 20)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def main(argv: list[str] | None = None) -> None:
    """Run the splits and save the JSON and the figure."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--splits", nargs="+", choices=sorted(SPLITS), default=sorted(SPLITS))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--config-set", nargs="+", action="append", default=[], metavar=("SPLIT", "CONFIG"),
                    help="replace a split's configs, e.g. --config-set double configs/dfki_double_pendulum_affine.yaml "
                         "configs/dfki_double_pendulum_extrapolate.yaml")
    ap.add_argument("--margins", type=float, nargs="*", default=[], help="fade bands to compare (the margin study)")
    ap.add_argument("--name", default=NAME, help="results folder name")
    args = ap.parse_args(argv)
    splits = {k: list(v) for k, v in SPLITS.items()}
    for item in args.config_set:
        if item[0] not in splits or len(item) < 2:
            ap.error(f"--config-set takes a split ({sorted(splits)}) and its configs; got {item}.")
        splits[item[0]] = item[1:]
    torch.set_num_threads(1)
    if not (DATA / "dfki_pendulum").is_dir() or not (DATA / "dfki_double_pendulum").is_dir():
        sys.exit(f"benchmarks.{NAME}: the DFKI logs are missing; they live in {DATA} (see its README).")
    rows = []
    for split in args.splits:
        configs = splits[split]
        if split == "simulated":
            train, val = simulated_logs(RESULTS / args.name / "simulated")
            layer = RESULTS / args.name / "simulated" / "split.yaml"
            layer.write_text("data:\n  init_args:\n    files: [" + ", ".join(train) + "]\n    val_files: ["
                             + ", ".join(val) + "]\n    states: [pos_meas1, pos_meas2, vel_meas1, vel_meas2]\n"
                             "    inputs: [tau_meas1, tau_meas2]\n")
            configs = [*configs, str(layer)]
        for seed in args.seeds:
            rows += run_split(split, configs, seed, RESULTS / args.name / split / f"seed_{seed}", args.margins)
    out = {"splits": {s: splits[s] for s in args.splits}, "seeds": args.seeds, "margins": args.margins, "rows": rows,
           "summary": {s: {m: _met([r for r in rows if r["split"] == s], m)
                           for m in ("exported", "hybrid", "no_envelope", *[f"margin_{x:g}" for x in args.margins])}
                       for s in args.splits}}
    folder = save(args.name, out)
    figure(rows).savefig(folder / "nrmse.png", dpi=120)
    for split, summary in out["summary"].items():
        print(f"{split}: exported <= f_known " + ", ".join(
            f"{k}: {v['at_most_f_known']}/{v['pairs']} ({v['diverged']} diverged)" for k, v in
            summary["exported"].items()))
    print(f"saved {folder}")


if __name__ == "__main__":
    main()

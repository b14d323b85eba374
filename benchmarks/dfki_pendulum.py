"""Jet matching on the real DFKI pendulum, beside the RK4 multiple-shooting baseline and f_known alone.

    python -m benchmarks.dfki_pendulum [--config configs/dfki_pendulum.yaml] [--seeds 0 1 2]
                                       [--iterations 1200] [--rate 50] [--steps 40] [--windows 128]

Known model ``J q'' = tau - m cx g sin q`` with the lab's J and m cx
(`torch_ude.systems.TorquePendulumModel`); the residual learns friction and offset from the
training logs of the config, and every model is scored on its validation logs by one-step
and open-loop (1 s, 5 s) RK4 prediction from the measured state with the recorded torque
(`torch_ude.prediction`). Per seed:

* jet matching: ``torch-ude fit --config CONFIG --seed_everything SEED`` (the streaming trainer
  on the files), its EMA field;
* the RK4 multiple-shooting baseline on the same training logs (observed at ``--rate``,
  windows of ``--steps`` RK4 steps inside one segment, the recorded torque interpolated
  linearly over a step), from the same initial weights (`HybridField.from_seed`) and the
  scales jet matching's calibration measured, full-batch Adam with the discrete adjoint
  (`baselines.ShootingAdam`, the simulated pendulum's tuned settings);
* f_known alone (the residual switched off), once;
* for reference, the lab's own least-squares model (J, m cx and its viscous and Coulomb
  friction and offset from system_identification.txt beside the logs), once: what a
  residual should find, not ground truth.

Writes results/CONFIG/CONFIG.json, CONFIG the config's file stem (per model: the prediction
errors, wall time). ``configs/dfki_pendulum.yaml`` validates on a run whose states and torques
lie inside the training runs' range; ``configs/dfki_pendulum_extrapolate.yaml`` on runs that
leave it (higher torques and angles than any training run).
The data are read from ../shared/data/dfki_pendulum (see its README); nothing is copied.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import numpy as np
import torch
import yaml

from baselines import ShootingAdam, ShootingObjective, recorded_observations, shooting_windows
from benchmarks.jet_runs import RESULTS, save
from torch_ude.cli import main as cli_main
from torch_ude.field import HybridField
from torch_ude.prediction import prediction_errors
from torch_ude.systems.controlled import TorquePendulumModel

KEYS = ("one_step_nrmse", "open_loop_1s_nrmse", "open_loop_5s_nrmse")


def _data_files(config: Path) -> list[str]:
    data = yaml.safe_load(config.read_text())["data"]["init_args"]
    return [*data["files"], *data["val_files"]]


def jet_matching(config: Path, seed: int, folder: Path) -> tuple[dict, object]:
    """One jet-matching run through the CLI; returns its metrics.json and the data module."""
    start = time.perf_counter()
    cli = cli_main(["fit", "--config", str(config), "--seed_everything", str(seed), "--trainer.logger", "false",
                    "--trainer.enable_progress_bar", "false", "--trainer.default_root_dir", str(folder)])
    metrics = json.loads((folder / "metrics.json").read_text())
    metrics["process_wall_s"] = time.perf_counter() - start
    return metrics, cli.datamodule


def rk4_baseline(dm, seed: int, calibration: dict, args: argparse.Namespace) -> tuple[dict, HybridField]:
    """The RK4 multiple-shooting baseline on the data module's training logs (module doc)."""
    field = HybridField.from_seed(dm.system.known, seed)
    n = field.n_states
    x_rms, s1 = torch.tensor(calibration["x_rms"]), torch.tensor(calibration["s1"])
    field.set_scales(x_rms[:n], s1[:n], x_rms[n:])
    windows = shooting_windows(recorded_observations(dm.train_logs, args.rate), args.steps, args.windows)
    objective = ShootingObjective(field, windows, state_scale=x_rms[:n])
    adam = ShootingAdam(objective, lr=0.04, iterations=args.iterations, lr_final=1e-3, betas=(0.9, 0.99))
    history = adam.run()
    out = prediction_errors(field, dm.val_logs, dm.horizons)
    out.update({"wall_s": history.wall_s, "iterations": history.iterations, "skipped": history.skipped,
                "final_loss": history.loss[-1], "windows": windows.batch, "steps": windows.steps,
                "rate": args.rate, "window_candidates": windows.candidates})
    return out, field


def known_alone(dm) -> dict:
    """Prediction errors of f_known with the residual switched off (zero network)."""
    field = HybridField(dm.system.known)
    with torch.no_grad():
        for p in field.parameters_list():
            p.zero_()
    return prediction_errors(field, dm.val_logs, dm.horizons)


def lab_model(dm, config: Path) -> dict:
    """Prediction errors of the lab's whole identified model (friction and offset included)."""
    text = (Path(_data_files(config)[0]).parent / "system_identification.txt").read_text()
    value = {k: float(re.search(rf"^{re.escape(k)}\s*=\s*([-+0-9.e]+)", text, re.M).group(1))
             for k in ("J", "m*cx", "Fv", "Fc", "offset")}
    model = TorquePendulumModel(inertia=value["J"], mass_com=value["m*cx"], gravity=dm.system.known.gravity,
                                viscous=value["Fv"], coulomb=value["Fc"], offset=value["offset"])
    field = HybridField(model)
    with torch.no_grad():
        for p in field.parameters_list():
            p.zero_()
    return prediction_errors(field, dm.val_logs, dm.horizons) | {"parameters": value}


def _summary(rows: list[dict]) -> dict:
    return {k: {"mean": float(np.mean([r[k] for r in rows])), "values": [r[k] for r in rows]}
            for k in KEYS if all(r.get(k) is not None for r in rows)}


def main(argv: list[str] | None = None) -> None:
    """Run the comparison and save the JSON."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", type=Path, default=Path("configs/dfki_pendulum.yaml"))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--iterations", type=int, default=1200, help="baseline Adam iterations")
    ap.add_argument("--rate", type=float, default=50.0, help="baseline observation rate in Hz")
    ap.add_argument("--steps", type=int, default=40, help="baseline RK4 steps per window (K)")
    ap.add_argument("--windows", type=int, default=128, help="baseline windows (B)")
    args = ap.parse_args(argv)
    missing = [f for f in _data_files(args.config) if not Path(f).is_file()]
    if missing:
        sys.exit(f"benchmarks.dfki_pendulum: the data files {missing} are missing; the DFKI logs live in "
                 f"../shared/data/dfki_pendulum (see its README).")
    torch.set_num_threads(1)
    out = {"config": str(args.config), "settings": vars(args) | {"config": str(args.config)}, "jet_matching": [],
           "rk4_baseline": []}
    dm, name = None, args.config.stem
    for seed in args.seeds:
        metrics, dm = jet_matching(args.config, seed, RESULTS / name / f"jet_{seed}")
        out["jet_matching"].append({k: v for k, v in metrics.items() if k != "config"} | {"seed": seed})
        print(f"seed {seed}: jet matching " + ", ".join(f"{k} {metrics.get(k)}" for k in KEYS)
              + f" ({metrics['updates']} updates, {metrics['wall_s']:.1f} s)", flush=True)
        base, _ = rk4_baseline(dm, seed, metrics["calibration"], args)
        out["rk4_baseline"].append(base | {"seed": seed})
        print(f"seed {seed}: RK4 baseline " + ", ".join(f"{k} {base.get(k)}" for k in KEYS)
              + f" ({base['iterations']} iterations, {base['skipped']} rejected, {base['wall_s']:.1f} s)", flush=True)
    out["f_known_alone"] = known_alone(dm)
    print("f_known alone " + ", ".join(f"{k} {out['f_known_alone'].get(k)}" for k in KEYS), flush=True)
    out["lab_model"] = lab_model(dm, args.config)
    print("lab model " + ", ".join(f"{k} {out['lab_model'].get(k)}" for k in KEYS), flush=True)
    out["data_reports"] = [log.report for log in dm.train_logs + dm.val_logs]
    out["summary"] = {"jet_matching": _summary(out["jet_matching"]), "rk4_baseline": _summary(out["rk4_baseline"]),
                      "f_known_alone": {k: out["f_known_alone"].get(k) for k in KEYS},
                      "lab_model": {k: out["lab_model"].get(k) for k in KEYS}}
    folder = save(name, json.loads(json.dumps(out, default=lambda v: v.__dict__ if hasattr(v, "__dict__") else str(v))))
    print(f"saved {folder}")


if __name__ == "__main__":
    main()

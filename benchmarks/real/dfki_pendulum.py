"""Jet matching on the real DFKI pendulums, beside the RK4 multiple-shooting baseline and f_known alone.

    python -m benchmarks.real.dfki_pendulum [--config configs/dfki_pendulum.yaml] [--seeds 0 1 2]
                                       [--baseline CONFIG] [--iterations N] [--rate HZ] [--steps K] [--windows B]
    python -m benchmarks.real.dfki_pendulum --config configs/dfki_double_pendulum.yaml --seeds 0 1 2

Known model ``J q'' = tau - m cx g sin q`` with the lab's J and m cx
(`torch_ude.systems.TorquePendulumModel`); the residual learns friction and offset from the
training logs of the config, and every model is scored on its validation logs by one-step
and open-loop (1 s, 5 s) RK4 prediction from the measured state with the recorded torque
(`torch_ude.prediction`). Per seed:

* jet matching: ``torch-ude fit --config CONFIG --seed_everything SEED`` (the streaming trainer
  on the files), its EMA field;
* the RK4 multiple-shooting baseline: ``torch-ude fit --config BASELINE --seed_everything SEED``
  (`baselines.matched.baseline_config`: ``configs/baseline_<data set>.yaml``, on CONFIG's training and validation
  files and known model, in the field form jet matching trained; the training logs observed at
  its ``data.rate``, windows of ``data.steps`` RK4 steps inside one segment, the recorded torque
  interpolated linearly over a step, full-batch Adam with the discrete adjoint, its own calibration
  of the stream's head), the very run a user scores with ``torch-ude score``; ``--iterations``,
  ``--rate``, ``--steps`` and ``--windows`` override its settings;
* f_known alone (the residual switched off), once;
* for reference, the lab's own least-squares model, once: what a residual should find, not
  ground truth. Single pendulum: J, m cx and its viscous and Coulomb friction and offset from
  system_identification.txt beside the logs; double pendulum
  (`torch_ude.systems.TorqueDoublePendulumModel`, known model = the lab's rigid-body model
  3.1): the lab's model 3.0 (model_3.0_parameters.yml: viscous and Coulomb friction and
  rotor inertia added).

What each model learned over f_known is compared with the reference on the validation logs'
visited states (measured states, recorded torques) in joint torques: ``M(q) (F(x, u) -
f_known(x, u))``, the learned residual plus any change of trained physical parameters (the
residual alone where the physics is fixed; the physics alone for a config with
``model.physics_first: 1``; ``M`` the known model's mass matrix at its configured constants,
the inverse of its input Jacobian's acceleration rows) against the reference's ``M(q) (f_ref -
f_known)`` (friction, offset, rotor inertia),
RMS per joint and the RMS of the difference; for the double pendulum also against model
3.0's friction torque ``-F(q')`` alone. Plotted per joint over the joint velocity
(residual_torque.png).

Writes results/CONFIG/CONFIG.json, CONFIG the config's file stem (per model: the prediction
errors, wall time, the residual comparison). ``configs/dfki_pendulum.yaml`` validates on a run whose states and torques
lie inside the training runs' range; ``configs/dfki_pendulum_extrapolate.yaml`` on runs that
leave it (higher torques and angles than any training run).
The data are read from ../shared/data/dfki_pendulum or ../shared/data/dfki_double_pendulum (see
their README); nothing is copied.
"""
from __future__ import annotations

import argparse
import copy
from pathlib import Path

import numpy as np
import torch

from benchmarks.common import (KEYS, RESULTS, add_run_arguments, require_data, rk4_baseline, save_run,
                               summarize_seeds, torque_figure)
from torch_ude.cli import jet_matching_run
from torch_ude.field import HybridField
from torch_ude.metrics import residual_torques
from torch_ude.prediction import prediction_errors
from torch_ude.systems.dfki_double_pendulum import dfki_lab_model

def known_alone(dm) -> dict:
    """Prediction errors of f_known with the residual switched off (zero network)."""
    return prediction_errors(HybridField.configured_physics(copy.deepcopy(dm.system.known)), dm.val_logs, dm.horizons,
                             periodic=dm.system.periodic)


def lab_model(dm) -> dict:
    """Prediction errors of the lab's whole identified model (friction and offset or rotor inertia included)."""
    model, value = dfki_lab_model(dm.system.known, Path(dm.files[0]).parent)
    field = HybridField.configured_physics(model)
    return prediction_errors(field, dm.val_logs, dm.horizons, periodic=dm.system.periodic) | {"parameters": value}


def main(argv: list[str] | None = None) -> None:
    """Run the comparison and save the JSON."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_arguments(ap, "configs/dfki_pendulum.yaml")
    args = ap.parse_args(argv)
    require_data(args.config, "dfki_pendulum")
    torch.set_num_threads(1)
    out = {"config": str(args.config), "settings": vars(args) | {"config": str(args.config)}, "jet_matching": [],
           "rk4_baseline": []}
    dm, name, fields = None, args.config.stem, {}
    for seed in args.seeds:
        metrics, dm, jet_field = jet_matching_run(args.config, seed, RESULTS / name / f"jet_{seed}")
        out["jet_matching"].append({k: v for k, v in metrics.items() if k != "config"} | {"seed": seed})
        print(f"seed {seed}: jet matching " + ", ".join(f"{k} {metrics.get(k)}" for k in KEYS)
              + f" ({metrics['updates']} updates, {metrics['wall_s']:.1f} s)", flush=True)
        base, base_field = rk4_baseline(args.config, seed, RESULTS / name / f"baseline_{seed}", args, jet_field)
        out["rk4_baseline"].append({k: v for k, v in base.items() if k != "config"} | {"seed": seed})
        print(f"seed {seed}: RK4 baseline " + ", ".join(f"{k} {base.get(k)}" for k in KEYS)
              + f" ({base['updates']} iterations, {base['skipped_steps']} rejected, {base['wall_s']:.1f} s)",
              flush=True)
        fields[seed] = {"jet matching": jet_field, "RK4 baseline": base_field}
    out["f_known_alone"] = known_alone(dm)
    print("f_known alone " + ", ".join(f"{k} {out['f_known_alone'].get(k)}" for k in KEYS), flush=True)
    out["lab_model"] = lab_model(dm)
    print("lab model " + ", ".join(f"{k} {out['lab_model'].get(k)}" for k in KEYS), flush=True)
    reference, comparisons = dfki_lab_model(dm.system.known, Path(dm.files[0]).parent)[0], {}
    for seed, pair in fields.items():
        for method, field in pair.items():
            comp = residual_torques(field, reference, dm.system.known, dm.val_logs)
            out.setdefault("residual_torques", {}).setdefault(method, []).append(
                {k: v for k, v in comp.items() if k != "series"} | {"seed": seed})
            print(f"seed {seed}: {method} residual torque RMS {np.round(comp['rms_residual'], 4).tolist()} N m, "
                  f"reference {np.round(comp['rms_reference'], 4).tolist()}, difference "
                  f"{np.round(comp['rms_difference'], 4).tolist()}", flush=True)
            if seed == args.seeds[0]:
                comparisons[method] = comp
    summary = {"jet_matching": summarize_seeds(out["jet_matching"]),
               "rk4_baseline": summarize_seeds(out["rk4_baseline"]),
               "f_known_alone": {k: out["f_known_alone"].get(k) for k in KEYS},
               "lab_model": {k: out["lab_model"].get(k) for k in KEYS}}
    folder = save_run(name, out, jet_field, dm, summary)
    torque_figure(comparisons).savefig(folder / "residual_torque.png", dpi=120)
    print(f"saved {folder}")


if __name__ == "__main__":
    main()

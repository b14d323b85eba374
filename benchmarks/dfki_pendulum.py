"""Jet matching on the real DFKI pendulums, beside the RK4 multiple-shooting baseline and f_known alone.

    python -m benchmarks.dfki_pendulum [--config configs/dfki_pendulum.yaml] [--seeds 0 1 2]
                                       [--baseline CONFIG] [--iterations N] [--rate HZ] [--steps K] [--windows B]
    python -m benchmarks.dfki_pendulum --config configs/dfki_double_pendulum.yaml --seeds 0 1 2

Known model ``J q'' = tau - m cx g sin q`` with the lab's J and m cx
(`torch_ude.systems.TorquePendulumModel`); the residual learns friction and offset from the
training logs of the config, and every model is scored on its validation logs by one-step
and open-loop (1 s, 5 s) RK4 prediction from the measured state with the recorded torque
(`torch_ude.prediction`). Per seed:

* jet matching: ``torch-ude fit --config CONFIG --seed_everything SEED`` (the streaming trainer
  on the files), its EMA field;
* the RK4 multiple-shooting baseline: ``torch-ude fit --config BASELINE --seed_everything SEED``
  (`baseline_config`: ``configs/baseline_<data set>.yaml``, on CONFIG's training and validation
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
import importlib
import inspect
import json
import re
import sys
import time
from pathlib import Path

import numpy as np
import torch
import yaml
from matplotlib.figure import Figure

from benchmarks.jet_runs import RESULTS, save
from torch_ude.cli import main as cli_main
from torch_ude.field import HybridField
from torch_ude.prediction import prediction_errors
from torch_ude.systems.controlled import TorquePendulumModel
from torch_ude.systems.dfki_double_pendulum import TorqueDoublePendulumModel

KEYS = ("one_step_nrmse", "open_loop_1s_nrmse", "open_loop_5s_nrmse")


def _data_files(config: Path) -> list[str]:
    data = yaml.safe_load(config.read_text())["data"]["init_args"]
    return [*data["files"], *data["val_files"]]


def require_data(config: Path, benchmark: str) -> None:
    """Stop with a message naming ``config``'s missing data files (read from ../shared/data, never copied)."""
    missing = [f for f in _data_files(config) if not Path(f).is_file()]
    if missing:
        sys.exit(f"benchmarks.{benchmark}: the data files {missing} are missing; the logs live in "
                 f"{sorted({str(Path(f).parent) for f in missing})} (see ../shared/data/README.md).")


def add_run_arguments(ap: argparse.ArgumentParser, config: str) -> None:
    """The command-line options shared by the recorded-log benchmarks: config, seeds and the baseline's settings."""
    ap.add_argument("--config", type=Path, default=Path(config))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--baseline", type=Path, help="the RK4 baseline's config (default: baseline_<data set>.yaml "
                    "beside CONFIG, `baseline_config`)")
    ap.add_argument("--iterations", type=int, help="baseline Adam iterations (default: the baseline config's)")
    ap.add_argument("--rate", type=float, help="baseline observation rate in Hz (default: the baseline config's)")
    ap.add_argument("--steps", type=int, help="baseline RK4 steps per window, K (default: the baseline config's)")
    ap.add_argument("--windows", type=int, help="baseline windows, B (default: the baseline config's)")


def jet_matching(config: Path, seed: int, folder: Path) -> tuple[dict, object, HybridField]:
    """One jet-matching run through the CLI; returns its metrics.json, the data module and the field it
    exported (the EMA field with its envelope, or its physics alone where the residual check rejected it)."""
    start = time.perf_counter()
    cli = cli_main(["fit", "--config", str(config), "--seed_everything", str(seed), "--trainer.logger", "false",
                    "--trainer.enable_progress_bar", "false", "--trainer.default_root_dir", str(folder)])
    metrics = json.loads((folder / "metrics.json").read_text())
    metrics["process_wall_s"] = time.perf_counter() - start
    return metrics, cli.datamodule, cli.model.exported


#: The suffixes of a data set's config variants (input-affine or linear residual, extrapolation
#: split, the device trainer's settings); a variant's RK4 baseline is its data set's.
VARIANTS = ("_affine", "_linear", "_extrapolate", "_c")


def baseline_config(config: Path) -> Path:
    """The RK4 baseline's config for the jet-matching config ``config``: ``baseline_<stem>.yaml`` beside it,
    for a variant (`VARIANTS`) that of its data set.

    Raises:
        SystemExit: where neither exists (the message names both).
    """
    stem = config.stem
    for suffix in VARIANTS:
        stem = stem.removesuffix(suffix)
    for name in dict.fromkeys((config.stem, stem)):
        path = config.with_name(f"baseline_{name}.yaml")
        if path.is_file():
            return path
    sys.exit(f"no RK4 baseline config for {config}: looked for {config.with_name(f'baseline_{config.stem}.yaml')} "
             f"and {config.with_name(f'baseline_{stem}.yaml')}.")


def rk4_baseline(config: Path, seed: int, folder: Path, args: argparse.Namespace,
                 form: HybridField) -> tuple[dict, HybridField]:
    """One RK4 baseline run through the CLI (module doc): ``torch-ude fit --config baseline_config(config)``
    (``args.baseline`` where given), seeded by ``seed``, writing to ``folder``, on ``config``'s training and
    validation files and known model (its trainable physical parameters included) with ``form``'s hidden
    widths, linear term and input-affine form (jet matching's field); for a data set's own config these are
    the baseline config's settings already (tested), so the run is the one ``torch-ude fit`` makes.
    ``args.iterations``, ``args.rate``, ``args.steps`` and ``args.windows`` override the baseline config where
    given. Returns its metrics.json with the field's number of weights (``num_parameters``) and the field it
    exported."""
    data = yaml.safe_load(config.read_text())["data"]["init_args"]
    argv = ["fit", "--config", str(args.baseline or baseline_config(config)), "--seed_everything", str(seed),
            "--trainer.logger", "false", "--trainer.enable_progress_bar", "false",
            "--trainer.default_root_dir", str(folder),
            "--data.files", json.dumps(data["files"]), "--data.val_files", json.dumps(data["val_files"]),
            "--data.known", json.dumps(_whole(data["known"])),
            "--model.hidden", json.dumps(list(form.mlp.sizes[1:-1])), "--model.linear", json.dumps(form.linear),
            "--model.input_affine", json.dumps(form.input_affine)]
    for option, value in (("--trainer.max_steps", args.iterations), ("--data.rate", args.rate),
                          ("--data.steps", args.steps), ("--data.n_windows", args.windows)):
        if value is not None:
            argv += [option, str(value)]
    field = cli_main(argv).model.field
    return json.loads((folder / "metrics.json").read_text()) | {"num_parameters": field.num_parameters()}, field


def _whole(known: dict) -> dict:
    """``known`` (a config's ``class_path`` / ``init_args``) with every constructor argument it leaves out at
    its default, so that on the command line it replaces a config's known model instead of being merged
    into it (jsonargparse keeps the config's other arguments of the same class)."""
    module, _, name = known["class_path"].rpartition(".")
    signature = inspect.signature(getattr(importlib.import_module(module), name))
    defaults = {k: p.default for k, p in signature.parameters.items() if p.default is not inspect.Parameter.empty}
    return {"class_path": known["class_path"], "init_args": defaults | known.get("init_args", {})}


def configured_physics(model) -> HybridField:
    """``model`` as a hybrid field whose residual is switched off (zero network) at the model's
    configured constants: a model that trains physical parameters is reset to its configured
    values (``theta`` zeroed), unlike `HybridField.without_residual`, which keeps trained ones."""
    field = HybridField(model)
    with torch.no_grad():
        for p in field.parameters_list():
            p.zero_()
    return field


def known_alone(dm) -> dict:
    """Prediction errors of f_known with the residual switched off (zero network)."""
    return prediction_errors(configured_physics(copy.deepcopy(dm.system.known)), dm.val_logs, dm.horizons,
                             periodic=dm.system.periodic)


def reference_model(dm, config: Path) -> tuple[TorquePendulumModel | TorqueDoublePendulumModel, dict]:
    """The lab's whole identified model beside the logs (module doc) and its constants."""
    folder = Path(_data_files(config)[0]).parent
    if isinstance(dm.system.known, TorqueDoublePendulumModel):
        model = TorqueDoublePendulumModel.from_lab_file(folder / "model_3.0_parameters.yml")
        return model, model.init_args()
    text = (folder / "system_identification.txt").read_text()
    value = {k: float(re.search(rf"^{re.escape(k)}\s*=\s*([-+0-9.e]+)", text, re.M).group(1))
             for k in ("J", "m*cx", "Fv", "Fc", "offset")}
    model = TorquePendulumModel(inertia=value["J"], mass_com=value["m*cx"], gravity=dm.system.known.gravity,
                                viscous=value["Fv"], coulomb=value["Fc"], offset=value["offset"])
    return model, value


def lab_model(dm, config: Path) -> dict:
    """Prediction errors of the lab's whole identified model (friction and offset or rotor inertia included)."""
    model, value = reference_model(dm, config)
    return prediction_errors(configured_physics(model), dm.val_logs, dm.horizons, periodic=dm.system.periodic) | {
        "parameters": value}


def _visited(dm) -> tuple[torch.Tensor, torch.Tensor]:
    """The validation logs' measured states (N, n) and recorded inputs (N, n_u), float64."""
    n = dm.system.known.n_states
    y = torch.as_tensor(np.concatenate([s for log in dm.val_logs for s in log.segments]), dtype=torch.float64)
    return y[:, :n], y[:, n:]


def _torque(known, x: torch.Tensor, u: torch.Tensor, accel: torch.Tensor) -> torch.Tensor:
    """Joint torques ``M(q) a`` (N, n_u) of accelerations ``a`` (N, n_u), ``M`` the inverse of the
    known model's input Jacobian rows of the accelerations."""
    inverse_mass = known.input_jacobian(x, u)[:, x.shape[1] - u.shape[1]:, :]
    return torch.linalg.solve(inverse_mass, accel)


def residual_torques(field: HybridField, reference, dm) -> dict:
    """The joint torques ``field`` adds to the configured f_known (its residual and any trained change
    of its physical parameters) against the reference's on the validation states (module doc).

    Returns:
        Per joint (lists): ``rms_residual``, ``rms_reference`` (``M (f_ref - f_known)``),
        ``rms_difference`` and, where the reference has a ``friction`` method,
        ``rms_reference_friction`` and ``rms_difference_friction`` (N m); and the torques
        themselves under ``"series"`` (for the plot, not saved).
    """
    known = dm.system.known
    x, u = _visited(dm)
    n_u = u.shape[1]
    with torch.no_grad():
        learned = field.evaluate(x.to(field.dtype), u.to(field.dtype)).to(torch.float64) - known(x, u)
        accel = learned[:, -n_u:]
        res = _torque(known, x, u, accel)
        ref = _torque(known, x, u, (reference(x, u) - known(x, u))[:, -n_u:])

    def rms(t: torch.Tensor) -> list[float]:
        return torch.sqrt((t * t).mean(dim=0)).tolist()

    out = {"rms_residual": rms(res), "rms_reference": rms(ref), "rms_difference": rms(res - ref),
           "series": {"velocity": x[:, -n_u:], "residual": res, "reference": ref}}
    if hasattr(reference, "friction"):
        fric = -reference.friction(x[:, -n_u:])
        out.update({"rms_reference_friction": rms(fric), "rms_difference_friction": rms(res - fric)})
        out["series"]["friction"] = fric
    return out


def torque_figure(comparisons: dict[str, dict]) -> Figure:
    """Residual torques (one series per method) and the reference over each joint's velocity."""
    first = next(iter(comparisons.values()))["series"]
    joints = first["velocity"].shape[1]
    fig = Figure(figsize=(5.0 * joints, 4.0))
    for j in range(joints):
        ax = fig.add_subplot(1, joints, j + 1)
        v = first["velocity"][:, j].numpy()
        ax.plot(v, first["reference"][:, j].numpy(), ".", ms=1.5, color="0.6", label="reference (lab model)")
        if "friction" in first:
            ax.plot(v, first["friction"][:, j].numpy(), ".", ms=1.5, color="k", label="reference friction only")
        for name, comp in comparisons.items():
            ax.plot(v, comp["series"]["residual"][:, j].numpy(), ".", ms=1.5, label=name)
        ax.set_xlabel(f"joint {j + 1} velocity (rad/s)")
        ax.set_ylabel(f"joint {j + 1} torque (N m)")
        ax.legend(markerscale=6, fontsize=7)
    fig.tight_layout()
    return fig


def summarize_seeds(rows: list[dict], keys: tuple[str, ...] = KEYS) -> dict:
    """Per key present in every row (one row per seed): the mean over the rows and the values."""
    return {k: {"mean": float(np.mean([r[k] for r in rows])), "values": [r[k] for r in rows]}
            for k in keys if all(r.get(k) is not None for r in rows)}


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
        metrics, dm, jet_field = jet_matching(args.config, seed, RESULTS / name / f"jet_{seed}")
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
    out["lab_model"] = lab_model(dm, args.config)
    print("lab model " + ", ".join(f"{k} {out['lab_model'].get(k)}" for k in KEYS), flush=True)
    reference, comparisons = reference_model(dm, args.config)[0], {}
    for seed, pair in fields.items():
        for method, field in pair.items():
            comp = residual_torques(field, reference, dm)
            out.setdefault("residual_torques", {}).setdefault(method, []).append(
                {k: v for k, v in comp.items() if k != "series"} | {"seed": seed})
            print(f"seed {seed}: {method} residual torque RMS {np.round(comp['rms_residual'], 4).tolist()} N m, "
                  f"reference {np.round(comp['rms_reference'], 4).tolist()}, difference "
                  f"{np.round(comp['rms_difference'], 4).tolist()}", flush=True)
            if seed == args.seeds[0]:
                comparisons[method] = comp
    out["field"] = {"hidden": list(jet_field.mlp.sizes[1:-1]), "linear": jet_field.linear,
                    "input_affine": jet_field.input_affine,
                    "num_parameters": jet_field.num_parameters()}
    out["data_reports"] = [log.report for log in dm.train_logs + dm.val_logs]
    out["summary"] = {"jet_matching": summarize_seeds(out["jet_matching"]),
                      "rk4_baseline": summarize_seeds(out["rk4_baseline"]),
                      "f_known_alone": {k: out["f_known_alone"].get(k) for k in KEYS},
                      "lab_model": {k: out["lab_model"].get(k) for k in KEYS}}
    folder = save(name, json.loads(json.dumps(out, default=lambda v: v.__dict__ if hasattr(v, "__dict__") else str(v))))
    torque_figure(comparisons).savefig(folder / "residual_torque.png", dpi=120)
    print(f"saved {folder}")


if __name__ == "__main__":
    main()

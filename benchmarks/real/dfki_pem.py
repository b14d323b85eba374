"""PEM–MHE on the real DFKI pendulum logs (issue 16, part 4), scored like jet matching there.

    python -m benchmarks.real.dfki_pem [--config configs/dfki_pendulum.yaml] [--variants ...] [--max-steps 30]

The training and validation files, columns and horizons are those of the jet-matching config
(``configs/dfki_pendulum.yaml``: train on energy shaping, the PD run and gravity
compensation; validate on the DDP swing-up). PEM–MHE is physics-only, the problem of
``configs/mhe_dfki_pendulum.yaml`` (`PEM_CONFIG`; ``torch-ude fit --config`` trains its default variant: the
lab's model form, 50 Hz, N = 50 every 25 samples, Gauss–Newton with its stopping tests, at most
``--max-steps`` iterations), in four
variants (`VARIANTS`): the angle only (the rate unmeasured, as the issue asks) or angle and
rate measured, identifying either all five parameters (the default, `DEFAULT_VARIANTS`) or
the friction and offset alone (the lab's J and m cx kept: the same known model as jet
matching's; on request, see `DEFAULT_VARIANTS`). Each identified model is
scored on the validation file exactly as `benchmarks.real.dfki_pendulum` scores jet matching,
the RK4 baseline, f_known and the lab's model (`torch_ude.prediction.prediction_errors`:
one-step and 1 s / 5 s open-loop NRMSE from the measured state with the recorded torque,
at 100 Hz); those rows are copied from ``--jet-results`` (the JSON that
``python -m benchmarks.real.dfki_pendulum`` wrote) when it exists, beside ours.

Writes results/dfki_pem/dfki_pem.json and rollouts.png (the validation angle and each
model's 1 s open-loop predictions).
"""
from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import yaml
from matplotlib.figure import Figure
from torch import Tensor

from benchmarks.common import KEYS, RESULTS, reference_model, require_data, save
from mhe import PEMIdentifier
from mhe.problems.torque_pendulum import LogsRecording
from mhe.training import load_experiment
from torch_ude.field import HybridField
from torch_ude.prediction import open_loop_rollouts, prediction_errors
from torch_ude.recorded import RecordedLog
from torch_ude.systems.controlled import TorquePendulumModel
from torch_ude.training import RecordedDataModule

__all__ = ["VARIANTS", "DEFAULT_VARIANTS", "PEM_CONFIG", "pem_identify", "rollout_figure", "main"]

#: The PEM–MHE problem (rate, windows, noise, arrival cost, outer loop): ``torch-ude fit``'s config, whose files,
#: columns, measured states, identified parameters and R^(1/2) each variant sets from the jet-matching config.
PEM_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "mhe_dfki_pendulum.yaml"

#: name -> (measured states, identified parameters)
VARIANTS = {"theta_friction": ((0,), ("Fv", "Fc", "offset")),
            "theta_all": ((0,), ("J", "m_cx", "Fv", "Fc", "offset")),
            "theta_omega_friction": ((0, 1), ("Fv", "Fc", "offset")),
            "theta_omega_all": ((0, 1), ("J", "m_cx", "Fv", "Fc", "offset"))}


#: What runs by default: with the lab's J and m cx fixed, the fit drives Fc / J past RK4's stability
#: limit at 50 Hz (`mhe.problems.torque_pendulum`) and most window solves fail (RESULTS.md), so the
#: friction-only variants are run on request only.
DEFAULT_VARIANTS = ("theta_all", "theta_omega_all")


def _data_module(config: Path) -> RecordedDataModule:
    """The jet-matching config's data (files, columns, rate, horizons) as a data module."""
    data = yaml.safe_load(config.read_text())["data"]["init_args"]
    known = TorquePendulumModel(**data["known"]["init_args"])
    keys = ("files", "val_files", "time", "states", "inputs", "fs", "train_rate", "horizons")
    return RecordedDataModule(known, **{k: data[k] for k in keys if k in data})


def pem_identify(dm: RecordedDataModule, measured: tuple[int, ...], identify: tuple[str, ...], max_steps: int,
                 build_dir: Path, config: Path = PEM_CONFIG) -> tuple[TorquePendulumModel, dict]:
    """Physics-only PEM–MHE on the data module's training files: ``config`` (``torch-ude fit``'s
    ``configs/mhe_dfki_pendulum.yaml``) with the variant's settings as overrides.

    Args:
        dm: the data (its training files, columns and known model's J, m cx, g).
        measured: ``(0,)`` the angle only or ``(0, 1)``.
        identify: the identified parameters (the others are the known model's, friction 0).
        max_steps: cap of Gauss–Newton iterations.
        build_dir: the window solver's build folder.
        config: the PEM–MHE config.

    Returns:
        The identified model and ``parameters``, ``J`` (the PEM cost), ``steps``, ``stop``,
        ``failed_solves``, ``windows``, ``wall_s`` (the outer loop).
    """
    known, columns = dm.system.known, dm.columns
    recording = {"files": [str(f) for f in dm.files], "time": columns["time"], "states": list(columns["states"]),
                 "inputs": list(columns["inputs"]), "measured": list(measured)}
    rate = load_experiment(config).problem.source.rate
    noise = LogsRecording(**recording, rate=rate).noise_std()  # R^(1/2) of the measured channels, from the logs
    overrides = {"trainer.max_steps": max_steps, "model.solver.build_dir": str(build_dir),
                 "data.problem.measured": list(measured), "data.problem.mhe.measurement_std": list(noise),
                 "data.problem.physics.init_args.identify": list(identify),
                 "data.problem.physics.init_args.values": {"J": known.inertia, "m_cx": known.mass_com},
                 "data.problem.physics.init_args.gravity": known.gravity}
    overrides |= {f"data.problem.recording.init_args.{k}": v for k, v in recording.items()}
    experiment = load_experiment(config, [a for k, v in overrides.items()
                                          for a in (f"--{k}", v if isinstance(v, str) else json.dumps(v))])
    problem = experiment.problem
    t0 = time.perf_counter()
    with PEMIdentifier(problem, experiment.max_steps, experiment.outer, experiment.solver) as pem:
        result = pem.fit()
        physics = pem.estimator.model.physics
        model = physics.torch_model()
    info = {"parameters": {k: float(v) for k, v in physics.params().items()}, "J": result.loss,
            "steps": result.counters.steps, "stop": result.stop_reason,
            "failed_solves": result.counters.failed + result.counters.failed_trials, "windows": len(problem.windows),
            "wall_s": time.perf_counter() - t0}
    return model, info


def rollout_figure(models: dict[str, Callable[[Tensor, Tensor], Tensor]], log: RecordedLog,
                   horizon: float = 1.0) -> Figure:
    """The measured angle of ``log``'s first segment and each model's open-loop predictions over ``horizon`` s.

    Args:
        models: name -> ``F(x, u)``, (B, n), (B, n_u) -> (B, n), float64.
        log: a validation log (`torch_ude.recorded.read_log`).
        horizon: the open-loop horizon in s; a prediction starts every ``horizon``.
    """
    seg = torch.as_tensor(log.segments[0], dtype=torch.float64)
    n, h = log.n_states, 1.0 / log.fs
    steps = int(round(horizon / h))
    t = np.arange(seg.shape[0]) * h
    fig = Figure(figsize=(9.0, 4.0))
    ax = fig.add_subplot(1, 1, 1)
    ax.plot(t, seg[:, 0].numpy(), color="k", lw=2.0, label="measured")
    for i, (name, field) in enumerate(models.items()):
        rollouts = open_loop_rollouts(field, seg, n, steps, h)
        if rollouts is None:  # the segment is shorter than the horizon: the measured angle only
            break
        idx, traj = rollouts
        for b in range(idx.shape[1]):
            ax.plot(t[idx[:, b].numpy()], traj[:, b, 0].numpy(), color=f"C{i}", lw=1.0,
                    label=name if b == 0 else None)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("angle (rad)")
    ax.set_title(f"{Path(log.report.file).name if log.report else 'validation'}: {horizon:g} s open-loop predictions")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def main(argv: list[str] | None = None) -> None:
    """Run the variants, score them and save the JSON and the plot."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=Path("configs/dfki_pendulum.yaml"))
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(DEFAULT_VARIANTS))
    parser.add_argument("--max-steps", type=int, default=30)
    parser.add_argument("--jet-results", type=Path, default=RESULTS / "dfki_pendulum" / "dfki_pendulum.json")
    parser.add_argument("--name", default="dfki_pem")
    args = parser.parse_args(argv)
    require_data(args.config, "dfki_pem")
    torch.set_num_threads(1)
    dm = _data_module(args.config)
    out: dict = {"config": str(args.config), "settings": {k: str(v) for k, v in vars(args).items()}, "pem": {}}
    models: dict[str, Callable[[Tensor, Tensor], Tensor]] = {}
    for name in args.variants:
        measured, identify = VARIANTS[name]
        model, info = pem_identify(dm, measured, identify, args.max_steps, Path("build/dfki_pem") / name)
        field = HybridField.configured_physics(model)
        out["pem"][name] = info | prediction_errors(field, dm.val_logs, dm.horizons)
        models[f"PEM-MHE {name}"] = field.evaluate_unchecked
        print(f"PEM-MHE {name}: " + ", ".join(f"{k} {out['pem'][name][k]:.4g}" for k in KEYS)
              + f"; {info['parameters']}; {info['steps']} steps ({info['stop']}), {info['failed_solves']} failed "
              f"solves, {info['wall_s']:.1f} s", flush=True)
    out["f_known_alone"] = prediction_errors(HybridField.configured_physics(dm.system.known), dm.val_logs, dm.horizons)
    lab, lab_values = reference_model(dm, args.config)
    lab_field = HybridField.configured_physics(lab)
    out["lab_model"] = prediction_errors(lab_field, dm.val_logs, dm.horizons) | {"parameters": lab_values}
    models["lab model"] = lab_field.evaluate_unchecked
    if args.jet_results.is_file():
        out["from_dfki_pendulum"] = {"file": str(args.jet_results),
                                     "summary": json.loads(args.jet_results.read_text())["summary"]}
    print("\n| model | " + " | ".join(KEYS) + " |")
    rows = {f"PEM-MHE {k}": v for k, v in out["pem"].items()} | {"f_known alone": out["f_known_alone"],
                                                                "lab model": out["lab_model"]}
    summary = out.get("from_dfki_pendulum", {}).get("summary", {})
    rows |= {f"{k} (benchmarks.real.dfki_pendulum, mean)":
             {key: summary[k][key]["mean"] for key in KEYS if key in summary[k]}
             for k in ("jet_matching", "rk4_baseline") if k in summary}
    for label, row in rows.items():
        print(f"| {label} | " + " | ".join(f"{row[k]:.4g}" if row.get(k) is not None else "–" for k in KEYS) + " |")
    folder = save(args.name, out)
    rollout_figure(models, dm.val_logs[0]).savefig(folder / "rollouts.png", dpi=120)
    print(f"saved {folder}")


if __name__ == "__main__":
    main()

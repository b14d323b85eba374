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
from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor

from benchmarks.common import KEYS, RESULTS, require_data, save
from mhe.training import pem_identify
from torch_ude.cli import main as cli_main
from torch_ude.field import HybridField
from torch_ude.prediction import prediction_errors
from torch_ude.score import comparison_figure
from torch_ude.systems.dfki_double_pendulum import dfki_lab_model

__all__ = ["VARIANTS", "DEFAULT_VARIANTS", "PEM_CONFIG", "main"]

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
    dm = cli_main(["--config", str(args.config), "--trainer.logger", "false"], run=False).datamodule
    out: dict = {"config": str(args.config), "settings": {k: str(v) for k, v in vars(args).items()}, "pem": {}}
    models: dict[str, Callable[[Tensor, Tensor], Tensor]] = {}
    for name in args.variants:
        measured, identify = VARIANTS[name]
        model, info = pem_identify(dm, measured, identify, args.max_steps, Path("build/dfki_pem") / name, PEM_CONFIG)
        field = HybridField.configured_physics(model)
        out["pem"][name] = info | prediction_errors(field, dm.val_logs, dm.horizons)
        models[f"PEM-MHE {name}"] = field.evaluate_unchecked
        print(f"PEM-MHE {name}: " + ", ".join(f"{k} {out['pem'][name][k]:.4g}" for k in KEYS)
              + f"; {info['parameters']}; {info['steps']} steps ({info['stop']}), {info['failed_solves']} failed "
              f"solves, {info['wall_s']:.1f} s", flush=True)
    out["f_known_alone"] = prediction_errors(HybridField.configured_physics(dm.system.known), dm.val_logs, dm.horizons)
    lab, lab_values = dfki_lab_model(dm.system.known, Path(dm.files[0]).parent)
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
    comparison_figure(models, dm.val_logs[0], ylabel="angle (rad)").savefig(folder / "rollouts.png", dpi=120)
    print(f"saved {folder}")


if __name__ == "__main__":
    main()

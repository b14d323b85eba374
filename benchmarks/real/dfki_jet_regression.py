"""Do the jets of the DFKI logs hold the torque response? The lab's model form fitted to jet matching's targets.

    python -m benchmarks.real.dfki_jet_regression [--config configs/dfki_pendulum.yaml] [--spacings 1 2 3]

Issue 15's single-pendulum run misses its target (jet matching's 1 s open-loop error is about
twice the RK4 baseline's). This separates the targets from the function class: jet matching's
first-order targets at tap spacing m on the config's training logs (the config's ``half_width`` and
``order``) are fitted in the lab's model form (`torch_ude.jet_regression`), and the fitted model is
scored on the validation logs with jet matching's metrics (`torch_ude.prediction.prediction_errors`).
A good score means the targets carry the torque response and the network residual is what falls
short; a poor one points at the targets.

Writes results/dfki_jet_regression/dfki_jet_regression.json. Float64. The data are read from
../shared/data/dfki_pendulum (see its README); nothing is copied.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks.common import KEYS, require_data, save
from torch_ude.cli import main as cli_main
from torch_ude.field import HybridField
from torch_ude.jet_regression import fit_lab_form, jet_targets
from torch_ude.prediction import prediction_errors
from torch_ude.systems.controlled import TorquePendulumModel

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    """Fit at each tap spacing, score on the validation logs, print and save the JSON."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", type=Path, default=Path("configs/dfki_pendulum.yaml"))
    ap.add_argument("--spacings", type=int, nargs="+", default=[1, 2, 3], help="tap spacings m in samples")
    args = ap.parse_args(argv)
    require_data(args.config, "dfki_jet_regression")
    cli = cli_main(["--config", str(args.config), "--trainer.logger", "false"], run=False)
    dm, stream = cli.datamodule, cli.model.hparams["stream"]
    half_width, order = int(stream["half_width"]), int(stream["order"])
    known = dm.system.known
    if not isinstance(known, TorquePendulumModel):
        raise SystemExit(f"benchmarks.real.dfki_jet_regression: {args.config} is not a single-pendulum config "
                         f"(known model {type(known).__name__}).")
    out = {"config": str(args.config), "half_width": half_width, "order": order, "fits": []}
    for m in args.spacings:
        centre, accel = jet_targets(dm.train_logs, m, half_width, order)
        model = fit_lab_form(centre, accel, known.gravity)
        scores = prediction_errors(HybridField.configured_physics(model), dm.val_logs, dm.horizons)
        row = {"spacing": m, "windows": int(accel.shape[0]), "parameters": model.init_args()} | \
              {k: scores.get(k) for k in KEYS}
        out["fits"].append(row)
        print(f"m {m}: {row['windows']} windows, " + ", ".join(f"{k} {row[k]:.4g}" for k in KEYS)
              + " | " + ", ".join(f"{k} {v:.4g}" for k, v in row["parameters"].items()), flush=True)
    print(f"saved {save('dfki_jet_regression', out)}")


if __name__ == "__main__":
    main()

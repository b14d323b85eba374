"""Trust on simulated plants: a signal too fast for the jets, and trained physical parameters.

    python -m benchmarks.jet.trust_checks [--seeds 0 1 2]

* ``duffing``: the Duffing oscillator at 9 samples per period (`torch_ude.systems.DuffingOscillator`,
  1 kHz, 1 % noise) with its exact known model (Case A), on the library's defaults (60 s,
  8000 updates; ``configs/duffing_oscillator.yaml``): the calibration's too-fast warning and
  gate, the residual check's scores and the run's validation error (1 s open-loop NRMSE on the
  held-back stretch) against the known model's alone. Target: at most the known model's.
* ``physics``: the single pendulum (Case A, 1 % noise, ``configs/pendulum_case_a.yaml``) with a
  known model whose length is 1.3 m (true 1 m) and damping 0 (true 0.4 /s), both trained
  (`torch_ude.systems.parameters`, ``configs/pendulum_trained_physics.yaml``) with the residual
  (``physics_first`` 0.25, the default) and alone (``physics_first`` 1, the residual switched off;
  ``--physics-first`` picks the shares): the trained values, their standard errors and relative
  errors. Target: within 2 % of the truth.

Writes ``results/jet_trust_checks/jet_trust_checks.json``.
"""
from __future__ import annotations

import argparse

import torch

from benchmarks.common import RESULTS, save
from torch_ude.cli import fit_config

NAME = "jet_trust_checks"
DUFFING, PHYSICS = "configs/duffing_oscillator.yaml", "configs/pendulum_trained_physics.yaml"
TRUTH = {"length": 1.0, "damping": 0.4}


def main(argv: list[str] | None = None) -> None:
    """Run both checks and save the JSON."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--physics-first", type=float, nargs="+", default=[0.25, 1.0],
                    help="shares of the updates in which the physical parameters train alone (model.physics_first)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    out = {"duffing": [], "physics": []}
    for seed in args.seeds:
        m = fit_config(DUFFING, RESULTS / NAME / f"duffing_{seed}", seed)
        check = m["residual_check"]
        row = {"seed": seed, "status": m["status"], "too_fast": m["calibration"]["too_fast"],
               "bias_share": m["calibration"]["bias_share"], "sigma_hat": m["sigma_hat"],
               "sigma_true": m["sigma_true"], "lambda2": m["lambda2"], "hybrid": check["hybrid"],
               "physics": check["physics"], "exported": min(check["hybrid"], check["physics"])
               if check["rejected"] else check["hybrid"]}
        out["duffing"].append(row)
        print(f"duffing seed {seed}: {row['status']}, hybrid {row['hybrid']:.4f}, physics {row['physics']:.4f}, "
              f"too fast {row['too_fast']}, sigma_hat {row['sigma_hat']} (true {row['sigma_true']})", flush=True)
        for share in args.physics_first:
            m = fit_config("configs/pendulum_case_a.yaml", RESULTS / NAME / f"physics_{share:g}_{seed}", seed,
                           ["--config", PHYSICS, "--model.physics_first", str(share)])
            params = m["physical_parameters"]
            row = {"seed": seed, "physics_first": share, "status": m["status"], "e_field": m["e_field"],
                   "c_hat": m["c_hat"],
                   **{k: {"value": params[k]["value"], "standard_error": params[k]["standard_error"],
                          "relative_error": params[k]["value"] / TRUTH[k] - 1.0} for k in TRUTH}}
            out["physics"].append(row)
            values = ", ".join(f"{k} {row[k]['value']:.4f} ({100 * row[k]['relative_error']:+.2f} %)"
                               for k in TRUTH)
            print(f"physics seed {seed}, physics_first {share:g}: {values}, e_field {row['e_field']:.5f}",
                  flush=True)
    out["targets"] = {
        "duffing_at_most_physics": all(r["exported"] <= r["physics"] for r in out["duffing"]),
        **{f"physics_within_2_percent_physics_first_{share:g}": all(
            abs(r[k]["relative_error"]) <= 0.02 for r in out["physics"] if r["physics_first"] == share for k in TRUTH)
           for share in args.physics_first}}
    print(f"targets: {out['targets']}")
    print(f"saved {save(NAME, out)}")


if __name__ == "__main__":
    main()

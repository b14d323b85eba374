"""Equations from the learned residual of the peers benchmark's jet-matching runs (issue 18, part 3).

For every jet-matching run of `benchmarks.peers.pendulums` (trained here, the same way, if it is
missing) the residual ``F - f_known`` is regressed on the visited evaluation states by
`torch_ude.sparse.fit_residual` (STLSQ, uncertainties from 200 bootstrap fits over the
states) on a library per plant:

* ``case_a``: ``theta, omega, sin(theta), omega**3, theta**2*omega``; the truth is
  ``-0.40 omega`` in the omega channel and nothing in the theta channel;
* ``friction``: ``omega, tanh(omega/0.02), omega**3, sin(theta)``: viscous and Coulomb
  friction in the lab's own form (``atan(100 qd)`` ~ ``tanh(qd/0.02)``), the truth being
  ``-0.0941 omega - 0.578 tanh(omega/0.02)`` plus a Stribeck bump (0.289 rad/s^2 at rest,
  gone by 0.2 rad/s) the library does not hold;
* ``dfki`` (real data, ``--dfki-config``, default ``configs/dfki_pendulum.yaml``; jet matching
  trained here on the real DFKI pendulum's training logs): ``velocity, atan(100*velocity), 1,
  torque, sin(position)`` in the velocity channel, regressed on the training logs' samples.
  There is no truth: the reference is the lab's own fit (system_identification.txt beside
  the logs: ``-Fv/J velocity - Fc/J atan(100 velocity) - offset/J``, no torque or gravity
  correction), and beside it what the logs themselves say without any network: the same
  library regressed by the same STLSQ on ``a - f_known(x, u)``, ``a`` the Savitzky–Golay
  derivative of the recorded velocity (`torch_ude.sparse.fit_logs`).

    python -m benchmarks.peers.equations [--plants case_a friction dfki] [--seeds 0 1 2]
        [--case-a-noise 0.01 0.05] [--friction-noise 0.001 0.01 0.05] [--bootstrap 200]
        [--dfki-config configs/dfki_pendulum.yaml]

Each run's equations are the same as ``python -m torch_ude.sparse RUN --library ...`` gives.
Writes ``results/residual_equations/residual_equations.json``.
"""
from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import torch

from benchmarks.common import RESULTS, ROOT, save, trainer_job
from torch_ude.cli import fit_config
from torch_ude import FrictionPendulum, SinglePendulum
from torch_ude.sparse import fit_logs, fit_run

#: The lab's least-squares fit of the DFKI pendulum (../shared/data/dfki_pendulum/system_identification.txt).
DFKI_LAB = {"J": 6.259e-2, "Fv": 4.707e-2, "Fc": 1.839e-1, "offset": -7.586e-2}

#: Plant -> library, STLSQ threshold and the true coefficients as (channel, term, value).
LIBRARIES = {
    "case_a": {"library": ["theta", "omega", "sin(theta)", "omega**3", "theta**2*omega"], "threshold": 0.05,
               "truth": [("omega", "omega", -SinglePendulum().damping)]},
    "friction": {"library": ["omega", "tanh(omega/0.02)", "omega**3", "sin(theta)"], "threshold": 0.02,
                 "truth": [("omega", "omega", -FrictionPendulum().damping),
                           ("omega", "tanh(omega/0.02)", -FrictionPendulum().coulomb)]},
    "dfki": {"library": ["velocity", "atan(100*velocity)", "1", "torque", "sin(position)"], "threshold": 0.05,
             "channels": ["velocity"],
             "truth": [("velocity", "velocity", -DFKI_LAB["Fv"] / DFKI_LAB["J"]),
                       ("velocity", "atan(100*velocity)", -DFKI_LAB["Fc"] / DFKI_LAB["J"]),
                       ("velocity", "1", -DFKI_LAB["offset"] / DFKI_LAB["J"]),
                       ("velocity", "torque", 0.0), ("velocity", "sin(position)", 0.0)]},
}
NOISE = {"case_a": [0.01, 0.05], "friction": [0.001, 0.01, 0.05], "dfki": [None]}


def equations_of_run(root: Path, plant: str, bootstrap: int) -> dict:
    """Regress one run folder's learned residual on its plant's library and compare it with the truth."""
    spec = LIBRARIES[plant]
    channels = spec.get("channels")
    eq = fit_run(root, spec["library"], threshold=spec["threshold"], bootstrap=bootstrap, channels=channels)
    library = " ".join(repr(t) for t in spec["library"])
    only = f" --channels {' '.join(channels)}" if channels else ""
    return {"equations": eq.equations(), "selected": eq.selected(), "r2": eq.r2, "truth": eq.compare(spec["truth"]),
            "command": f"python -m torch_ude.sparse {root} --library {library} --threshold {spec['threshold']} "
                       f"--bootstrap {bootstrap}{only}"}


def main(argv: list[str] | None = None) -> None:
    """Regress every jet run's residual, print the equations and save the JSON."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plants", nargs="+", choices=list(LIBRARIES), default=list(LIBRARIES))
    ap.add_argument("--case-a-noise", type=float, nargs="+", default=NOISE["case_a"])
    ap.add_argument("--friction-noise", type=float, nargs="+", default=NOISE["friction"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--bootstrap", type=int, default=200)
    ap.add_argument("--runs", default="peers", help="results folder of the peers benchmark holding the jet runs")
    ap.add_argument("--dfki-config", type=Path, default=ROOT / "configs/dfki_pendulum.yaml",
                    help="jet-matching config of the real DFKI pendulum (plant dfki)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    levels = {"case_a": args.case_a_noise, "friction": args.friction_noise, "dfki": NOISE["dfki"]}
    rows, summary, direct = [], {}, None
    for plant in args.plants:
        for noise in levels[plant]:
            found = []
            for seed in args.seeds:
                if plant == "dfki":  # real logs: jet matching on the config's training files
                    root = RESULTS / "residual_equations" / "dfki" / f"jet_{seed}"
                    fit_config(str(args.dfki_config), root, seed, reuse=True)
                else:
                    job = trainer_job(plant, "jet", noise, seed, RESULTS / args.runs)
                    root = Path(job["root"])
                    fit_config(str(ROOT / job["config"]), root, seed, job["overrides"], reuse=True)
                row = {"plant": plant, "noise": noise, "seed": seed} | equations_of_run(root, plant, args.bootstrap)
                rows.append(row)
                found.append(row["truth"])
                print(f"{plant} noise={noise} seed={seed}:\n  " + "\n  ".join(row["equations"]), flush=True)
            summary[f"{plant}@{noise}"] = {
                term: {"true": found[0][term]["true"],
                       "mean": statistics.fmean(f[term]["found"] for f in found),
                       "min": min(f[term]["found"] for f in found), "max": max(f[term]["found"] for f in found),
                       "max_abs_relative_error": None if not found[0][term]["true"] else
                       max(abs(f[term]["relative_error"]) for f in found)}
                for term in found[0]}
    if "dfki" in args.plants:
        direct = fit_logs(args.dfki_config, LIBRARIES["dfki"]["library"], "velocity", LIBRARIES["dfki"]["threshold"],
                          args.bootstrap)
    folder = save("residual_equations", {"runs": rows, "summary": summary, "dfki_direct_regression": direct,
                                         "libraries": LIBRARIES, "settings": vars(args)})
    for setting, terms in summary.items():
        truth = "lab fit" if setting.startswith("dfki") else "true"
        for term, s in terms.items():
            error = "" if s["max_abs_relative_error"] is None else \
                f", largest relative error {100 * s['max_abs_relative_error']:.2f} %"
            print(f"{setting} {term}: {truth} {s['true']:.4f}, found {s['mean']:.4f} (min {s['min']:.4f}, max "
                  f"{s['max']:.4f}){error}")
    if direct is not None:
        terms = zip(direct["terms"], direct["coefficients"], direct["std"])
        print("dfki, the training logs regressed directly (no network, " + direct["acceleration"] + "): "
              + ", ".join(f"{c:+.4f}(+-{d:.4f}) {t}" for t, c, d in terms) + f" (R^2 {direct['r2']:.3f})")
    print(f"saved {folder}")


if __name__ == "__main__":
    main()

"""Equations from the learned residual of the peers benchmark's jet-matching runs (issue 18, part 3).

For every jet-matching run of `benchmarks.peers` (trained here, the same way, if it is
missing) the residual ``F - f_known`` is regressed on the visited evaluation states by
`torch_ude.sparse.fit_residual` (STLSQ, uncertainties from 200 bootstrap fits over the
states) on a library per plant:

* ``case_a``: ``theta, omega, sin(theta), omega**3, theta**2*omega``; the truth is
  ``-0.40 omega`` in the omega channel and nothing in the theta channel;
* ``friction``: ``omega, tanh(omega/0.02), omega**3, sin(theta)``: viscous and Coulomb
  friction in the lab's own form (``atan(100 qd)`` ~ ``tanh(qd/0.02)``), the truth being
  ``-0.0941 omega - 0.578 tanh(omega/0.02)`` plus a Stribeck bump (0.289 rad/s^2 at rest,
  gone by 0.2 rad/s) the library does not hold.

    python -m benchmarks.residual_equations [--plants case_a friction] [--seeds 0 1 2]
        [--case-a-noise 0.01 0.05] [--friction-noise 0.001 0.01 0.05] [--bootstrap 200]

Each run's equations are the same as ``python -m torch_ude.sparse RUN --library ...`` gives.
Writes ``results/residual_equations/residual_equations.json``.
"""
from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import torch

from benchmarks.jet_runs import RESULTS, fit, save
from benchmarks.peer_runs import ROOT, trainer_job
from torch_ude import FrictionPendulum, SinglePendulum
from torch_ude.sparse import fit_run

#: Plant -> library, STLSQ threshold and the true coefficients as (channel, term, value).
LIBRARIES = {
    "case_a": {"library": ["theta", "omega", "sin(theta)", "omega**3", "theta**2*omega"], "threshold": 0.05,
               "truth": [("omega", "omega", -SinglePendulum().damping)]},
    "friction": {"library": ["omega", "tanh(omega/0.02)", "omega**3", "sin(theta)"], "threshold": 0.02,
                 "truth": [("omega", "omega", -FrictionPendulum().damping),
                           ("omega", "tanh(omega/0.02)", -FrictionPendulum().coulomb)]},
}
NOISE = {"case_a": [0.01, 0.05], "friction": [0.001, 0.01, 0.05]}


def equations_of_run(root: Path, plant: str, bootstrap: int) -> dict:
    """Regress one run folder's learned residual on its plant's library."""
    spec = LIBRARIES[plant]
    eq = fit_run(root, spec["library"], threshold=spec["threshold"], bootstrap=bootstrap)
    found = {}
    for channel, term, value in spec["truth"]:
        coefficient, std = eq.coefficient(channel, term)
        found[f"{channel}: {term}"] = {"true": value, "found": coefficient, "std": std,
                                       "relative_error": coefficient / value - 1.0}
    library = " ".join(repr(t) for t in spec["library"])
    return {"equations": eq.equations(), "selected": eq.selected(), "r2": eq.r2, "truth": found,
            "command": f"python -m torch_ude.sparse {root} --library {library} --threshold {spec['threshold']} "
                       f"--bootstrap {bootstrap}"}


def main(argv: list[str] | None = None) -> None:
    """Regress every jet run's residual, print the equations and save the JSON."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plants", nargs="+", choices=list(LIBRARIES), default=list(LIBRARIES))
    ap.add_argument("--case-a-noise", type=float, nargs="+", default=NOISE["case_a"])
    ap.add_argument("--friction-noise", type=float, nargs="+", default=NOISE["friction"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--bootstrap", type=int, default=200)
    ap.add_argument("--runs", default="peers", help="results folder of the peers benchmark holding the jet runs")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    levels = {"case_a": args.case_a_noise, "friction": args.friction_noise}
    rows, summary = [], {}
    for plant in args.plants:
        for noise in levels[plant]:
            found = []
            for seed in args.seeds:
                job = trainer_job(plant, "jet", noise, seed, RESULTS / args.runs)
                fit(str(ROOT / job["config"]), Path(job["root"]), seed, job["overrides"], reuse=True)
                row = {"plant": plant, "noise": noise, "seed": seed} | equations_of_run(Path(job["root"]), plant,
                                                                                        args.bootstrap)
                rows.append(row)
                found.append(row["truth"])
                print(f"{plant} noise={noise} seed={seed}:\n  " + "\n  ".join(row["equations"]), flush=True)
            summary[f"{plant}@{noise}"] = {
                term: {"true": found[0][term]["true"],
                       "mean": statistics.fmean(f[term]["found"] for f in found),
                       "min": min(f[term]["found"] for f in found), "max": max(f[term]["found"] for f in found),
                       "max_abs_relative_error": max(abs(f[term]["relative_error"]) for f in found)}
                for term in found[0]}
    folder = save("residual_equations", {"runs": rows, "summary": summary, "libraries": LIBRARIES,
                                         "settings": vars(args)})
    for setting, terms in summary.items():
        for term, s in terms.items():
            print(f"{setting} {term}: true {s['true']:.4f}, found {s['mean']:.4f} (min {s['min']:.4f}, max "
                  f"{s['max']:.4f}), largest relative error {100 * s['max_abs_relative_error']:.2f} %")
    print(f"saved {folder}")


if __name__ == "__main__":
    main()

"""Warm- vs cold-started MHE solutions along a Gauss-Newton PEM run on the racing car (diagnostic).

Every ``--every`` iterations the windows are re-solved at the current ``alpha`` from the
run's warm starts and from one cold start (unmeasured states at ``s_bar``); the script
records both ``J``, and in how many windows each reached the lower MHE cost (4a). With
``--old`` the loop runs as before the fix (unbounded arrival cost, no cold-start check, no
stopping test), which shows the drift of ``s_bar`` and ``sigma``:

    python benchmarks/mhe_gn_warm_cold.py --old --seed 0 --iterations 80 --every 5

Writes results/mhe_gn_warm_cold/warm_cold.json.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from mhe import GaussNewtonStopping, PEMIdentifier, WindowSolver, lower_cost, prediction_loss
from mhe.racing import RacingData, perturbed_values, relative_errors
from mhe_vehicle_recovery import ARRIVAL_BOUNDS, make_estimator


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--iterations", type=int, default=80)
    ap.add_argument("--every", type=int, default=5)
    ap.add_argument("--old", action="store_true", help="unbounded arrival cost, no cold-start check, no stopping")
    ap.add_argument("--out", type=Path, default=Path("results/mhe_gn_warm_cold"))
    args = ap.parse_args()
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    data = RacingData()
    windows = data.windows()
    bounds = None if args.old else ARRIVAL_BOUNDS
    est = make_estimator(perturbed_values(0.5, args.seed, fixed={"Er": 0.0}), data, bounds=bounds)
    stopping = GaussNewtonStopping(0.0, 1, 0.0, 0.0) if args.old else GaussNewtonStopping()
    rows = []
    with WindowSolver(est, Path("build/l4casadi/mhe_gn_warm_cold")) as solver:
        pem = PEMIdentifier(est, windows, solver, optimizer_name="gauss_newton", cold_check=not args.old,
                            stopping=stopping, verify_starts=0 if args.old else 1)
        t0 = time.perf_counter()
        for i in range(args.iterations):
            rec = pem.step()
            errs = relative_errors({n: float(v.detach()) for n, v in est.model.physics.params().items()})
            row = {"iterations_done": i + 1, "mean_rel_error": sum(errs.values()) / len(errs), "lm_mu": pem.lm.mu,
                   "lm_mu_relative": pem.lm.mu / pem.lm.scale, "s_bar": est.arrival_mean.detach().tolist(),
                   "sigma": est.arrival_std().detach().tolist(), "applied": rec.applied, "stop": rec.stop,
                   "wall_s": time.perf_counter() - t0}
            if (i + 1) % args.every == 0 or rec.stop:
                warm, cold = solver.solve(windows, pem.starts), solver.solve(windows)
                lw, lc = (prediction_loss(est, s.point.stages(), windows)[0].detach() for s in (warm, cold))
                row.update(J_warm=float(lw[warm.ok].sum()), J_cold=float(lc[cold.ok].sum()),
                           windows_cold_lower_cost=int((lower_cost(est, windows, warm, cold)[1] & warm.ok).sum()),
                           windows_warm_lower_cost=int((lower_cost(est, windows, cold, warm)[1] & cold.ok).sum()),
                           failed_warm=warm.n_failed, failed_cold=cold.n_failed)
                print(json.dumps({k: (round(v, 6) if isinstance(v, float) else v) for k, v in row.items()}),
                      flush=True)
            rows.append(row)
            if rec.stop:
                break
    (args.out / "warm_cold.json").write_text(json.dumps({"config": {**vars(args), "out": str(args.out)},
                                                          "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()

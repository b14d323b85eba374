"""Adjoint solve ``K lambda = b`` vs horizon N: block-tridiagonal (Prop. 2) vs dense LU.

KKT matrices of the physics-only racing MHE at IPOPT solutions, batched over M
windows; only the linear solve is timed (blocks and the dense matrix are assembled
beforehand). Expected: block-tridiagonal O(N s^3), dense O(N^3 s^3).

    python -m benchmarks.mhe.adjoint_solve [--horizons 10 20 40 80 160 320] [--windows 4]

Writes results/mhe_adjoint_solve/{adjoint_solve.json, adjoint_solve.png}.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from mhe import ArrivalCost, IdentificationProblem, MHESettings, SingleTrackVehicle, WindowSolver
from mhe.estimator.blocktri import block_tridiagonal_dense, block_tridiagonal_solve
from mhe.estimator.kkt import kkt_blocks, prediction_loss
from mhe.problems.racing import MEASURED, RacingSimulation


def main(argv: list[str] | None = None) -> None:
    """Time both solves per horizon and write the table and the plot."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--horizons", type=int, nargs="+", default=[10, 20, 40, 80, 160, 320])
    ap.add_argument("--windows", type=int, default=4)
    ap.add_argument("--out", type=Path, default=Path("results/mhe_adjoint_solve"))
    args = ap.parse_args(argv)
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in args.horizons:
        sim = RacingSimulation(steps=max(2000, (n + 1) * args.windows + 50))
        problem = IdentificationProblem(sim, MHESettings(n, sim.process_std, sim.measurement_std),
                                        ArrivalCost((1.5, 0.0, 0.0), (1.0, 0.3, 3.0)), MEASURED, SingleTrackVehicle(),
                                        stride=n, windows=args.windows)
        est, windows = problem.estimator(), problem.windows
        sol = WindowSolver(est, "build/l4casadi/mhe_adjoint_solve").solve(windows)
        z = sol.point.stages()
        d, e = kkt_blocks(est, z, windows)
        _, b = prediction_loss(est, z, windows)
        dense = block_tridiagonal_dense(d, e)
        flat_b = b.reshape(len(windows), -1)
        reps = 5 if n <= 80 else 2
        t_block, t_dense = float("inf"), float("inf")
        for _ in range(reps):
            t0 = time.perf_counter()
            lam = block_tridiagonal_solve(d, e, b)
            t_block = min(t_block, time.perf_counter() - t0)
            t0 = time.perf_counter()
            lam_dense = torch.linalg.solve(dense, flat_b)
            t_dense = min(t_dense, time.perf_counter() - t0)
        diff = float((lam.reshape(len(windows), -1) - lam_dense).norm() / lam_dense.norm())
        row = {"N": n, "M": len(windows), "s": est.layout.size, "n_z": est.layout.n_z, "block_s": t_block,
               "dense_s": t_dense, "speedup": t_dense / t_block, "rel_diff": diff, "ok": bool(sol.ok.all()),
               "block_memory_mib": (d.numel() + e.numel()) * 8 / 2 ** 20,
               "dense_memory_mib": dense.numel() * 8 / 2 ** 20}
        rows.append(row)
        print(json.dumps(row), flush=True)
    (args.out / "adjoint_solve.json").write_text(json.dumps({"config": {**vars(args), "out": str(args.out)},
                                                             "rows": rows}, indent=1) + "\n")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    ax.loglog([r["N"] for r in rows], [r["block_s"] for r in rows], "o-", label="block-tridiagonal (Prop. 2)")
    ax.loglog([r["N"] for r in rows], [r["dense_s"] for r in rows], "s-", label="dense LU")
    ax.set(xlabel="horizon N", ylabel="adjoint solve time [s]", title=f"M = {args.windows} windows, 1 thread")
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.out / "adjoint_solve.png", dpi=120)


if __name__ == "__main__":
    main()

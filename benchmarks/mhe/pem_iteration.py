"""Wall time of one full PEM iteration (M MHE solves + refinement + hypergradient) vs M and workers.

Physics-only racing MHE, N = 10, warm-started; before each timed iteration the raw
physical parameters move by a random step of 0.01 (the size of an Adam step at
lr = 0.01), as in a running identification. The solve time is split into IPOPT (what
the worker processes parallelize) and the float64 Newton polish in the main process. Modes: ``W`` worker processes of
`mhe.estimator.solver.WindowSolver` with one NLP per window, and ``batched``: one block-diagonal
NLP of all M windows in one process. The machine this was measured on has 2 cores
shared with other jobs, so speedups above 2 are impossible and below 2 are expected.

    python -m benchmarks.mhe.pem_iteration [--windows 25 50 100 200] [--workers 1 2] [--no-batched]

Writes results/mhe_pem_iteration/{pem_iteration.json, pem_iteration.png}.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch

from mhe import (ArrivalCost, IdentificationProblem, MHESettings, SingleTrackVehicle, WindowSolver,
                 hypergradient_adjoint)
from mhe.problems.racing import MEASURED, RacingSimulation, perturbed_values


def main(argv: list[str] | None = None) -> None:
    """Time the iterations and write the table and the plot."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--windows", type=int, nargs="+", default=[25, 50, 100, 200])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--batched", action=argparse.BooleanOptionalAction, default=True,
                    help="also time one batched NLP of all windows (1 process)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path("results/mhe_pem_iteration"))
    args = ap.parse_args(argv)
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    sim = RacingSimulation(steps=10 * max(args.windows) + 20)
    problem = IdentificationProblem(sim, MHESettings(10, sim.process_std, sim.measurement_std),
                                    ArrivalCost((1.5, 0.0, 0.0), (10.0, 10.0, 100.0)), MEASURED,
                                    SingleTrackVehicle(perturbed_values(0.1, fixed={"Er": 0.0})), stride=10)
    all_windows = problem.windows
    rows = []
    modes = [(w, False) for w in args.workers] + ([(1, True)] if args.batched else [])
    for workers, batched in modes:
        est = problem.estimator()
        for m in args.windows:
            t0 = time.perf_counter()
            solver = WindowSolver(est, "build/l4casadi/mhe_pem_iteration", workers=workers,
                                  batch=m if batched else 1)
            with solver:
                windows = all_windows[:m]
                starts = solver.solve(windows).starts
                first = time.perf_counter() - t0  # pool spawn + NLP build + cold solves
                raw = est.model.physics.params.raw
                base = raw.detach().clone()
                gen = torch.Generator().manual_seed(0)
                best = {k: float("inf") for k in ("ipopt_s", "polish_s", "hypergradient_s", "iteration_s")}
                for _ in range(args.repeats):
                    with torch.no_grad():
                        raw.copy_(base + 0.01 * torch.randn(base.shape, generator=gen, dtype=base.dtype))
                    t1 = time.perf_counter()
                    sol = solver.solve(windows, starts)
                    t2 = time.perf_counter()
                    hypergradient_adjoint(est, sol.point[sol.ok].stages(), windows[sol.ok])
                    t3 = time.perf_counter()
                    best = {k: min(best[k], v) for k, v in
                            (("ipopt_s", sol.ipopt_s), ("polish_s", sol.wall_s - sol.ipopt_s),
                             ("hypergradient_s", t3 - t2), ("iteration_s", t3 - t1))}
                with torch.no_grad():
                    raw.copy_(base)
                row = {"mode": "batched" if batched else f"{workers} worker(s)", "workers": workers, "M": m,
                       "N": problem.mhe.horizon, **best, "first_solve_s": first, "n_failed": sol.n_failed,
                       "ipopt_iterations_mean": float(sol.iterations.double().mean()), "cpu_count": os.cpu_count()}
                rows.append(row)
                print(json.dumps(row), flush=True)
    for r in rows:
        base = next(b for b in rows if b["M"] == r["M"] and b["mode"] == "1 worker(s)")
        r["ipopt_speedup_vs_1_worker"] = base["ipopt_s"] / r["ipopt_s"]
    (args.out / "pem_iteration.json").write_text(json.dumps({"config": {**vars(args), "out": str(args.out)},
                                                             "rows": rows}, indent=1) + "\n")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for mode in dict.fromkeys(r["mode"] for r in rows):
        sel = [r for r in rows if r["mode"] == mode]
        ax.loglog([r["M"] for r in sel], [r["iteration_s"] for r in sel], "o-", label=mode)
    ax.set(xlabel="windows M", ylabel="one PEM iteration [s]", title=f"N = {problem.mhe.horizon}, physics-only")
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.out / "pem_iteration.png", dpi=120)


if __name__ == "__main__":
    main()

"""Hypergradient time, explicit (Eq. 11) vs adjoint-VJP (Prop. 1), for neural models at N = 40 (Sec. 4.2).

Neural-only models ``f_c = N(x, u) + w`` (tanh MLP, two hidden layers of width h,
`mhe.problems.racing.neural_racing_problem`) on the racing windows; ``alpha`` and the KKT points are
fixed and only the hypergradient evaluation is timed. KKT points come from undamped Newton on the torch KKT system
(the last layer is small and random, so every weight has a non-trivial gradient).
The explicit form is run only while its matrices (`explicit_memory_bytes`) stay under
``--explicit-cap-gib`` (default 8 GiB: this machine's 24 GiB are shared).

    python -m benchmarks.mhe.hypergradient [--widths 27 64 ...] [--explicit-cap-gib 16]

Writes results/mhe_hypergradient/{hypergradient.json, hypergradient.png}.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from mhe import hypergradient_adjoint, hypergradient_explicit
from mhe.estimator.kkt import explicit_memory_bytes, refine
from mhe.problems.racing import RacingSimulation, neural_racing_estimator, neural_racing_problem


def timed(fn, repeats: int):
    """The best wall time of ``repeats`` calls of ``fn`` and its last result."""
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main(argv: list[str] | None = None) -> None:
    """Time both forms per width and write the table and the plot."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", type=int, nargs="+", default=[27, 64, 128, 256, 512, 1024, 1200, 1448, 2045])
    ap.add_argument("--horizon", type=int, default=40)
    ap.add_argument("--windows", type=int, default=1)
    ap.add_argument("--explicit-cap-gib", type=float, default=8.0)
    ap.add_argument("--chunk", type=int, default=16, help="rows of A per vectorized pass (explicit form)")
    ap.add_argument("--out", type=Path, default=Path("results/mhe_hypergradient"))
    args = ap.parse_args(argv)
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    recording = RacingSimulation(steps=400).record()
    rows = []
    for width in args.widths:
        problem = neural_racing_problem(width, recording, args.horizon, args.windows)
        est, windows = neural_racing_estimator(problem), problem.windows
        n_alpha = sum(p.numel() for p in est.parameters())
        z = est.initial_point(windows).stages()
        for _ in range(30):  # undamped Newton until the relative KKT residual is at round-off
            z, res = refine(est, z, windows, 1)
            if float(res.max()) < 1e-12:
                break
        repeats = 3 if n_alpha < 100_000 else 1
        t_adj, adj = timed(lambda: hypergradient_adjoint(est, z, windows), repeats)
        row = {"width": width, "n_theta": n_alpha - 6, "n_alpha": n_alpha, "kkt_residual": float(res.max()),
               "adjoint_s": t_adj, "explicit_s": None, "speedup": None, "rel_2norm_diff": None,
               "explicit_matrix_gib": explicit_memory_bytes(est, args.chunk) / 2 ** 30}
        if row["explicit_matrix_gib"] <= args.explicit_cap_gib:
            t_exp, exp = timed(lambda: hypergradient_explicit(est, z, windows, chunk_size=args.chunk), repeats)
            ga = torch.cat([g.reshape(-1) for g in adj.grads.values()])
            ge = torch.cat([g.reshape(-1) for g in exp.grads.values()])
            row.update(explicit_s=t_exp, speedup=t_exp / t_adj, rel_2norm_diff=float((ga - ge).norm() / ge.norm()))
        rows.append(row)
        print(json.dumps(row), flush=True)
    diffs = [r["rel_2norm_diff"] for r in rows if r["rel_2norm_diff"] is not None]
    out = {"config": {**vars(args), "out": str(args.out), "dtype": "float64", "threads": 1},
           "rows": rows, "max_rel_2norm_diff": max(diffs) if diffs else None}
    (args.out / "hypergradient.json").write_text(json.dumps(out, indent=1) + "\n")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    ax.loglog([r["n_theta"] for r in rows], [r["adjoint_s"] for r in rows], "o-", label="adjoint-VJP (Prop. 1)")
    ex = [r for r in rows if r["explicit_s"] is not None]
    ax.loglog([r["n_theta"] for r in ex], [r["explicit_s"] for r in ex], "s-", label="explicit (Eq. 11)")
    ax.set(xlabel="network parameters n_theta", ylabel="hypergradient time [s]",
           title=f"N = {args.horizon}, M = {args.windows}, 1 CPU thread, float64")
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.out / "hypergradient.png", dpi=120)


if __name__ == "__main__":
    main()

"""Memory and compute of one solver-baseline iteration versus the window length K.

For each K: the tape's bytes (from the buffers allocated), the peak of tensor memory
allocated inside one iteration (tape included, from torch's profiler), the matrix
MACs (profiler FLOPs / 2 and the count from the layer widths) and the wall time of
one iteration (median of repeats, without the profiler).

    python -m benchmarks.baseline.accounting [--steps 1 3 5 10 20 40 80] [--windows 128]

Writes ``results/baseline_accounting/accounting.json``.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from baselines import account_iteration, initial_field, observe, shooting_windows
from torch_ude import DoublePendulum, SinglePendulum, simulate

PLANTS = {"single": (SinglePendulum, 60.0), "double": (DoublePendulum, 20.0)}


def account(plant: str, steps: int, n_windows: int, rate: float, repeats: int) -> dict:
    """One row of the table (`baselines.accounting.account_iteration`, the error scaled by the field's x_rms)."""
    system_cls, duration = PLANTS[plant]
    system = system_cls()
    rec = simulate(system, duration, noise=0.01, seed=0)
    field = initial_field(system, "A", rec, 0)
    windows = shooting_windows(observe(rec, rate), steps, n_windows)
    return {"plant": plant, "K": steps, "windows": n_windows, "rate_hz": rate,
            **account_iteration(field, windows, field.in_scale, repeats)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[1, 3, 5, 10, 20, 40, 80])
    parser.add_argument("--windows", type=int, default=128)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default="results/baseline_accounting")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rows = [account("single", k, args.windows, args.rate, args.repeats) for k in args.steps]
    rows.append(account("double", 40, args.windows, args.rate, args.repeats))
    print(f"{'plant':7s} {'K':>3s} {'tape MB':>8s} {'peak MB':>8s} {'MACs (prof.)':>13s} {'MACs (count)':>13s} "
          f"{'s/iter':>7s}")
    for r in rows:
        print(f"{r['plant']:7s} {r['K']:3d} {r['tape']['total'] / 1e6:8.3f} {r['peak_heap_bytes'] / 1e6:8.3f} "
              f"{r['matmul_macs_profiled']:13,d} {r['matmul_macs_counted']:13,d} {r['iteration_s']:7.3f}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "accounting.json").write_text(json.dumps({"command": "python -m benchmarks.baseline.accounting",
                                                     "torch": torch.__version__, "rows": rows}, indent=2) + "\n")
    print(f"wrote {out / 'accounting.json'}")


if __name__ == "__main__":
    main()

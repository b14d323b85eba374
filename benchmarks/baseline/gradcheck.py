"""The discrete adjoint against complex-step differentiation and autograd, across K, plants and cases.

For each condition: a random field whose every weight matters (seeded Glorot weights with
the output layer at full gain, random calibration scales in [0.5, 1.5]), windows from a
short 1 % noise stream with the shooting states moved off the observations, and the
relative errors ``||g - g_ref|| / ||g_ref||`` of the gradients in theta and in the
shooting states against complex step (complex128, h = 1e-30, one parameter at a time)
and against ``torch.autograd`` through the core's unrolled RK4
(`baselines.gradcheck.adjoint_errors`; Section 4.1 and Figure 11 of the jet-matching paper).

    python -m benchmarks.baseline.gradcheck [--steps 1 3 5 10] [--windows 3] [--store]

Writes ``results/baseline_gradcheck/baseline_gradcheck.json``; ``--store`` also writes the table of worst errors
per K into ``results/summaries/baseline_gradcheck.json`` (`benchmarks.results_md.store_tables`).
"""
from __future__ import annotations

import argparse

import torch

from baselines import ShootingObjective, observe, shooting_windows
from baselines.gradcheck import adjoint_errors
from benchmarks.common import save
from benchmarks.results_md import SUMMARIES, store_tables
from torch_ude import DoublePendulum, HybridField, SinglePendulum, simulate

PLANTS = {"single": SinglePendulum, "double": DoublePendulum}


def condition(plant: str, case: str, steps: int, n_windows: int, seed: int) -> dict:
    """Errors of one condition (`baselines.gradcheck.adjoint_errors`)."""
    system = PLANTS[plant]()
    gen = torch.Generator().manual_seed(seed)
    field = HybridField(system.known_field(case), generator=gen, last_layer_gain=1.0)
    field.set_scales(0.5 + torch.rand(system.n_states, generator=gen, dtype=torch.float64),
                     0.5 + torch.rand(system.n_states, generator=gen, dtype=torch.float64))
    windows = shooting_windows(observe(simulate(system, 6.0, noise=0.01, seed=seed), 50.0), steps, n_windows)
    objective = ShootingObjective(field, windows, torch.linspace(0.5, 1.5, system.n_states, dtype=torch.float64))
    objective.shooting_states += 0.01
    return {"plant": plant, "case": case, "K": steps, "windows": n_windows, "parameters": field.num_parameters(),
            **adjoint_errors(objective)}


def table(rows: list[dict]) -> dict:
    """The summary's table: per K, the worst error against complex step over its conditions' two gradients."""
    steps = sorted({r["K"] for r in rows})
    at = {k: [r for r in rows if r["K"] == k] for k in steps}
    counts = sorted({2 * len(at[k]) for k in steps})
    what = " x ".join(f"{len({r[key] for r in rows})} {key}s" for key in ("plant", "case"))
    column = f"worst relative error vs complex step ({'/'.join(map(str, counts))} gradients: {what} x theta/states)"
    worst = {k: max(max(r["theta_vs_complex_step"], r["states_vs_complex_step"]) for r in at[k]) for k in steps}
    return {"columns": ["K", column], "rows": [[str(k), f"{worst[k]:.1e}"] for k in steps]}


def main(argv: list[str] | None = None) -> None:
    """Run the conditions, print and save them (and with ``--store`` store the summary's table)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, nargs="+", default=[1, 3, 5, 10])
    ap.add_argument("--windows", type=int, default=3)
    ap.add_argument("--store", action="store_true", help="write the table into results/summaries")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    for plant, cases in (("single", ("A", "C")), ("double", ("A", "C"))):
        for case in cases:
            for k in args.steps:
                row = condition(plant, case, k, args.windows, seed=k)
                rows.append(row)
                print(f"{plant:6s} {case} K={k:2d}: theta vs CS {row['theta_vs_complex_step']:.1e}, states vs CS "
                      f"{row['states_vs_complex_step']:.1e}, theta vs autograd {row['theta_vs_autograd']:.1e}, "
                      f"states vs autograd {row['states_vs_autograd']:.1e}", flush=True)
    worst = max(max(r["theta_vs_complex_step"], r["states_vs_complex_step"]) for r in rows)
    print(f"worst relative error against complex step: {worst:.2e}")
    folder = save("baseline_gradcheck", {"command": "python -m benchmarks.baseline.gradcheck", "rows": rows,
                                         "worst_vs_complex_step": worst})
    print(f"wrote {folder / 'baseline_gradcheck.json'}")
    if args.store:
        print(f"stored in {store_tables('baseline_gradcheck', [table(rows)], SUMMARIES)}; "
              "python -m benchmarks.results_md writes the page")


if __name__ == "__main__":
    main()

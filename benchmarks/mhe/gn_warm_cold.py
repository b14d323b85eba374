"""Warm- vs cold-started MHE solutions along a Gauss-Newton PEM run of a config (diagnostic).

Every ``--every`` iterations the windows are re-solved at the current ``alpha`` from the
run's warm starts and from one cold start (unmeasured states at ``s_bar``); the script
records both ``J`` and in how many windows each reached the lower MHE cost (4a). ``--unguarded``
runs the config's problem without its arrival box and the loop without its guards (no
cold-start check, no stopping test, no final check), which shows the drift of ``s_bar`` and
``sigma`` they prevent:

    python -m benchmarks.mhe.gn_warm_cold --unguarded --trainer.max_steps 80 --every 5

Further arguments are ``torch-ude`` overrides of the config. Writes ``--out``/warm_cold.json.
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

from mhe import GaussNewtonStopping, PEMIdentifier
from mhe.estimator.solver import lower_cost, solved_loss
from mhe.training import load_experiment

CONFIG = "configs/mhe_racing_physics_gn.yaml"

def main(argv: list[str] | None = None) -> None:
    """Run the config with periodic warm/cold comparisons and write the rows."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 epilog="Further arguments are torch-ude overrides of the config.")
    ap.add_argument("--config", default=CONFIG)
    ap.add_argument("--every", type=int, default=5, help="iterations between warm/cold comparisons")
    ap.add_argument("--unguarded", action="store_true", help="no arrival box, cold-start check or stopping tests")
    ap.add_argument("--out", type=Path, default=Path("results/mhe_gn_warm_cold"))
    args, overrides = ap.parse_known_args(argv)
    exp = load_experiment(args.config, overrides)
    problem, outer = exp.problem, exp.outer
    if outer.optimizer != "gauss_newton":
        raise ValueError(f"This diagnostic follows a Gauss-Newton run; {args.config} uses {outer.optimizer!r}.")
    if args.unguarded:
        problem = problem.replace(arrival=replace(problem.arrival, box=None))
        outer = replace(outer, cold_check=False, verify_starts=0, stopping=GaussNewtonStopping(0.0, 1, 0.0, 0.0))
    args.out.mkdir(parents=True, exist_ok=True)
    windows, rows = problem.windows, []
    with PEMIdentifier(problem, exp.max_steps, outer, exp.solver) as pem:
        est, loop, t0 = pem.estimator, pem.loop, time.perf_counter()

        def compare(i, step):
            errs = problem.relative_errors(est)
            row = {"iterations_done": i + 1, "mean_rel_error": sum(errs.values()) / len(errs), "lm_mu": loop.lm.mu,
                   "lm_mu_relative": loop.lm.mu / loop.lm.scale, "s_bar": est.arrival_mean.detach().tolist(),
                   "sigma": est.arrival_std().detach().tolist(), "applied": step.applied, "stop": step.stop,
                   "wall_s": time.perf_counter() - t0}
            if (i + 1) % args.every == 0 or step.stop:
                warm = pem.solver.solve(windows, [loop.starts.get(j) for j in range(len(windows))])
                cold = pem.solver.solve(windows)
                row.update(J_warm=solved_loss(est, windows, warm), J_cold=solved_loss(est, windows, cold),
                           windows_cold_lower_cost=int((lower_cost(est, windows, warm, cold)[1] & warm.ok).sum()),
                           windows_warm_lower_cost=int((lower_cost(est, windows, cold, warm)[1] & cold.ok).sum()),
                           failed_warm=warm.n_failed, failed_cold=cold.n_failed)
                print(json.dumps({k: (round(v, 6) if isinstance(v, float) else v) for k, v in row.items()}),
                      flush=True)
            rows.append(row)

        result = pem.fit(compare)
    (args.out / "warm_cold.json").write_text(json.dumps({"config": args.config, "unguarded": args.unguarded,
                                                          "overrides": overrides, "rows": rows}, indent=1) + "\n")
    print(result.summary(args.out))


if __name__ == "__main__":
    main()

"""PEM-MHE parameter recovery on the simulated racing car, run in-process from a ``torch-ude`` config.

The experiment is the config's (``configs/mhe_racing_physics_gn.yaml`` by default: BayesRace
ground truth, y = (vx, omega), vy unmeasured, 16 parameters from about 50 % off, Er fixed
at 0), parsed with its overrides exactly as ``torch-ude fit`` parses it
(`mhe.training.load_experiment`) and run by `mhe.PEMIdentifier`; so this run and the CLI
run of the same config give the same parameters. The run leaves the CLI's run files
(``field.pt``, ``field.json``, ``metrics.json``) in ``--out`` plus ``recovery.json``: the
per-iteration history and the final ``J`` re-solved from the run's warm starts, from one
cold start and from ``--report-starts`` cold starts per window (lowest MHE cost kept;
`mhe.outer.report.starts_report`).
``--compare RUN`` prints the largest relative difference of the parameters to another
run's ``metrics.json``. ``--truth`` evaluates instead at the true parameters (Er free): ``J``
from one and from ``--report-starts`` cold starts, and the Cramer-Rao standard deviations of
the relative errors from the exact residual Jacobian (`mhe.peers.cramer_rao.mhe_cramer_rao_std`),
which tell which parameters the data can pin.

    python -m benchmarks.mhe.vehicle_recovery --config configs/mhe_racing_physics_gn.yaml
    python -m benchmarks.mhe.vehicle_recovery --compare runs/mhe_racing_physics_gn
    python -m benchmarks.mhe.vehicle_recovery --truth --out results/mhe_vehicle_recovery_truth

Any further argument is a ``torch-ude`` override of the config, e.g. ``--trainer.max_steps 20``
or ``--model.outer.optimizer adam``.
"""
from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

from mhe import IdentificationProblem, PEMIdentifier, SingleTrackVehicle, WindowSolver, residual_jacobian
from mhe.models.vehicle import BAYESRACE_TRUTH, IDENTIFIED
from mhe.outer.report import starts_report
from mhe.peers.cramer_rao import mhe_cramer_rao_std
from mhe.training import load_experiment, pem_outputs, write_pem_outputs

CONFIG = "configs/mhe_racing_physics_gn.yaml"


def at_truth(problem: IdentificationProblem, build: Path, starts: int) -> dict:
    """``J`` and the Cramer-Rao std of the relative errors of the 16 identified parameters and Er at the truth."""
    names = IDENTIFIED + ("Er",)
    truth = problem.replace(physics=SingleTrackVehicle(BAYESRACE_TRUTH, identify=names))
    est = truth.estimator()
    with WindowSolver(est, build) as solver:
        report = starts_report(solver, truth.windows, starts=starts)
        sol = solver.solve(truth.windows)
    crlb = mhe_cramer_rao_std(est, residual_jacobian(est, sol.point.stages(), truth.windows))
    return {**report, "crlb_rel_std_at_truth": crlb,
            "crlb_mean_over_identified": sum(crlb[n] for n in IDENTIFIED) / len(IDENTIFIED)}


def main(argv: list[str] | None = None) -> None:
    """Run the config in-process (or evaluate at the truth) and write the results."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog="Further arguments are torch-ude "
                                 "overrides of the config, e.g. --trainer.max_steps 20.")
    ap.add_argument("--config", default=CONFIG, help="a PEM-MHE config of the torch-ude CLI")
    ap.add_argument("--report-starts", type=int, default=5,
                    help="cold starts per window of the final report (more than 1 needs the config's arrival box)")
    ap.add_argument("--truth", action="store_true", help="evaluate J and the Cramer-Rao bounds at the truth instead")
    ap.add_argument("--compare", type=Path, help="a run folder whose metrics.json parameters to compare with")
    ap.add_argument("--log-every", type=int, default=5, help="iterations between progress lines")
    ap.add_argument("--out", type=Path, default=Path("results/mhe_vehicle_recovery"))
    args, overrides = ap.parse_known_args(argv)
    exp = load_experiment(args.config, overrides)
    problem = exp.problem
    args.out.mkdir(parents=True, exist_ok=True)
    starts = args.report_starts if problem.arrival.box is not None else 1
    if args.truth:
        out = {"config": args.config, "overrides": overrides, **at_truth(problem, Path(exp.solver.build_dir), starts)}
        (args.out / "truth.json").write_text(json.dumps(out, indent=1) + "\n")
        print(json.dumps(out, indent=1))
        return
    print(f"{len(problem.windows)} windows of N = {problem.mhe.horizon}", flush=True)
    history = []
    outputs = pem_outputs(args.out, problem, {"outer": exp.outer, "solver": exp.solver})
    outputs.start()
    with PEMIdentifier(problem, exp.max_steps, exp.outer, exp.solver) as pem:
        est, t0 = pem.estimator, time.perf_counter()

        def record(i, step):
            errors = problem.relative_errors(est)
            history.append({"iteration": i, **{k: v for k, v in vars(step).items()},
                            "mean_rel_error": sum(errors.values()) / len(errors) if errors else None,
                            "lm_mu": pem.loop.lm.mu, "arrival_mean": est.arrival_mean.detach().tolist(),
                            "arrival_std": est.arrival_std().detach().tolist(), "wall_s": time.perf_counter() - t0})
            if i % args.log_every == 0 or step.stop:
                err = "" if not errors else f" mean rel err={history[-1]['mean_rel_error']:.4f}"
                print(f"{i:4d} J={step.loss:.4e}{err} failed={step.n_failed} evals={step.evaluations} "
                      f"switched={step.switched} t={history[-1]['wall_s']:.0f}s"
                      f"{' stop: ' + step.stop if step.stop else ''}", flush=True)

        result = pem.fit(record)
        report = starts_report(pem.solver, problem.windows,
                               [pem.loop.starts.get(i) for i in range(len(problem.windows))], starts)
        paths = write_pem_outputs(outputs, est, result)
    out = {"config": args.config, "overrides": overrides, "result": {**vars(result), "counters": vars(result.counters)},
           "final": report, "history": history,
           "first_at_most_10pct": next(({k: h[k] for k in ("iteration", "mean_rel_error", "loss", "wall_s")}
                                        for h in history if (h["mean_rel_error"] or math.inf) <= 0.1), None)}
    if args.compare is not None:
        other = json.loads((args.compare / "metrics.json").read_text())["parameters"]
        out["compare"] = {"run": str(args.compare), "max_rel_parameter_difference": max(
            abs(result.parameters[k] - v) / max(abs(v), 1e-300) for k, v in other.items())}
        print(f"largest relative parameter difference to {args.compare}: "
              f"{out['compare']['max_rel_parameter_difference']:.2e}")
    (args.out / "recovery.json").write_text(json.dumps(out, indent=1, default=str) + "\n")
    print(json.dumps(report, indent=1))
    print(result.summary(paths["metrics"].parent))


if __name__ == "__main__":
    main()

"""Table 1 of the PEM-MHE paper on BayesRace's data: train on one track, validate on the other, truth row.

The experiment is the config's (``configs/mhe_bayesrace_physics_gn.yaml``: DYN-PP-ETHZ, noise-free,
y = (vx, omega), vy unmeasured, 16 parameters from a seeded start with a mean relative error
of 67.95 %), parsed as ``torch-ude fit`` parses it (`mhe.training.load_experiment`) and run by
`mhe.PEMIdentifier`. Then, at the identified parameters and arrival cost, and at the ground
truth (with the config's arrival-cost start):

* one-step prediction error: the mean over windows and the two outputs of ``r^2``,
  ``r = C x^_N - y~_N`` (Eq. 9) with ``x^_N`` from the MHE of each window (the lowest MHE cost
  of the warm start, ``--starts`` cold starts and ``--passes`` passes of propagated starts:
  `mhe.estimator.solver.propagated_solve`), on the training windows and on the windows of
  ``--validation`` (the same N and stride; its arrival-cost box from its own data, the trained
  s_bar and sigma clipped into it);
  the validation error is also given with the config's arrival-cost start instead of the trained
  one (``validation_config_arrival``; the truth row uses the config's start);
* mean relative parameter error over the identified parameters, and training time (the loop's
  wall time).

Prints the table and writes ``table1.json`` (and the run files of the CLI) to ``--out``::

    python -m benchmarks.mhe.bayesrace
    python -m benchmarks.mhe.bayesrace --trainer.max_steps 3 --out results/mhe_bayesrace_short

Further arguments are ``torch-ude`` overrides of the config.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from benchmarks.common import TABLE1, add_bayesrace_arguments, markdown_table
from mhe import IdentificationProblem, MovingHorizonEstimator
from mhe.estimator.solver import Start
from mhe.models.vehicle import BAYESRACE_TRUTH
from mhe.scoring import score_problem, with_values
from mhe.training import fit_pem, load_experiment

PAPER = {"one_step_train": 7.15e-7, "one_step_validation": 7.93e-7, "mean_rel_error": 0.075,
         "truth_one_step_train": 6.27e-14, "truth_one_step_validation": 9.71e-14, "start_mean_rel_error": 0.6795}


def evaluate(problem: IdentificationProblem, validation: IdentificationProblem, build: Path, starts: int,
             warm: list[Start | None] | None = None, passes: int = 0) -> dict[str, dict]:
    """One-step errors (`mhe.scoring.score_problem`) on the training and validation windows at each problem's start
    values."""
    return {label: score_problem(prob, build / label, starts, warm=w, passes=passes)[0]
            for label, prob, w in (("train", problem, warm), ("validation", validation, None))}


def main(argv: list[str] | None = None) -> None:
    """Run the config in-process, evaluate, print and write ``table1.json``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog="Further arguments are torch-ude "
                                 "overrides of the config, e.g. --trainer.max_steps 20.")
    add_bayesrace_arguments(ap)
    ap.add_argument("--log-every", type=int, default=5, help="iterations between progress lines")
    ap.add_argument("--out", type=Path, default=Path("results/mhe_bayesrace"))
    args, overrides = ap.parse_known_args(argv)
    exp = load_experiment(args.config, overrides)
    problem, build = exp.problem, Path(exp.solver.build_dir)
    val_source = problem.source.with_path(args.validation)
    args.out.mkdir(parents=True, exist_ok=True)
    start_errors = problem.relative_errors(problem.estimator())
    print(f"{len(problem.windows)} training windows of N = {problem.mhe.horizon}; start mean relative error "
          f"{100 * sum(start_errors.values()) / len(start_errors):.2f} %", flush=True)
    truth = evaluate(with_values(problem, problem.source, BAYESRACE_TRUTH, None),
                     with_values(problem, val_source, BAYESRACE_TRUTH, None), build / "truth", args.starts,
                     passes=args.passes)
    print(f"truth: one-step error train {truth['train']['mse']:.3e}, validation {truth['validation']['mse']:.3e}",
          flush=True)

    def mean_rel_error(est: MovingHorizonEstimator) -> dict[str, float]:
        errors = problem.relative_errors(est)
        return {"mean_rel_error": sum(errors.values()) / len(errors)}

    fit = fit_pem(exp, args.out, args.log_every, mean_rel_error)
    result, history, values, arrival, warm = fit["result"], fit["history"], fit["values"], fit["arrival"], fit["warm"]
    print(result.summary(args.out), flush=True)
    fitted = evaluate(with_values(problem, problem.source, values, arrival),
                      with_values(problem, val_source, values, arrival), build / "fitted", args.starts, warm,
                      args.passes)
    fitted["validation_config_arrival"] = evaluate(problem, with_values(problem, val_source, values, None),
                                                   build / "fitted_config_arrival", args.starts,
                                                   passes=args.passes)["validation"]
    table = {"config": args.config, "overrides": overrides, "validation": args.validation,
             "starts": args.starts, "propagated_passes": args.passes,
             "one_step_error": "mean over windows and outputs of r^2, r = C x^_N - y~_N (Eq. 9)",
             "paper": PAPER,
             "start_mean_rel_error": sum(start_errors.values()) / len(start_errors),
             "truth": truth, "pem_mhe": {**fitted, "mean_rel_error": result.mean_rel_error,
                                         "rel_errors": result.rel_errors, "training_s": result.wall_s,
                                         "steps": result.counters.steps, "stop": result.stop_reason,
                                         "failed_window_solves": result.counters.failed,
                                         "parameters": result.parameters},
             "history": history}
    (args.out / "table1.json").write_text(json.dumps(table, indent=1) + "\n")
    markdown_table(TABLE1, [
        ("ground truth", f"{truth['train']['mse']:.3g}", f"{truth['validation']['mse']:.3g}", "0", "-"),
        ("PEM-MHE (physics-only)", f"{fitted['train']['mse']:.3g}", f"{fitted['validation']['mse']:.3g}",
         f"{100 * result.mean_rel_error:.2f} %", f"{result.wall_s:.0f} s")])
    print(f"PEM-MHE validation with the config's arrival-cost start: "
          f"{fitted['validation_config_arrival']['mse']:.3g}")
    print(f"written {args.out / 'table1.json'}")


if __name__ == "__main__":
    torch.set_default_dtype(torch.float64)
    main()

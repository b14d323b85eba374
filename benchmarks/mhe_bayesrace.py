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

    python -m benchmarks.mhe_bayesrace
    python -m benchmarks.mhe_bayesrace --trainer.max_steps 3 --out results/mhe_bayesrace_short

Further arguments are ``torch-ude`` overrides of the config.
"""
from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import torch

from mhe import ArrivalCost, IdentificationProblem, MovingHorizonEstimator, PEMIdentifier, WindowSolver
from mhe.data.logs import BayesRaceRecording
from mhe.data.windows import Windows
from mhe.estimator.arrival import arrival_bounds
from mhe.estimator.solver import Start, WindowSolutions, lowest_cost_solve
from mhe.models.vehicle import BAYESRACE_TRUTH
from mhe.training import PEMExperiment, load_experiment, pem_outputs, write_pem_outputs

CONFIG = "configs/mhe_bayesrace_physics_gn.yaml"
VALIDATION = "../shared/data/bayesrace/DYN-PP-ETHZMobil.npz"
PAPER = {"one_step_train": 7.15e-7, "one_step_validation": 7.93e-7, "mean_rel_error": 0.075,
         "truth_one_step_train": 6.27e-14, "truth_one_step_validation": 9.71e-14, "start_mean_rel_error": 0.6795}


def solutions_error(est: MovingHorizonEstimator, windows: Windows, best: WindowSolutions) -> dict[str, float | int]:
    """Mean of ``r^2`` over the windows of ``best`` that solved and the outputs, ``r = C x^_N - y~_N`` (Eq. 9), with
    the largest ``|r|`` and the window counts (NaN errors when no window solved)."""
    r = est.prediction_error(best.point.stages(), windows)[best.ok].detach()
    return {"mse": float((r ** 2).mean()), "max_abs": float(r.abs().max()) if r.numel() else float("nan"),
            "windows": len(windows), "failed": best.n_failed}


def one_step_error(est: MovingHorizonEstimator, problem: IdentificationProblem, solver: WindowSolver,
                   starts: int, warm: list[Start | None] | None = None,
                   best: WindowSolutions | None = None, passes: int = 0) -> dict[str, float | int]:
    """`solutions_error` of the problem's windows with the lowest-cost MHE solution per window
    (`mhe.estimator.solver.lowest_cost_solve` with ``starts``, ``warm`` and ``passes``, or ``best`` when given)."""
    windows = problem.windows
    best = lowest_cost_solve(solver, windows, starts, warm, passes) if best is None else best
    return solutions_error(est, windows, best)


def with_values(problem: IdentificationProblem, recording: object, physics: dict[str, float],
                arrival: tuple[list[float], list[float]] | None) -> IdentificationProblem:
    """``problem`` on another recording and parameter values (the same identified ones and bounds); the arrival
    cost clipped into that data's box."""
    params = problem.physics.params
    phys = type(problem.physics)(physics, identify=params.free_names, bounds=params.bounds,
                                 abs_vx=problem.physics.abs_vx)
    other = problem.replace(recording=recording, physics=phys)
    if arrival is None:
        return other
    a, model = problem.arrival, other.model()
    hidden = {j: box for j, box in enumerate(a.box) if box is not None}
    means, stds = arrival_bounds(other.windows, model, hidden, a.margin, a.std_range)
    mean = tuple(b.clip(v) for v, b in zip(arrival[0], means))
    std = tuple(b.clip(v) for v, b in zip(arrival[1], stds))
    return other.replace(arrival=ArrivalCost(mean, std, a.box, a.margin, a.std_range))


def evaluate(problem: IdentificationProblem, validation: IdentificationProblem, build: Path, starts: int,
             warm: list[Start | None] | None = None, passes: int = 0) -> dict[str, dict]:
    """One-step errors on the training and validation windows at each problem's start values."""
    out = {}
    for label, prob, w in (("train", problem, warm), ("validation", validation, None)):
        est = prob.estimator()
        with WindowSolver(est, build / label) as solver:
            out[label] = one_step_error(est, prob, solver, starts, w, passes=passes)
    return out


def fit_pem(exp: PEMExperiment, out: Path, log_every: int,
            track: Callable[[MovingHorizonEstimator], dict[str, float]] | None = None) -> dict:
    """Run PEM-MHE on ``exp`` in this process and write its run files to ``out``.

    ``track``: per iteration, further numbers of the estimator for the history and the progress line
    (e.g. the mean relative parameter error where the truth is known).

    Returns:
        ``row`` (training time, steps, stop reason, failed solves, trained arrival cost and, with a
        two-stage start, its `mhe.outer.noise_fit.NoiseFitReport`), the
        trained ``values`` and ``arrival``, the ``warm`` starts of the training windows, the trained
        ``residual`` weights (None without a residual), the ``history`` of the iterations and the
        loop's ``result`` (`mhe.outer.report.PEMResult`).
    """
    problem = exp.problem
    outputs = pem_outputs(out, problem, {"outer": exp.outer, "solver": exp.solver})
    outputs.start()
    history = []
    with PEMIdentifier(problem, exp.max_steps, exp.outer, exp.solver) as pem:
        est, t0 = pem.estimator, time.perf_counter()

        def record(i, step):
            extra = track(est) if track is not None else {}
            history.append({"iteration": i, "loss": step.loss, "n_failed": step.n_failed, **extra,
                            "wall_s": time.perf_counter() - t0})
            if i % log_every == 0 or step.stop:
                print(f"{i:4d} J={step.loss:.4e}" + "".join(f" {k}={v:.4f}" for k, v in extra.items())
                      + f" failed={step.n_failed} t={history[-1]['wall_s']:.0f}s"
                      f"{' stop: ' + step.stop if step.stop else ''}", flush=True)

        result = pem.fit(record)
        write_pem_outputs(outputs, est, result)
        warm = [pem.loop.starts.get(i) for i in range(len(problem.windows))]
        values = {n: float(v.detach()) for n, v in est.model.physics.params().items()}
        arrival = (est.arrival_mean.detach().tolist(), est.arrival_std().detach().tolist())
        net = est.model.residual
        residual = None if net is None else {k: v.detach().clone() for k, v in net.state_dict().items()}
        noise_fit = pem.loop.noise_fit_report
    row = {"training_s": result.wall_s, "steps": result.counters.steps, "stop": result.stop_reason,
           "failed_window_solves": result.counters.failed, "arrival": arrival}
    if noise_fit is not None:
        row["noise_fit"] = asdict(noise_fit)
    return {"row": row, "values": values, "arrival": arrival, "warm": warm, "residual": residual, "history": history,
            "result": result}


def print_table1(rows: list[tuple[str, str, str, str, str]]) -> None:
    """Print Table 1 rows (method, one-step train, one-step validation, mean relative parameter error,
    training time), already formatted, as a Markdown table."""
    print("| method | one-step train | one-step validation | mean rel. parameter error | training time |")
    print("| --- | --- | --- | --- | --- |")
    for row in rows:
        print("| " + " | ".join(row) + " |")


def main(argv: list[str] | None = None) -> None:
    """Run the config in-process, evaluate, print and write ``table1.json``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog="Further arguments are torch-ude "
                                 "overrides of the config, e.g. --trainer.max_steps 20.")
    ap.add_argument("--config", default=CONFIG, help="a PEM-MHE config on a BayesRace recording")
    ap.add_argument("--validation", default=VALIDATION, help="the BayesRace recording to validate on")
    ap.add_argument("--starts", type=int, default=3, help="cold starts per window of the evaluation")
    ap.add_argument("--passes", type=int, default=3,
                    help="passes of propagated starts per evaluation (mhe.estimator.solver.propagated_solve); 0: none")
    ap.add_argument("--log-every", type=int, default=5, help="iterations between progress lines")
    ap.add_argument("--out", type=Path, default=Path("results/mhe_bayesrace"))
    args, overrides = ap.parse_known_args(argv)
    exp = load_experiment(args.config, overrides)
    problem, build = exp.problem, Path(exp.solver.build_dir)
    src = problem.source
    val_source = BayesRaceRecording(args.validation, src.trajectory, src.first, src.dt, src.dt_rtol)
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
    print_table1([("ground truth", f"{truth['train']['mse']:.3g}", f"{truth['validation']['mse']:.3g}", "0", "-"),
                  ("PEM-MHE (physics-only)", f"{fitted['train']['mse']:.3g}", f"{fitted['validation']['mse']:.3g}",
                   f"{100 * result.mean_rel_error:.2f} %", f"{result.wall_s:.0f} s")])
    print(f"PEM-MHE validation with the config's arrival-cost start: "
          f"{fitted['validation_config_arrival']['mse']:.3g}")
    print(f"written {args.out / 'table1.json'}")


if __name__ == "__main__":
    torch.set_default_dtype(torch.float64)
    main()

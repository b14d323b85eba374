"""Does a gray-box residual make the two-tank free run worse than physics alone, with and without its envelope?

Issue 33, item 5 and its target "a gray-box residual does not make the free-run error worse than the
physics-only model's", on the simulated two-tank process (`mhe.problems.two_tank`, ``configs/mhe_two_tank_gn.yaml``):

1. physics-only PEM-MHE (Gauss-Newton, one-step criterion, no refinement) on the training recording;
2. gray-box PEM-MHE (``configs/mhe_two_tank_variants/gray.yaml`` layered on it: a tanh residual on both level rates,
   Adam), started from the physics-only result (its physical values, sensor offset and arrival cost,
   `mhe.identification.start_from_estimator`), as the IAC gray-box starts from its physics-only fit;
3. the gray-box's trust envelope recorded as a run records it (`mhe.pem.envelope_of_windows`: the MHE's
   estimated levels on the training windows and the pump voltages), on a copy, so the same trained
   network is scored with and without it;
4. the gray-box as a run of the library trains it by default (``residual.check`` on, the envelope on as
   gray.yaml sets it), from the same start: identified on the training recording less its last
   ``residual.check_share`` (20 %), then the library's residual check (`mhe.pem.residual_check_of_run`, called by
   `mhe.pem.finish` at the end of `PEMIdentifier.fit`) scores it and its physics alone by the run's criterion,
   the one-step error, on that held-back tail of the training recording (never on the validation recording),
   beside the physics the run started from (the physics-only result), and keeps the better physics where the
   residual does not predict better.

Each model is scored by free run (`mhe.outer.free_run.estimate_initial_states`: the parameters fixed, the
initial state that fits best) against the measured sensor, on the training recording and on a
validation recording of another seed, whose pump range (``--val-range``) may leave the training range
(``--train-range``): with the default ranges the training levels stay below the rim and the sensor's
clip, the validation ones overflow and clip. Also reported: the share of the validation samples (true
levels and pump voltage) outside the envelope.

    python -m benchmarks.mhe.two_tank_envelope                         # results/mhe_two_tank_envelope/
    python -m benchmarks.mhe.two_tank_envelope --train-range 1.5 10 --val-range 1.5 10 --out results/x
    python -m benchmarks.mhe.two_tank_envelope --runs runs/A runs/B --train-range 1.5 10   # score torch-ude fit runs

With ``--runs`` nothing is fitted: each PEM-MHE run folder (``torch-ude fit`` of the two-tank configs, e.g. a
gray-box started with ``--data.problem.start``) is scored by free run on the same two recordings, as exported
(`torch_ude.score.pem_run_estimator`).

Any further argument is a ``torch-ude`` override of both configs (e.g. ``--trainer.max_steps 10`` for the
gray-box; the physics-only run takes the GN config's own).
"""
from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path

from mhe import IdentificationProblem, PEMIdentifier
from mhe.data.recording import Recording
from mhe.identification import start_from_estimator
from mhe.outer.free_run import estimate_initial_states
from mhe.pem import envelope_of_windows
from mhe.problems.two_tank import TwoTankSimulation
from mhe.training import load_experiment
from torch_ude.score import pem_run_estimator

BASE, GRAY = "configs/mhe_two_tank_gn.yaml", "configs/mhe_two_tank_variants/gray.yaml"


def _free_run_rmses(estimator, train: Recording, val: Recording) -> dict[str, float]:
    """Free-run RMSE (V) of ``estimator``'s model against the measured sensor of the training and the validation
    recording, initial states estimated (`mhe.outer.free_run.estimate_initial_states`)."""
    return {f"{name}_free_run_rmse": float(estimate_initial_states(estimator, rec)[1].mean())
            for name, rec in (("train", train), ("val", val))}


def _validation(problem: IdentificationProblem, args: argparse.Namespace) -> TwoTankSimulation:
    """The validation recording's source: the training one's plant, sensor and length, ``--val-range``'s pump."""
    rec = problem.logged
    return TwoTankSimulation(steps=rec.outputs.shape[0], dt=rec.dt, noise=problem.source.noise,
                             offset=problem.source.offset, u_range=tuple(args.val_range), seed=args.val_seed)


def _score_runs(args: argparse.Namespace, problem: IdentificationProblem) -> dict:
    """``--runs``: the free-run RMSE of each run folder's exported model on the training and validation recordings."""
    train_rec, val_rec = problem.logged, _validation(problem, args).record()
    rows = {}
    for run in args.runs:
        est = pem_run_estimator(Path(run), json.loads((Path(run) / "field.json").read_text()))
        rows[run] = {**_free_run_rmses(est, train_rec, val_rec),
                     "status": json.loads((Path(run) / "metrics.json").read_text())["status"]}
        print(f"{run}: free-run RMSE train {rows[run]['train_free_run_rmse']:.4f} V   validation "
              f"{rows[run]['val_free_run_rmse']:.4f} V   ({rows[run]['status']})", flush=True)
    report = {"runs": rows, "seed": args.seed, "val_seed": args.val_seed, "train_range": args.train_range,
              "val_range": args.val_range}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "runs.json").write_text(json.dumps(report, indent=2))
    return report


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="the training recording's seed")
    parser.add_argument("--val-seed", type=int, default=1)
    parser.add_argument("--train-range", type=float, nargs=2, default=[1.5, 6.5], help="pump voltages (V)")
    parser.add_argument("--val-range", type=float, nargs=2, default=[1.5, 10.0])
    parser.add_argument("--margin", type=float, default=0.5, help="the envelope's fade band (fraction of width)")
    parser.add_argument("--out", default="results/mhe_two_tank_envelope")
    parser.add_argument("--build", default="build/l4casadi/mhe_two_tank_envelope")
    parser.add_argument("--runs", nargs="+", metavar="RUN", help="score these run folders instead of fitting")
    args, overrides = parser.parse_known_args(argv)
    rec_args = ["--data.problem.recording.init_args.seed", str(args.seed),
                "--data.problem.recording.init_args.u_range", json.dumps(args.train_range)]
    if args.runs:
        return _score_runs(args, load_experiment(BASE, [*rec_args, *overrides]).problem)
    t0 = time.perf_counter()
    phys = load_experiment(BASE, [*rec_args, "--model.outer.criterion", "prediction",
                                  "--model.solver.build_dir", args.build + "/physics"])
    with PEMIdentifier(phys.problem, phys.max_steps, phys.outer, phys.solver) as pem:
        res_p = pem.fit()
        est_p = pem.estimator
    phys_s = time.perf_counter() - t0
    print(f"physics-only PEM: {res_p.counters.steps} steps, {phys_s:.0f} s, {est_p.parameter_values()}", flush=True)

    gray = load_experiment([BASE, GRAY], [*rec_args, "--model.solver.build_dir", args.build + "/gray",
                                          "--data.problem.residual.envelope", "false",
                                          "--data.problem.residual.check", "false", *overrides])
    start = start_from_estimator(gray.problem, est_p)
    t0 = time.perf_counter()
    with PEMIdentifier(start, gray.max_steps, gray.outer, gray.solver) as pem:
        res_g = pem.fit(lambda i, s: print(f"  gray-box step {i}: J {s.loss:.4e}", flush=True))
        est_g = pem.estimator
        est_e = copy.deepcopy(est_g)
        physics = est_g.model.physics
        record = envelope_of_windows(est_e, pem.solver, start.windows, args.margin,
                                     (list(physics.state_names), list(physics.input_names)))
    gray_s = time.perf_counter() - t0
    checked = load_experiment([BASE, GRAY], [*rec_args, "--model.solver.build_dir", args.build + "/checked",
                                             *overrides])
    t0 = time.perf_counter()
    started = start_from_estimator(checked.problem, est_p)
    with PEMIdentifier(started, checked.max_steps, checked.outer, checked.solver) as pem:
        res_c = pem.fit(lambda i, s: print(f"  gray-box (check) step {i}: J {s.loss:.4e}", flush=True))
        est_c = pem.estimator
    checked_s = time.perf_counter() - t0
    print(f"residual check: {res_c.residual_check}", flush=True)

    train_rec, val_source = phys.problem.logged, _validation(phys.problem, args)
    val_rec = val_source.record()
    net = est_e.model.residual
    outside = float(net.outside(val_rec.states, val_rec.inputs).double().mean())
    rows = {}
    for name, est in (("physics_only", est_p), ("gray_box", est_g), ("gray_box_envelope", est_e),
                      ("gray_box_check", est_c)):
        t0 = time.perf_counter()
        rows[name] = {**_free_run_rmses(est, train_rec, val_rec), "score_s": time.perf_counter() - t0}
        print(f"{name:18s} free-run RMSE  train {rows[name]['train_free_run_rmse']:.4f} V   validation "
              f"{rows[name]['val_free_run_rmse']:.4f} V", flush=True)
    report = {"configs": [BASE, GRAY], "overrides": overrides, "seed": args.seed, "val_seed": args.val_seed,
              "train_range": args.train_range, "val_range": args.val_range, "margin": args.margin,
              "noise_std": val_source.noise, "physics": {"steps": res_p.counters.steps, "wall_s": phys_s,
                                                        "values": est_p.parameter_values()},
              "gray": {"steps": res_g.counters.steps, "J_final": res_g.loss, "wall_s": gray_s},
              "checked": {"steps": res_c.counters.steps, "J_final": res_c.loss, "wall_s": checked_s,
                          "windows": len(checked.problem.windows), "residual_check": res_c.residual_check},
              "envelope": record, "val_share_outside_envelope": outside, "rows": rows,
              "gray_not_worse_than_physics": {
                  k: rows[k]["val_free_run_rmse"] <= rows["physics_only"]["val_free_run_rmse"]
                  for k in ("gray_box", "gray_box_envelope", "gray_box_check")}}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(report, indent=2, default=float))
    print(f"validation samples outside the envelope: {100 * outside:.1f} %; wrote {out / 'results.json'}")
    return report


if __name__ == "__main__":
    main()

"""Cross-track gray-box on BayesRace's data, with and without the trust envelope (issue 33, item 5).

Train on DYN-PP-ETHZ, score on DYN-PP-ETHZMobil, as Table 1 does (``configs/mhe_bayesrace_physics_gn.yaml``:
noise-free, y = (vx, omega), vy unmeasured, Euler):

* physics-only: `mhe.SingleTrackVehicle` at BayesRace's ground truth (`mhe.models.vehicle.BAYESRACE_TRUTH`), the
  values physics-only PEM-MHE recovers on this recording (RESULTS.md, Table 1: 4.1e-5 % mean relative error),
  so this row is that model without its 3 min of Gauss-Newton;
* gray-box: that physics plus a tanh residual (`mhe.models.model.NeuralResidual`, width ``--width``, ``in_scale`` the
  RMS of ``[vx, vy, omega, delta, pedal]`` over the training recording, ``out_scale`` ``--out-scale`` times the
  RMS of the training states' rates), identified with the physics by Adam for ``--steps`` PEM iterations from
  the physics-only start (the config's arrival cost);
* gray-box with envelope: the same trained model with its trust envelope recorded as a run records it
  (`mhe.pem.envelope_of_windows` on the training windows);
* gray-box with residual check: the same gray-box as a run of the library trains it by default
  (``residual.check`` and, for this recorded log, the envelope on): identified on the training recording less its
  last ``residual.check_share`` (20 %), then the library's residual check (`mhe.pem.residual_check_of_run`, called
  by `mhe.pem.finish` at the end of `PEMIdentifier.fit`) scores it and its physics alone on that held-back tail of
  DYN-PP-ETHZ (never on ETHZMobil), beside its physics alone and the physics it started from (here the ground
  truth), and keeps the better physics where the residual does not predict better; a rejected residual is scored
  as the run exports it, without a residual.

* physics in the gray-box's NLP: the ground truth with the gray-box's untrained residual, whose last layer is zero
  (the residual's output is exactly 0): the physics-only model, solved through the gray-box's NLP (L4CasADi's
  residual and its derivatives in every window's MHE).

Each is scored by the one-step prediction error of Table 1 (Eq. 9: mean over windows and outputs of ``r^2``,
each window's MHE from ``--starts`` cold starts and ``--passes`` passes of propagated starts, the lowest cost
kept, as `benchmarks.mhe.bayesrace` evaluates Table 1) on the training and the validation
windows; the share of the validation samples (logged states and inputs) outside the envelope is reported.

    python -m benchmarks.mhe.bayesrace_envelope                  # results/mhe_bayesrace_envelope/results.json
"""
from __future__ import annotations

import argparse
import copy
import json
import time
from dataclasses import replace
from pathlib import Path

import torch

from benchmarks.common import BAYESRACE_CONFIG as CONFIG, BAYESRACE_VALIDATION as VALIDATION
from mhe import PEMIdentifier, ResidualSettings, WindowSolver
from mhe.models.vehicle import BAYESRACE_TRUTH
from mhe.pem import envelope_of_windows
from mhe.scoring import one_step_error, with_values
from mhe.training import load_experiment


def _score(trained, problem, build: Path, starts: int, passes: int) -> dict:
    """One-step error of ``trained``'s model (physics values, residual weights and envelope) on ``problem``'s
    windows, at the config's arrival cost clipped into that data's box."""
    values = {n: float(v.detach()) for n, v in trained.model.physics.params().items()}
    prob = with_values(problem, problem.source, values, None)
    est = prob.estimator(clip_start=True)
    if est.model.residual is not None:
        est.model.residual.load_state_dict(trained.model.residual.state_dict())
    with WindowSolver(est, build) as solver:
        return one_step_error(solver, prob.windows, starts, passes)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="Adam iterations of the gray-box")
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--out-scale", type=float, default=0.05)
    parser.add_argument("--margin", type=float, default=0.5)
    parser.add_argument("--starts", type=int, default=3)
    parser.add_argument("--passes", type=int, default=3, help="passes of propagated starts (as Table 1)")
    parser.add_argument("--out", default="results/mhe_bayesrace_envelope")
    parser.add_argument("--build", default="build/l4casadi/mhe_bayesrace_envelope")
    args = parser.parse_args(argv)
    build = Path(args.build)
    exp = load_experiment(CONFIG, ["--model.outer.optimizer", "adam", "--model.outer.lr", str(args.lr),
                                   "--model.outer.lr_min", str(args.lr / 100)])
    problem = exp.problem
    rec = problem.logged
    rows = torch.cat([rec.states, rec.inputs], dim=1)
    in_scale = tuple(float(v) for v in rows.pow(2).mean(0).sqrt())
    rates = (rec.states[1:] - rec.states[:-1]) / rec.dt
    out_scale = tuple(args.out_scale * float(v) for v in rates.pow(2).mean(0).sqrt())
    truth = with_values(problem, problem.source, dict(BAYESRACE_TRUTH), None)
    gray = truth.replace(residual=ResidualSettings(args.width, in_scale, out_scale, seed=0, envelope=False,
                                                   check=False))
    checked = truth.replace(residual=ResidualSettings(args.width, in_scale, out_scale, seed=0))
    val_source = problem.source.with_path(VALIDATION)
    t0 = time.perf_counter()
    with PEMIdentifier(gray, args.steps, exp.outer, exp.solver) as pem:
        result = pem.fit(lambda i, s: print(f"  gray-box step {i}: J {s.loss:.4e}", flush=True))
        est_g = pem.estimator
        est_e = copy.deepcopy(est_g)
        physics = est_g.model.physics
        record = envelope_of_windows(est_e, pem.solver, gray.windows, args.margin,
                                     (list(physics.state_names), list(physics.input_names)))
    gray_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    with PEMIdentifier(checked, args.steps, exp.outer, replace(exp.solver, build_dir=str(build / "checked"))) as pem:
        result_c = pem.fit(lambda i, s: print(f"  gray-box (check) step {i}: J {s.loss:.4e}", flush=True))
        est_c = pem.estimator
    checked_s = time.perf_counter() - t0
    print(f"residual check: {result_c.residual_check}", flush=True)
    val_rec = val_source.record()
    outside = float(est_e.model.residual.outside(val_rec.states, val_rec.inputs).double().mean())
    est_p = truth.estimator()
    report_rows = {}
    # a rejected residual is scored as the run exports it (field.json without a residual, the NLP without L4CasADi)
    models = (("physics_only", est_p, truth), ("gray_box", est_g, gray), ("gray_box_envelope", est_e, gray),
              ("gray_box_check", est_c, truth if result_c.residual_rejected else gray),
              ("physics_in_gray_nlp", gray.estimator(), gray))
    for name, est, base in models:
        pairs = (("train", base), ("validation", base.replace(recording=val_source)))
        report_rows[name] = {label: _score(est, prob, build / name / label, args.starts, args.passes)
                             for label, prob in pairs}
        print(f"{name:18s} one-step error  train {report_rows[name]['train']['mse']:.3e}   validation "
              f"{report_rows[name]['validation']['mse']:.3e}", flush=True)
    report = {"config": CONFIG, "validation": VALIDATION, "args": vars(args), "in_scale": in_scale,
              "out_scale": out_scale, "gray": {"steps": result.counters.steps, "J_final": result.loss,
                                               "wall_s": gray_s, "parameters": result.parameters},
              "checked": {"steps": result_c.counters.steps, "J_final": result_c.loss, "wall_s": checked_s,
                          "parameters": result_c.parameters, "windows": len(checked.windows),
                          "residual_check": result_c.residual_check},
              "envelope": record, "val_share_outside_envelope": outside, "rows": report_rows}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(report, indent=1, default=float))
    print(f"validation samples outside the envelope: {100 * outside:.1f} %; wrote {out / 'results.json'}")
    return report


if __name__ == "__main__":
    torch.set_default_dtype(torch.float64)
    main()

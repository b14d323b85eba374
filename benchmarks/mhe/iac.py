"""Table 2 of the PEM-MHE paper on the real IAC racecar: EKF->PEM, physics-only and gray-box PEM-MHE.

The experiment is the config's (``configs/mhe_iac_physics_gn.yaml``: the first 70 % of the gated
stretch of Deep Dynamics' IAC log B trains, y = (vx, omega), vy unmeasured, 16 parameters within
Deep Dynamics' IAC ranges, Euler at 0.04 s), parsed as ``torch-ude fit`` parses it
(`mhe.training.load_experiment`); the rest of the stretch, the last 30 %, validates (``--validation-part``
another part; ``--config CONFIG VARIANT`` layers a variant such as the blocked split of
``configs/mhe_iac_split_blocked/``, whose validation is again the rest). Rows, all from the config's start
values (the paper: all methods from one start, Chrosniak et al.'s estimate):

* start: the config's values, untrained (the one-step fit on the logged vx, vy, omega of the
  training part from `GUESS`, which ``--start`` recomputes and prints with the MHE weights);
* EKF->PEM (Section 4.3): `mhe.peers.ekf.ExtendedKalmanFilter` with the start model over the training
  part (the filter's noise model and prior from the config's MHE weights and arrival cost), then
  `mhe.peers.state_pem.fit_on_states` on the frozen estimates from the start values (`mhe.peers.ekf_pem.ekf_pem`);
* PEM-MHE (physics-only): `mhe.PEMIdentifier` on the config (Gauss-Newton; `mhe.training.fit_pem`);
* PEM-MHE (gray-box), with ``--gray`` (about 30 min more): `mhe.PEMIdentifier` on ``--gray-config``
  (``configs/mhe_iac_gray.yaml``: the same problem plus a neural residual through L4CasADi, started from
  the physics-only result recorded in it, Adam; variants in ``configs/mhe_iac_gray_variants/`` hold only
  their differences and follow it: ``--gray-config configs/mhe_iac_gray.yaml VARIANT``), scored with its trained
  network on the physics-only config's windows (`mhe.scoring.on_windows_of`: the same stride, whatever stride the
  gray-box trained on).

Metrics at each row's parameters (`mhe.scoring.score_problem`), from each window's MHE
(`mhe.estimator.solver.lowest_cost_solve`:
the lowest cost of ``--starts`` cold starts, for PEM-MHE also its warm starts on the training part;
the config's arrival-cost start, PEM-MHE's trained one, each clipped into the box of the data it runs on):

* one-step prediction error, Table 1's: the mean over windows and the two outputs of ``r^2``,
  ``r = C x^_N - y~_N`` (Eq. 9), in the outputs' units (m/s, rad/s; not normalized), on the training
  and validation windows;
* multi-step error on validation: from each window's estimate ``x^_{N-1}`` (the last one that saw a
  measurement) the model runs open loop with the logged inputs for ``--rollout-s`` (1 s = 25 steps);
  the mean over windows, steps and outputs of the squared output error, and per output the RMSE
  at the end of the rollout;
* training time: the wall time of the fit (EKF + fit; the PEM loop; for the gray-box its own loop,
  which starts where the physics-only loop ended).

Prints the table and writes ``table2.json`` and ``validation.png`` (measured vx and omega on the
validation part with the 1 s open-loop predictions of EKF->PEM and each PEM-MHE row) to ``--out``
(the PEM runs' files in ``--out`` and, for the gray-box, ``--out``/gray)::

    python -m benchmarks.mhe.iac
    python -m benchmarks.mhe.iac --gray           # also the gray-box row
    python -m benchmarks.mhe.iac --start          # the start values and MHE weights of the config
    python -m benchmarks.mhe.iac --config configs/mhe_iac_gray.yaml --scales   # the residual's scales
    python -m benchmarks.mhe.iac --trainer.max_steps 3 --out results/mhe_iac_short
    python -m benchmarks.mhe.iac --gray --gray-set data.problem.residual.seed=1   # the gray-box config only

Further arguments are ``torch-ude`` overrides of both configs.
"""
from __future__ import annotations

import argparse
import json
import re
from collections.abc import Mapping
from pathlib import Path

import torch

from benchmarks.common import IAC_CONFIG as CONFIG, IAC_PAPER as PAPER
from benchmarks.common import add_split_arguments, iac_ekf_pem_row, markdown_table, plot_validation
from mhe import IdentificationProblem, StateSpaceModel
from mhe.data.logs import IACRecording
from mhe.data.recording import output_noise_std
from mhe.models.bounds import clip_inside
from mhe.peers.state_pem import fit_on_states, residual_scales, state_residuals
from mhe.problems.iac import validation_source
from mhe.scoring import on_windows_of, score_problem, with_values
from mhe.training import fit_pem, held_out_curve, load_experiment

GRAY_CONFIG = "configs/mhe_iac_gray.yaml"
GRAY = "PEM-MHE (gray-box)"
GUESS: dict[str, float] = {"Bf": 10.0, "Cf": 1.3, "Df": 4500.0, "Ef": -0.5, "Shf": 0.0, "Svf": 0.0,
                           "Br": 10.0, "Cr": 1.3, "Dr": 3250.0, "Er": -0.5, "Shr": 0.0, "Svr": 0.0,
                           "Cm1": 5000.0, "Cm2": 0.5, "Cr0": 0.75, "Cr2": 0.5}
"""Physical guess from which the start is fitted: D = the static axle load m g l_other / L (friction
coefficient 1), B = 10 and C = 1.3 (cornering stiffness B C D about 13 times the load per rad), E = -0.5,
no offsets; the drivetrain at the middle of Deep Dynamics' ranges except Cm1 (5000 N at full pedal)."""


def model_at(problem: IdentificationProblem, values: Mapping[str, float]) -> StateSpaceModel:
    """``problem``'s model at physical ``values`` (`mhe.scoring.with_values` on its own recording)."""
    return with_values(problem, problem.source, dict(values), None).model()


def logged_state_start(problem: IdentificationProblem) -> dict:
    """The config's start as ``--start`` makes it: the one-step fit on the logged states from `GUESS`.

    The fit (`mhe.peers.state_pem.fit_on_states`) weighs residual ``i`` by ``1 / (h q_i)`` with the config's ``q``;
    the result is moved 1 % of each range inside the bounds. Also the MHE weights measured on the training part:
    the outputs' noise (`mhe.data.recording.output_noise_std`) and ``q`` = the standard deviation of the start's
    one-step residuals on the logged states (`mhe.peers.state_pem.state_residuals`) divided by ``h``.
    """
    start = {**problem.start_values(), **GUESS}
    model = model_at(problem, start)
    rec = problem.recording
    fit = fit_on_states(model, rec.states.numpy(), rec.inputs.numpy(), problem.mhe.process_std, None, rec.breaks)
    values = clip_inside({**start, **fit.values}, problem.physics.params.bounds, 0.01)
    q = state_residuals(model_at(problem, values), rec).std(axis=0) / rec.dt
    return {"values": values, "fitted": fit.values, "at_bounds": list(fit.at_bounds), "fit_s": fit.wall_s,
            "process_std": q.tolist(), "measurement_std": output_noise_std(rec)}


def gray_overrides(settings: list[str]) -> list[str]:
    """``["KEY=VALUE", ...]`` of ``--gray-set`` as torch-ude arguments ``["--KEY", "VALUE", ...]``.

    Raises:
        ValueError: for a setting without ``=`` or with an empty key.
    """
    out = []
    for s in settings:
        key, sep, value = s.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--gray-set takes KEY=VALUE (e.g. data.problem.residual.seed=1); got {s!r}.")
        out += [f"--{key.strip().lstrip('-')}", value]
    return out


def main(argv: list[str] | None = None) -> None:
    """Run the rows on the configs, evaluate, print and write ``table2.json`` and ``validation.png``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog="Further arguments are torch-ude "
                                 "overrides of both configs, e.g. --trainer.max_steps 20.")
    add_split_arguments(ap)
    ap.add_argument("--gray", action="store_true", help="also the gray-box PEM-MHE row (--gray-config)")
    ap.add_argument("--gray-config", nargs="+", default=[GRAY_CONFIG], metavar="CONFIG",
                    help="the gray-box PEM-MHE config (the --config problem with a neural residual), optionally "
                         "followed by variants layered on it (configs/mhe_iac_gray_variants/*.yaml)")
    ap.add_argument("--gray-set", action="append", default=[], metavar="KEY=VALUE",
                    help="a torch-ude override of --gray-config only, e.g. data.problem.residual.seed=1 (repeatable)")
    ap.add_argument("--starts", type=int, default=3, help="cold starts per window of the evaluation")
    ap.add_argument("--rollout-s", type=float, default=1.0, help="length of the open-loop predictions (s)")
    ap.add_argument("--log-every", type=int, default=5, help="iterations between progress lines")
    ap.add_argument("--start", action="store_true", help="only print the start values and MHE weights")
    ap.add_argument("--scales", action="store_true",
                    help="only print a neural residual's in/out scales measured at the config's values")
    ap.add_argument("--held-out", type=int, default=None, metavar="K",
                    help="only choose the gray-box's outer loop: fit --gray-config on its training windows but every "
                         "K-th block and print the one-step error of the held-out blocks (held_out.json in --out)")
    ap.add_argument("--held-out-block", type=int, default=5, help="consecutive windows per block of --held-out")
    ap.add_argument("--held-out-every", type=int, default=1, help="iterations between held-out scorings")
    ap.add_argument("--out", type=Path, default=Path("results/mhe_iac"))
    args, overrides = ap.parse_known_args(argv)
    gray_args = overrides + gray_overrides(args.gray_set)
    if args.held_out is not None:
        sel = held_out_curve(load_experiment(args.gray_config, gray_args), args.held_out, args.held_out_block,
                             args.starts, args.held_out_every, args.log_every)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "held_out.json").write_text(json.dumps({"config": args.gray_config, "overrides": overrides, **sel},
                                                           indent=1) + "\n")
        print(f"written {args.out / 'held_out.json'}")
        return
    exp = load_experiment(args.config, overrides)
    problem, build = exp.problem, Path(exp.solver.build_dir)
    val_source = validation_source(problem, args.validation_part)
    if args.start:
        made = logged_state_start(problem)
        print(json.dumps(made, indent=1))
        return
    if args.scales:
        print(json.dumps(residual_scales(model_at(problem, problem.start_values()), problem.recording), indent=1))
        return
    gray_exp = None
    if args.gray:
        gray_exp = load_experiment(args.gray_config, gray_args)
        if gray_exp.problem.residual is None or not isinstance(gray_exp.problem.source, IACRecording):
            raise ValueError(f"--gray-config {' '.join(args.gray_config)} must add a neural residual "
                             "(data.problem.residual) to a problem on an mhe.data.logs.IACRecording.")
    steps = round(args.rollout_s / problem.recording.dt)
    args.out.mkdir(parents=True, exist_ok=True)
    start = problem.start_values()
    print(f"{len(problem.windows)} training windows of N = {problem.mhe.horizon}, stride {problem.stride}", flush=True)

    rows, curves = {}, {}

    config_arrival = (list(problem.arrival.mean), list(problem.arrival.std))

    def evaluate(name: str, values: dict, arrival: tuple, warm: list | None = None, base: IdentificationProblem =
                 problem, residual: Mapping[str, torch.Tensor] | None = None) -> None:
        folder = build / re.sub(r"[^A-Za-z0-9.-]+", "_", name)  # L4CasADi's compiler command takes no spaces
        train, _ = score_problem(with_values(base, base.source, values, arrival), folder / "train", args.starts, 0,
                                 warm, residual)
        val, curve = score_problem(with_values(base, val_source, values, arrival), folder / "validation",
                                   args.starts, steps, residual=residual)
        rows[name] = {**rows.get(name, {}), "values": values, "train": train, "validation": val}
        curves[name] = curve
        print(f"{name}: one-step train {train['mse']:.3e}, validation {val['mse']:.3e}, {args.rollout_s:g} s open "
              f"loop {val['multi_step']['mse']:.3e}", flush=True)

    evaluate("start", start, config_arrival)
    rows["EKF->PEM"] = iac_ekf_pem_row(problem, build / "ekf")
    evaluate("EKF->PEM", rows["EKF->PEM"]["values"], config_arrival)

    name = "PEM-MHE (physics-only)"
    phys = fit_pem(exp, args.out, args.log_every)
    values, arrival, history = phys["values"], phys["arrival"], phys["history"]
    rows[name] = phys["row"]
    evaluate(name, values, arrival, phys["warm"])
    val_config_arrival, _ = score_problem(with_values(problem, val_source, values, config_arrival),
                                          build / name / "config_arrival", args.starts)
    rows[name]["validation_config_arrival"] = val_config_arrival

    if gray_exp is not None:
        gray_problem, gray_start = gray_exp.problem, gray_exp.problem.start_values()
        print(f"{GRAY}: {sum(p.numel() for p in gray_problem.model().parameters())} identified parameters; its start "
              f"differs from this run's physics-only result by at most "
              f"{max(abs(gray_start[n] - v) / max(abs(v), 1e-12) for n, v in values.items()):.2e} (relative)",
              flush=True)
        gray = fit_pem(gray_exp, args.out / "gray", args.log_every)
        last = gray_problem.model().residual.mlp.n_layers - 1
        rows[GRAY] = {**gray["row"], "config": args.gray_config, "start": gray_start,
                      "residual": {"sizes": list(gray_problem.model().residual.mlp.sizes),
                                   "last_layer_weight_norm": float(gray["residual"][f"mlp.weight{last}"].norm())},
                      "trained_windows": len(gray_problem.windows), "trained_stride": gray_problem.stride,
                      "history": gray["history"]}
        scored, warm = on_windows_of(gray_problem, problem, gray["warm"])
        evaluate(GRAY, gray["values"], gray["arrival"], warm, scored, gray["residual"])

    table = {"config": args.config, "gray_config": args.gray_config if args.gray else None, "overrides": overrides,
             "gray_set": args.gray_set,
             "validation_part": list(val_source.part),
             "one_step_error": "mean over windows and outputs (vx in m/s, omega in rad/s) of r^2, r = C x^_N - y~_N "
                               "(Eq. 9), x^_N from each window's MHE at the row's parameters",
             "multi_step_error": f"mean over windows, {steps} steps and outputs of the squared error of the open-loop "
                                 "prediction from x^_{N-1} with the logged inputs",
             "paper": PAPER, "rows": rows, "history": history}
    (args.out / "table2.json").write_text(json.dumps(table, indent=1) + "\n")
    rec = val_source.record()
    t = (torch.arange(len(rec.outputs)) * rec.dt).numpy()
    plot_validation(args.out / "validation.png", t, rec.outputs.numpy(),
         {k: curves[k] for k in ("EKF->PEM", name, GRAY) if k in curves})
    markdown_table(("method", "one-step train", "one-step validation", "1 s open loop, validation", "training time"),
                   [(k, f"{r['train']['mse']:.3g}", f"{r['validation']['mse']:.3g}",
                     f"{r['validation']['multi_step']['mse']:.3g}",
                     f"{r['training_s']:.1f} s" if "training_s" in r else "-") for k, r in rows.items()])
    print(f"PEM-MHE validation with the config's arrival-cost start: {val_config_arrival['mse']:.3g}")
    if GRAY in rows:
        change = rows[GRAY]["validation"]["mse"] / rows[name]["validation"]["mse"] - 1
        print(f"{GRAY} one-step validation vs physics-only: {100 * change:+.1f} % (paper: -31 %)")
    print(f"written {args.out / 'table2.json'} and {args.out / 'validation.png'}")


if __name__ == "__main__":
    torch.set_default_dtype(torch.float64)
    main()

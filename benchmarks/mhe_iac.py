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
  part (the filter's noise model and prior from the config's MHE weights and arrival cost, as in
  ``benchmarks.mhe_bayesrace_baselines``), then `mhe.peers.state_pem.fit_on_states` on the frozen
  estimates from the start values;
* PEM-MHE (physics-only): `mhe.PEMIdentifier` on the config (Gauss-Newton);
* PEM-MHE (gray-box), with ``--gray`` (about 30 min more): `mhe.PEMIdentifier` on ``--gray-config``
  (``configs/mhe_iac_gray.yaml``: the same problem plus a neural residual through L4CasADi, started from
  the physics-only result recorded in it, Adam; variants in ``configs/mhe_iac_gray_variants/`` hold only
  their differences and follow it: ``--gray-config configs/mhe_iac_gray.yaml VARIANT``), scored with its trained network on the physics-only
  config's windows (`on_windows_of`: the same stride, whatever stride the gray-box trained on).

Metrics at each row's parameters, from each window's MHE (`mhe.estimator.solver.lowest_cost_solve`:
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

    python -m benchmarks.mhe_iac
    python -m benchmarks.mhe_iac --gray           # also the gray-box row
    python -m benchmarks.mhe_iac --start          # the start values and MHE weights of the config
    python -m benchmarks.mhe_iac --config configs/mhe_iac_gray.yaml --scales   # the residual's scales
    python -m benchmarks.mhe_iac --trainer.max_steps 3 --out results/mhe_iac_short
    python -m benchmarks.mhe_iac --gray --gray-set data.problem.residual.seed=1   # the gray-box config only

Further arguments are ``torch-ude`` overrides of both configs.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch

from benchmarks.mhe_bayesrace import fit_pem, one_step_error, solutions_error, with_values
from benchmarks.mhe_bayesrace_baselines import ekf_settings
from mhe import Bound, IdentificationProblem, PEMIdentifier, WindowSolver
from mhe.data.logs import IACRecording
from mhe.estimator.solver import Start, lowest_cost_solve
from mhe.peers.ekf import EKFResult, ExtendedKalmanFilter
from mhe.peers.state_pem import fit_on_states
from mhe.training import PEMExperiment
from mhe.training import load_experiment
from torch_ude.savgol import SavitzkyGolay

CONFIG = "configs/mhe_iac_physics_gn.yaml"
GRAY_CONFIG = "configs/mhe_iac_gray.yaml"
GRAY = "PEM-MHE (gray-box)"
GUESS: dict[str, float] = {"Bf": 10.0, "Cf": 1.3, "Df": 4500.0, "Ef": -0.5, "Shf": 0.0, "Svf": 0.0,
                           "Br": 10.0, "Cr": 1.3, "Dr": 3250.0, "Er": -0.5, "Shr": 0.0, "Svr": 0.0,
                           "Cm1": 5000.0, "Cm2": 0.5, "Cr0": 0.75, "Cr2": 0.5}
"""Physical guess from which the start is fitted: D = the static axle load m g l_other / L (friction
coefficient 1), B = 10 and C = 1.3 (cornering stiffness B C D about 13 times the load per rad), E = -0.5,
no offsets; the drivetrain at the middle of Deep Dynamics' ranges except Cm1 (5000 N at full pedal)."""
PAPER = {"subnet": {"one_step_train": 3.16e-4, "one_step_validation": 3.25e-3, "training": "3 min"},
         "joint_mhe": {"one_step_train": 4.70e-4, "one_step_validation": 4.47e-4, "training": "4 min"},
         "ekf_pem": {"one_step_train": 4.37e-4, "one_step_validation": 4.20e-4, "training": "1 min"},
         "ekf_pem_adaptive": {"one_step_train": 2.20e-4, "one_step_validation": 2.62e-4, "training": "4 min"},
         "pem_mhe_physics": {"one_step_train": 4.24e-4, "one_step_validation": 4.10e-4, "training": "2 h 50 min"},
         "pem_mhe_gray": {"one_step_train": 2.92e-4, "one_step_validation": 2.84e-4, "training": "23 h 40 min"}}
"""Table 2 of the paper (its normalization of the error is not stated)."""


def inside(values: Mapping[str, float], bounds: Mapping[str, Bound], fraction: float) -> dict[str, float]:
    """``values`` with each bounded one moved to at least ``fraction`` of its range inside its bounds."""
    out = dict(values)
    for n, b in bounds.items():
        if b.lower is not None and b.upper is not None:
            out[n] = b.clip(out[n], fraction)
    return out


def values_of(problem: IdentificationProblem) -> dict[str, float]:
    """The start values of all physical parameters of ``problem``, by name."""
    return {n: float(v.detach()) for n, v in problem.physics.params().items()}


def one_step_residuals(problem: IdentificationProblem, values: Mapping[str, float]) -> np.ndarray:
    """``x_{k+1} - f_d(x_k, u~_k)`` on the logged states of ``problem``'s recording, for the transitions
    ``k -> k + 1`` that span no gap (``recording.follows()``, in order), shape (that many, n_x)."""
    rec = problem.recording
    keep = rec.follows()
    model = with_values(problem, problem.source, dict(values), None).model()
    with torch.no_grad():
        x = rec.states[:-1][keep]
        return (rec.states[1:][keep] - model.step(x, rec.inputs[:-1][keep], torch.zeros_like(x))).numpy()


def output_noise_std(problem: IdentificationProblem) -> list[float]:
    """Savitzky-Golay (M = 5, P = 4) estimate of the noise standard deviation of each output (Eq. 23, TinyUDE)."""
    sg, y = SavitzkyGolay(5, 4), problem.recording.outputs
    e = torch.cat([sg.centre_residual(sg.windows(y[a:b], 1)) for a, b in problem.recording.stretches()])
    return sg.noise_variance(e).sqrt().tolist()


def logged_state_start(problem: IdentificationProblem) -> dict:
    """The config's start as ``--start`` makes it: the one-step fit on the logged states from `GUESS`.

    The fit weighs residual ``i`` by ``1 / (h q_i)`` with the config's ``q``; the result is moved
    1 % of each range inside the bounds. Also the MHE weights measured on the training part: the
    outputs' noise (`output_noise_std`) and ``q`` = the standard deviation of the start's one-step
    residuals on the logged states divided by ``h``.
    """
    start = {**values_of(problem), **GUESS}
    model = with_values(problem, problem.source, start, None).model()
    rec = problem.recording
    fit = fit_on_states(model, rec.states.numpy(), rec.inputs.numpy(), problem.mhe.process_std, None, rec.breaks)
    values = inside({**start, **fit.values}, problem.physics.params.bounds, 0.01)
    q = (one_step_residuals(problem, values).std(axis=0) / rec.dt).tolist()
    return {"values": values, "fitted": fit.values, "at_bounds": list(fit.at_bounds), "fit_s": fit.wall_s,
            "process_std": q, "measurement_std": output_noise_std(problem)}


def start_ekf(problem: IdentificationProblem, build: Path) -> EKFResult:
    """The EKF with ``problem``'s start model over its recording (filtered states ``x^_{k|k}``, wall time)."""
    return ExtendedKalmanFilter(problem.model(), ekf_settings(problem), build).run(problem.recording)


def ekf_pem(problem: IdentificationProblem, build: Path, filtered: EKFResult | None = None) -> dict:
    """EKF with ``problem``'s start model over its recording (`start_ekf`; ``filtered``: its result, already
    run), then the one-step fit on the frozen estimates. The training time includes the EKF's."""
    t0 = time.perf_counter()
    model, rec, start = problem.model(), problem.recording, values_of(problem)
    est = start_ekf(problem, build) if filtered is None else filtered
    fit = fit_on_states(model, est.states, rec.inputs.numpy(), problem.mhe.process_std, [start], rec.breaks)
    wall = time.perf_counter() - t0 + (0.0 if filtered is None else est.wall_s)
    hidden = [j for j in range(problem.n_x) if j not in problem.measured]
    return {"values": inside({**start, **fit.values}, problem.physics.params.bounds, 1e-6),
            "at_bounds": list(fit.at_bounds), "training_s": wall, "ekf_s": est.wall_s, "fit_s": fit.wall_s,
            "ekf_vy_rmse_vs_logged": float(np.sqrt(((est.states[:, hidden] - rec.states.numpy()[:, hidden]) ** 2)
                                                   .mean()))}


def rollouts(problem: IdentificationProblem, x0: torch.Tensor, first: torch.Tensor, steps: int,
             residual: Mapping[str, torch.Tensor] | None = None) -> torch.Tensor:
    """Open-loop outputs from states ``x0`` (M, n_x) at samples ``first`` (M,), logged inputs: (M, steps, n_y).

    ``residual``: the weights (``state_dict``) of ``problem``'s neural residual; None: its start weights.
    """
    model, u = with_residual(problem.model(), residual), problem.recording.inputs
    x, out = x0, []
    with torch.no_grad():
        for k in range(steps):
            x = model.step(x, u[first + k], torch.zeros_like(x))
            out.append(model.output(x))
    return torch.stack(out, dim=1)


def with_residual(model, residual: Mapping[str, torch.Tensor] | None):
    """``model`` (a `mhe.models.model.StateSpaceModel`) with its neural residual's weights set to ``residual`` (if given).

    Raises:
        ValueError: for weights given to a model without a residual.
    """
    if residual is not None:
        if model.residual is None:
            raise ValueError("residual weights were given for a problem without a neural residual; give None.")
        model.residual.load_state_dict(dict(residual))
    return model


def open_loop_error(pred: torch.Tensor, meas: torch.Tensor) -> dict:
    """The multi-step error of open-loop outputs ``pred`` against the logged ``meas``, both (M, S, n_y).

    Returns:
        ``mse`` (mean over rollouts, steps and outputs of the squared error), ``steps`` S, ``rollouts`` M and
        ``rmse_end`` (the RMSE per output at the last step).
    """
    err = pred - meas
    return {"mse": float((err ** 2).mean()), "steps": err.shape[1], "rollouts": err.shape[0],
            "rmse_end": (err[:, -1] ** 2).mean(dim=0).sqrt().tolist()}


def score(problem: IdentificationProblem, build: Path, starts: int, rollout_steps: int = 0,
          warm: list[Start | None] | None = None,
          residual: Mapping[str, torch.Tensor] | None = None) -> tuple[dict, dict]:
    """One-step error (and, for ``rollout_steps > 0``, the multi-step error) of ``problem`` at its start values.

    ``residual``: the trained weights (``state_dict``) of ``problem``'s neural residual; None: its start weights.

    Returns:
        The metrics, and for plotting the sample index of each rollout's first prediction and its
        outputs, (M',) and (M', rollout_steps, n_y).
    """
    est = problem.estimator()
    with_residual(est.model, residual)
    with WindowSolver(est, build) as solver:
        best = lowest_cost_solve(solver, problem.windows, starts, warm)
        out = one_step_error(est, problem, solver, starts, best=best)
    if rollout_steps < 1:
        return out, {}
    windows, y = problem.windows, problem.recording.outputs
    first = windows.start + windows.horizon - 1  # the sample of x^_{N-1}
    keep = best.ok & (first + rollout_steps < len(y))
    for b in problem.recording.breaks:  # no rollout runs over a gap in the log
        keep &= (b <= first) | (b > first + rollout_steps)
    first = first[keep]
    pred = rollouts(problem, best.point.x[keep, -2].detach(), first, rollout_steps, residual)
    out["multi_step"] = open_loop_error(pred, y[first[:, None] + 1 + torch.arange(rollout_steps)[None, :]])
    return out, {"first": first + 1, "pred": pred}


def plot(path: Path, rec_t: np.ndarray, y: np.ndarray, curves: Mapping[str, dict]) -> None:
    """Measured vx and omega on the validation part with each row's 1 s open-loop predictions."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1, figsize=(12, 6), sharex=True)
    colors = {"EKF->PEM": "tab:orange", "PEM-MHE (physics-only)": "tab:blue", GRAY: "tab:red"}
    for j, (ax, label) in enumerate(zip(axes, ("vx (m/s)", "omega (rad/s)"))):
        ax.plot(rec_t, y[:, j], color="k", lw=0.8, label="measured")
        for name, c in curves.items():
            for i, (f, p) in enumerate(zip(c["first"].tolist(), c["pred"][:, :, j].numpy())):
                ax.plot(rec_t[f:f + len(p)], p, color=colors.get(name, "tab:green"), lw=0.8,
                        label=f"{name}, 1 s open loop" if i == 0 else None)
        ax.set_ylabel(label)
    axes[0].legend(loc="lower left", fontsize=8)
    axes[1].set_xlabel("time (s)")
    axes[0].set_title("IAC log B, validation part: measured and 1 s open-loop predictions from the MHE estimates")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def residual_scales(problem: IdentificationProblem, values: Mapping[str, float]) -> dict[str, list[float]]:
    """The neural residual's scales measured on ``problem``'s recording at physical ``values``.

    Returns:
        ``in_scale``: the RMS of each logged state and input, (n_x + n_u,); ``out_scale``: the RMS of
        the one-step residuals on the logged states (`one_step_residuals`) divided by ``h``, (n_x,).
    """
    rec = problem.recording
    z = torch.cat([rec.states, rec.inputs], dim=-1)
    res = one_step_residuals(problem, values) / rec.dt
    return {"in_scale": z.pow(2).mean(dim=0).sqrt().tolist(), "out_scale": np.sqrt((res ** 2).mean(axis=0)).tolist()}


def on_windows_of(problem: IdentificationProblem, reference: IdentificationProblem,
                  warm: list[Start | None]) -> tuple[IdentificationProblem, list[Start | None]]:
    """``problem`` on ``reference``'s windows (its stride and window limit) and the warm starts of those windows.

    A gray-box config may train on more windows (a smaller stride) than the physics-only config; every row
    is scored on the physics-only config's windows so the errors compare. ``warm``: one start per window of
    ``problem`` (None where it has none); a scored window keeps the start of the trained window with the same
    first sample, else None.
    """
    same = problem.replace(stride=reference.stride, windows=reference.limit)
    by_sample = {int(s): w for s, w in zip(problem.windows.start, warm)}
    return same, [by_sample.get(int(s)) for s in same.windows.start]


def held_out_curve(exp: PEMExperiment, every_k: int, block: int, starts: int, every: int, log_every: int) -> dict:
    """Choose the outer loop on the training part only: fit on most of its windows, score the others as it goes.

    The config's windows are taken in blocks of ``block`` consecutive windows; every ``every_k``-th block
    is held out (so the held-out windows cover every stretch of the training part: its first half holds
    the slow start and none of the braking of the second), the PEM loop of ``exp`` (its optimizer,
    ``max_steps``, start) runs on the others. Before the first iteration, every ``every`` iterations and
    after the last, the one-step error (`one_step_error`'s mean of ``r^2``) of the held-out windows is
    taken at the current ``alpha`` as the validation part is scored: the lowest-cost of ``starts`` cold
    starts per window. The validation part is never read.

    Returns:
        The window counts, ``curve``: per scoring the iteration (-1 = the start), the loss ``J`` and failed
        windows of that iteration, the held-out error and failures, wall s; and ``history``: per iteration
        ``J``, failed windows and windows switched to a cold start.

    Raises:
        ValueError: if ``every_k < 2`` or ``block < 1``.
    """
    if every_k < 2 or block < 1:
        raise ValueError(f"--held-out (every k-th block held out) must be >= 2 and --held-out-block >= 1; got "
                         f"{every_k} and {block}.")
    problem = exp.problem
    m = len(problem.windows)
    held = (torch.arange(m) // block) % every_k == every_k - 1
    fit_index = torch.nonzero(~held).flatten().tolist()
    fit, windows = problem.windows[~held], problem.windows[held]
    curve, history = [], []
    print(f"held-out selection: fit on {len(fit_index)} windows, {len(windows)} held out (blocks of {block}, "
          f"every {every_k}th)", flush=True)
    with PEMIdentifier(problem, exp.max_steps, exp.outer, exp.solver) as pem, \
            WindowSolver(pem.estimator, Path(exp.solver.build_dir) / "held_out") as solver:
        est, t0 = pem.estimator, time.perf_counter()

        def score_held_out(i: int, loss: float, failed: int) -> None:
            err = solutions_error(est, windows, lowest_cost_solve(solver, windows, starts))
            curve.append({"iteration": i, "loss": loss, "n_failed": failed, "held_out": err["mse"],
                          "held_out_failed": err["failed"], "wall_s": time.perf_counter() - t0})
            print(f"{i:4d} J={loss:.4e} failed={failed} held-out {curve[-1]['held_out']:.4e} "
                  f"({100 * (curve[-1]['held_out'] / curve[0]['held_out'] - 1):+.1f} %) t={curve[-1]['wall_s']:.0f}s",
                  flush=True)

        score_held_out(-1, math.nan, 0)
        for i in range(exp.max_steps):
            step = pem.loop.step(fit_index, fit)
            history.append({"iteration": i, "loss": step.loss, "n_failed": step.n_failed, "switched": step.switched})
            last = i == exp.max_steps - 1 or bool(pem.loop.stop_reason)
            if (i + 1) % every == 0 or last:
                score_held_out(i, step.loss, step.n_failed)
            elif i % log_every == 0:
                print(f"{i:4d} J={step.loss:.4e} failed={step.n_failed} t={time.perf_counter() - t0:.0f}s", flush=True)
            if last:
                break
    return {"block": block, "every_k": every_k, "fit_windows": len(fit_index), "held_out_windows": len(windows),
            "starts": starts, "stop": pem.loop.stop_reason, "curve": curve, "history": history}


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


def add_split_arguments(ap: argparse.ArgumentParser) -> None:
    """``--config`` (a PEM-MHE config on a part of an IAC log, optionally followed by variants layered on it) and
    ``--validation-part`` (a, b, ...), shared by the IAC benchmarks; `validation_source` reads them."""
    ap.add_argument("--config", nargs="+", default=[CONFIG], metavar="CONFIG",
                    help="a PEM-MHE config on a part of an IAC log, optionally followed by variants layered on it "
                         "(e.g. configs/mhe_iac_split_blocked/physics.yaml)")
    ap.add_argument("--validation-part", type=float, nargs="+", default=None, metavar="FRACTION",
                    help="the fractions (a, b) of the gated stretch to validate on, or several pairs (a1, b1, a2, b2, "
                         "...); default: the rest of the stretch, what the config's part leaves out")


def validation_source(args: argparse.Namespace, problem: IdentificationProblem) -> IACRecording:
    """The validation recording of `add_split_arguments`: ``--validation-part`` of ``problem``'s IAC log, or the
    rest of its gated stretch (the blocks the training part leaves out).

    Raises:
        ValueError: if ``problem`` does not read an `mhe.data.logs.IACRecording`.
    """
    src = problem.source
    if not isinstance(src, IACRecording):
        raise ValueError(f"{' + '.join(args.config)} must read an mhe.data.logs.IACRecording; it reads "
                         f"{type(src).__name__}.")
    return src.rest() if args.validation_part is None else src.with_part(args.validation_part)


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
    val_source = validation_source(args, problem)
    if args.start:
        made = logged_state_start(problem)
        print(json.dumps(made, indent=1))
        return
    if args.scales:
        print(json.dumps(residual_scales(problem, values_of(problem)), indent=1))
        return
    gray_exp = None
    if args.gray:
        gray_exp = load_experiment(args.gray_config, gray_args)
        if gray_exp.problem.residual is None or not isinstance(gray_exp.problem.source, IACRecording):
            raise ValueError(f"--gray-config {' '.join(args.gray_config)} must add a neural residual "
                             "(data.problem.residual) to a problem on an mhe.data.logs.IACRecording.")
    steps = round(args.rollout_s / problem.recording.dt)
    args.out.mkdir(parents=True, exist_ok=True)
    start = values_of(problem)
    print(f"{len(problem.windows)} training windows of N = {problem.mhe.horizon}, stride {problem.stride}", flush=True)

    rows, curves = {}, {}

    config_arrival = (list(problem.arrival.mean), list(problem.arrival.std))

    def evaluate(name: str, values: dict, arrival: tuple, warm: list | None = None, base: IdentificationProblem =
                 problem, residual: Mapping[str, torch.Tensor] | None = None) -> None:
        folder = build / re.sub(r"[^A-Za-z0-9.-]+", "_", name)  # L4CasADi's compiler command takes no spaces
        train, _ = score(with_values(base, base.source, values, arrival), folder / "train", args.starts, 0,
                         warm, residual)
        val, curve = score(with_values(base, val_source, values, arrival), folder / "validation",
                           args.starts, steps, residual=residual)
        rows[name] = {**rows.get(name, {}), "values": values, "train": train, "validation": val}
        curves[name] = curve
        print(f"{name}: one-step train {train['mse']:.3e}, validation {val['mse']:.3e}, {args.rollout_s:g} s open "
              f"loop {val['multi_step']['mse']:.3e}", flush=True)

    evaluate("start", start, config_arrival)
    rows["EKF->PEM"] = ekf_pem(problem, build / "ekf")
    evaluate("EKF->PEM", rows["EKF->PEM"]["values"], config_arrival)

    name = "PEM-MHE (physics-only)"
    phys = fit_pem(exp, args.out, args.log_every)
    values, arrival, history = phys["values"], phys["arrival"], phys["history"]
    rows[name] = phys["row"]
    evaluate(name, values, arrival, phys["warm"])
    val_config_arrival, _ = score(with_values(problem, val_source, values, config_arrival),
                                  build / name / "config_arrival", args.starts)
    rows[name]["validation_config_arrival"] = val_config_arrival

    if gray_exp is not None:
        gray_problem, gray_start = gray_exp.problem, values_of(gray_exp.problem)
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
    plot(args.out / "validation.png", t, rec.outputs.numpy(),
         {k: curves[k] for k in ("EKF->PEM", name, GRAY) if k in curves})
    print("| method | one-step train | one-step validation | 1 s open loop, validation | training time |")
    print("| --- | --- | --- | --- | --- |")
    for k, r in rows.items():
        wall = f"{r['training_s']:.1f} s" if "training_s" in r else "-"
        print(f"| {k} | {r['train']['mse']:.3g} | {r['validation']['mse']:.3g} | "
              f"{r['validation']['multi_step']['mse']:.3g} | {wall} |")
    print(f"PEM-MHE validation with the config's arrival-cost start: {val_config_arrival['mse']:.3g}")
    if GRAY in rows:
        change = rows[GRAY]["validation"]["mse"] / rows[name]["validation"]["mse"] - 1
        print(f"{GRAY} one-step validation vs physics-only: {100 * change:+.1f} % (paper: -31 %)")
    print(f"written {args.out / 'table2.json'} and {args.out / 'validation.png'}")


if __name__ == "__main__":
    torch.set_default_dtype(torch.float64)
    main()

"""Plumbing the benchmarks share (no library code: what a user needs lives in the packages).

PEM-MHE benchmarks (``benchmarks.mhe_*``): the BayesRace and IAC configs and data paths, Table 2's paper row,
the IAC split arguments, the in-process PEM run with progress lines, Markdown tables and the IAC validation plot.
"""
from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # the PEM-MHE helpers import CasADi and Lightning when called, not when this module is imported
    from mhe import IdentificationProblem, MovingHorizonEstimator
    from mhe.data.logs import IACRecording
    from mhe.peers.ekf import EKFResult
    from mhe.training import PEMExperiment

__all__ = ["BAYESRACE_CONFIG", "BAYESRACE_VALIDATION", "IAC_CONFIG", "IAC_PAPER", "TABLE1", "add_split_arguments",
           "fit_pem", "iac_ekf_pem_row", "markdown_table", "plot_validation", "validation_source"]

# -- PEM-MHE benchmarks (mhe_*) ---------------------------------------------------------------------------------------

BAYESRACE_CONFIG = "configs/mhe_bayesrace_physics_gn.yaml"
BAYESRACE_VALIDATION = "../shared/data/bayesrace/DYN-PP-ETHZMobil.npz"
TABLE1 = ("method", "one-step train", "one-step validation", "mean rel. parameter error", "training time")
"""The columns of Table 1 (`markdown_table`)."""
IAC_CONFIG = "configs/mhe_iac_physics_gn.yaml"
IAC_PAPER = {"subnet": {"one_step_train": 3.16e-4, "one_step_validation": 3.25e-3, "training": "3 min"},
             "joint_mhe": {"one_step_train": 4.70e-4, "one_step_validation": 4.47e-4, "training": "4 min"},
             "ekf_pem": {"one_step_train": 4.37e-4, "one_step_validation": 4.20e-4, "training": "1 min"},
             "ekf_pem_adaptive": {"one_step_train": 2.20e-4, "one_step_validation": 2.62e-4, "training": "4 min"},
             "pem_mhe_physics": {"one_step_train": 4.24e-4, "one_step_validation": 4.10e-4,
                                 "training": "2 h 50 min"},
             "pem_mhe_gray": {"one_step_train": 2.92e-4, "one_step_validation": 2.84e-4, "training": "23 h 40 min"}}
"""Table 2 of the paper (its normalization of the error is not stated)."""


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    """Print a Markdown table of already formatted cells."""
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")


def fit_pem(exp: PEMExperiment, out: Path, log_every: int,
            track: Callable[[MovingHorizonEstimator], dict[str, float]] | None = None) -> dict:
    """Run PEM-MHE on ``exp`` in this process (`mhe.PEMIdentifier`) and write its run files to ``out``.

    ``track``: per iteration, further numbers of the estimator for the history and the progress line
    (e.g. the mean relative parameter error where the truth is known).

    Returns:
        ``row`` (training time, steps, stop reason, failed solves, trained arrival cost and, with a
        two-stage start, its `mhe.outer.noise_fit.NoiseFitReport`), the
        trained ``values`` and ``arrival``, the ``warm`` starts of the training windows, the trained
        ``residual`` weights (None without a residual), the ``history`` of the iterations and the
        loop's ``result`` (`mhe.outer.report.PEMResult`).
    """
    from mhe import PEMIdentifier
    from mhe.training import pem_outputs, write_pem_outputs

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


def add_split_arguments(ap: argparse.ArgumentParser) -> None:
    """``--config`` (a PEM-MHE config on a part of an IAC log, optionally followed by variants layered on it) and
    ``--validation-part`` (a, b, ...), shared by the IAC benchmarks; `validation_source` reads them."""
    ap.add_argument("--config", nargs="+", default=[IAC_CONFIG], metavar="CONFIG",
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
    from mhe.data.logs import IACRecording

    src = problem.source
    if not isinstance(src, IACRecording):
        raise ValueError(f"{' + '.join(args.config)} must read an mhe.data.logs.IACRecording; it reads "
                         f"{type(src).__name__}.")
    return src.rest() if args.validation_part is None else src.with_part(args.validation_part)


def iac_ekf_pem_row(problem: IdentificationProblem, build: Path, filtered: EKFResult | None = None) -> dict:
    """Table 2's EKF->PEM row (`mhe.peers.ekf_pem.ekf_pem` from the config's start; ``filtered``: the EKF, already
    run): the identified values, parameters at a bound and the times (EKF + fit)."""
    from mhe.peers.ekf_pem import ekf_pem

    res = ekf_pem(problem, build, filtered=filtered)
    return {"values": res.values, "at_bounds": list(res.fit.at_bounds), "training_s": res.wall_s,
            "ekf_s": res.ekf.wall_s, "fit_s": res.fit.wall_s, "ekf_vy_rmse_vs_logged": res.hidden_rmse}


def plot_validation(path: Path, rec_t: np.ndarray, y: np.ndarray, curves: Mapping[str, dict]) -> None:
    """Measured vx and omega on the IAC validation part with each row's 1 s open-loop predictions (``curves``:
    per row ``first``, the first predicted sample of each rollout (M,), and ``pred``, (M, S, 2))."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1, figsize=(12, 6), sharex=True)
    colors = {"EKF->PEM": "tab:orange", "PEM-MHE (physics-only)": "tab:blue", "PEM-MHE (gray-box)": "tab:red"}
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

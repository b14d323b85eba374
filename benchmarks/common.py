"""The one helper module of the benchmarks: result folders, the papers' settings several scripts share,
argparse options and table/plot helpers. What a user needs lives in the packages (`torch_ude.cli.fit_config`
runs a config, `baselines.peers` the peers, `torch_ude.prediction` and `torch_ude.metrics` the scores,
`mhe.scoring` and `mhe.peers` the PEM-MHE scorer and its peers).

PEM-MHE benchmarks (``benchmarks.mhe.*``): the BayesRace and IAC configs and data paths, Table 2's paper row,
the BayesRace arguments, the IAC split arguments (`mhe.problems.iac.validation_source` reads them), Table 2's
EKF->PEM row, Markdown tables and the IAC validation plot (their CasADi imports happen when a function is called;
the in-process PEM run is `mhe.training.fit_pem`).
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import yaml
from matplotlib.figure import Figure

from baselines.matched import matched_baseline
from torch_ude.cli import fit_config
from torch_ude.field import HybridField

if TYPE_CHECKING:  # the PEM-MHE helpers import CasADi when called, not when this module is imported
    from mhe import IdentificationProblem
    from mhe.peers.ekf import EKFResult

__all__ = ["ROOT", "RESULTS", "save", "summarize", "CASE_CONFIGS", "NOISE_VARIANTS", "PLANTS", "trainer_job",
           "BASELINE_CONFIGS", "BASELINE_VARIANTS", "baseline_run", "KEYS", "require_data", "add_run_arguments",
           "rk4_baseline", "summarize_seeds", "save_run", "torque_figure",
           "C_CONFIG", "C_CASES", "speedup_line",
           "BAYESRACE_CONFIG", "BAYESRACE_VALIDATION", "IAC_CONFIG", "IAC_PAPER", "TABLE1", "add_bayesrace_arguments",
           "add_split_arguments", "iac_ekf_pem_row", "markdown_table", "plot_validation"]

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path("results")


def save(name: str, payload: dict) -> Path:
    """Write ``results/<name>/<name>.json`` (non-finite numbers as null) and return the folder."""
    folder = RESULTS / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(payload, indent=2, default=lambda v: None if
                                                     isinstance(v, float) and not math.isfinite(v) else str(v)))
    return folder


def summarize(values: list[float]) -> dict:
    """Mean, sample standard deviation, min and max of a list of numbers."""
    return {"mean": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1 else 0.0,
            "min": min(values), "max": max(values), "n": len(values)}


# --- simulated plants: the jet-matching cases, the noise sweep's variants, the peers' plants, the baseline runs
#: UDE cases A, B, C and the double pendulum (Case A): the jet-matching configs.
CASE_CONFIGS = {"A": "configs/pendulum_case_a.yaml", "B": "configs/pendulum_case_b.yaml",
                "C": "configs/pendulum_case_c.yaml", "double_A": "configs/double_pendulum_case_a.yaml"}
_POINT = ["--model.stream.tap_average", "false"]  # the paper's point taps (box-averaged taps are the default)
#: The noise sweep's variants: (config, overrides).
NOISE_VARIANTS = {"v2": ("configs/pendulum_case_a.yaml", []),  # our defaults: box-averaged taps since issue 31
                  "v2_point": ("configs/pendulum_case_a.yaml", _POINT),  # our v2 before issue 31
                  "v2_paper": ("configs/pendulum_case_a.yaml", [*_POINT, "--model.weight_decay", "0"]),  # no decay
                  "v1": ("configs/pendulum_v1.yaml", _POINT)}
#: Plant -> (jet-matching config, RK4-baseline config) of the peers; the stream is the jet config's.
PLANTS = {"case_a": ("configs/pendulum_case_a.yaml", "configs/baseline_pendulum_case_a.yaml"),
          "friction": ("configs/friction_pendulum.yaml", "configs/baseline_friction_pendulum.yaml")}


def trainer_job(plant: str, method: str, noise: float, seed: int, folder: Path, duration: float | None = None,
                steps: int | None = None) -> dict:
    """The ``torch-ude fit`` of the peers' jet-matching (``"jet"``) or RK4-baseline (``"rk4"``) run of a plant:
    ``{"config", "root", "seed", "overrides"}``, the arguments of `fit_config` (config relative to `ROOT`), the
    run in ``folder/trainer/<plant>_<method>_<noise>_<seed>``; ``duration`` (s) and ``steps``
    (``trainer.max_steps``) override the config's where given."""
    overrides = ["--data.noise", str(noise)]
    if duration is not None:
        overrides += ["--data.duration", str(duration)]
    if steps is not None:
        overrides += ["--trainer.max_steps", str(steps)]
    root = Path(folder) / "trainer" / f"{plant}_{method}_{noise}_{seed}"
    return {"config": PLANTS[plant][method == "rk4"], "root": str(root), "seed": seed, "overrides": overrides}


BASELINE_CONFIGS = {"single": "configs/baseline_pendulum_case_a.yaml",
                    "double": "configs/baseline_double_pendulum_case_a.yaml"}
#: Overrides of a variant of the baseline config ("" is the config itself; "wd" jet matching's weight decay).
BASELINE_VARIANTS = {"": [], "wd": ["--model.weight_decay", "0.1", "--model.weight_decay_full_at", "0.01"]}
_BASELINE_KEYS = ("e_field", "e_field_visited", "c_hat", "c_hat_channels", "tape_bytes", "wall_s", "updates",
                  "skipped_steps")


def baseline_run(steps: int, noise: float, seed: int, rate: float = 50.0, plant: str = "single",
                 reuse: bool = True, variant: str = "") -> dict:
    """The metrics of one RK4-baseline run (K = ``steps``, ``noise``, ``seed``, ``rate`` in Hz, ``plant`` a key of
    `BASELINE_CONFIGS`, ``variant`` one of `BASELINE_VARIANTS`), kept in
    ``results/baseline_runs/<plant>_r<rate>_K<K>_<noise>_<seed>[_<variant>]/`` and read from there when ``reuse``,
    so that the comparison, the tuning and the K sweep share the runs they have in common."""
    suffix = f"_{variant}" if variant else ""
    root = RESULTS / "baseline_runs" / f"{plant}_r{rate:g}_K{steps}_{noise}_{seed}{suffix}"
    m = fit_config(BASELINE_CONFIGS[plant], root, seed, ["--data.noise", str(noise), "--data.steps", str(steps),
                                                         "--data.rate", str(rate), *BASELINE_VARIANTS[variant]],
                   reuse=reuse)
    print(f"baseline{suffix} {plant} rate={rate:g} K={steps} noise={noise:.3f} seed={seed}: "
          f"e_field_visited={m['e_field_visited']:.5f} e_field={m['e_field']:.5f} c_hat={m['c_hat']:.4f} "
          f"tape={m['tape_bytes'] / 1e6:.2f} MB wall={m['wall_s']:.0f}s", flush=True)
    return {k: m[k] for k in _BASELINE_KEYS} | {"plant": plant, "rate": rate, "K": steps, "noise": noise, "seed": seed}


# --- recorded logs: the DFKI pendulums and the EMPS axis
#: The prediction errors the recorded-log tables report.
KEYS = ("one_step_nrmse", "open_loop_1s_nrmse", "open_loop_5s_nrmse")


def _data_files(config: Path) -> list[str]:
    data = yaml.safe_load(config.read_text())["data"]["init_args"]
    return [*data["files"], *data["val_files"]]


def require_data(config: Path, benchmark: str) -> None:
    """Stop with a message naming ``config``'s missing data files (read from ../shared/data, never copied)."""
    missing = [f for f in _data_files(config) if not Path(f).is_file()]
    if missing:
        sys.exit(f"benchmarks.{benchmark}: the data files {missing} are missing; the logs live in "
                 f"{sorted({str(Path(f).parent) for f in missing})} (see ../shared/data/README.md).")


def add_run_arguments(ap: argparse.ArgumentParser, config: str) -> None:
    """The command-line options shared by the recorded-log benchmarks: config, seeds and the baseline's settings."""
    ap.add_argument("--config", type=Path, default=Path(config))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--baseline", type=Path, help="the RK4 baseline's config (default: baseline_<data set>.yaml "
                    "beside CONFIG, `baselines.matched.baseline_config`)")
    ap.add_argument("--iterations", type=int, help="baseline Adam iterations (default: the baseline config's)")
    ap.add_argument("--rate", type=float, help="baseline observation rate in Hz (default: the baseline config's)")
    ap.add_argument("--steps", type=int, help="baseline RK4 steps per window, K (default: the baseline config's)")
    ap.add_argument("--windows", type=int, help="baseline windows, B (default: the baseline config's)")


def rk4_baseline(config: Path, seed: int, folder: Path, args: argparse.Namespace,
                 form: HybridField) -> tuple[dict, HybridField]:
    """`baselines.matched.matched_baseline` with the baseline settings of `add_run_arguments`."""
    return matched_baseline(config, seed, folder, form, args.baseline, args.iterations, args.rate, args.steps,
                            args.windows)


def summarize_seeds(rows: list[dict], keys: tuple[str, ...] = KEYS) -> dict:
    """Per key present in every row (one row per seed): the mean over the rows and the values."""
    return {k: {"mean": float(np.mean([r[k] for r in rows])), "values": [r[k] for r in rows]}
            for k in keys if all(r.get(k) is not None for r in rows)}


def save_run(name: str, out: dict, field: HybridField, dm, summary: dict) -> Path:
    """`save` a recorded-log run's ``out`` with the jet field's form, the data module's log reports (as their
    attributes) and the ``summary`` table rows added last."""
    out["field"] = {"hidden": list(field.mlp.sizes[1:-1]), "linear": field.linear, "input_affine": field.input_affine,
                    "num_parameters": field.num_parameters()}
    out["data_reports"] = [log.report for log in dm.train_logs + dm.val_logs]
    out["summary"] = summary
    return save(name, json.loads(json.dumps(out, default=lambda v: v.__dict__ if hasattr(v, "__dict__") else str(v))))


def torque_figure(comparisons: dict[str, dict]) -> Figure:
    """Residual torques (one series per method, `torch_ude.metrics.residual_torques`) and the reference over
    each joint's velocity."""
    first = next(iter(comparisons.values()))["series"]
    joints = first["velocity"].shape[1]
    fig = Figure(figsize=(5.0 * joints, 4.0))
    for j in range(joints):
        ax = fig.add_subplot(1, joints, j + 1)
        v = first["velocity"][:, j].numpy()
        ax.plot(v, first["reference"][:, j].numpy(), ".", ms=1.5, color="0.6", label="reference (lab model)")
        if "friction" in first:
            ax.plot(v, first["friction"][:, j].numpy(), ".", ms=1.5, color="k", label="reference friction only")
        for name, comp in comparisons.items():
            ax.plot(v, comp["series"]["residual"][:, j].numpy(), ".", ms=1.5, label=name)
        ax.set_xlabel(f"joint {j + 1} velocity (rad/s)")
        ax.set_ylabel(f"joint {j + 1} torque (N m)")
        ax.legend(markerscale=6, fontsize=7)
    fig.tight_layout()
    return fig


# --- the C trainer: the paper's device config, memory cases and the host speed-up
#: The paper's on-device run (B = 2048, 8000 updates, float32 arithmetic; the reservoir stored in float16).
C_CONFIG = "configs/pendulum_case_a_c.yaml"
_F32 = ["--model.stream.reservoir_precision", "float32"]  # the paper's layout (the device config stores float16)
#: The memory table's cases: name -> (config, overrides).
C_CASES = {
    "single pendulum, B = 2048": (C_CONFIG, _F32),
    "single pendulum, B = 4096": (C_CONFIG, [*_F32, "--model.stream.capacity", "4096"]),
    "double pendulum, B = 2048": ("configs/double_pendulum_case_a.yaml",
                                  ["--model.stream.tap_average", "false", "--model.stream.capacity", "2048",
                                   "--model.stream.m_max", "50"]),
    # without the second-order term (lambda2 = 0, as the SNR gate sets at 1 % noise) jets need no xddot
    "single pendulum, B = 2048, lambda2 = 0": (C_CONFIG, [*_F32, "--model.stream.lambda2", "0"]),
    "single pendulum, B = 4096, lambda2 = 0": (C_CONFIG, [*_F32, "--model.stream.capacity", "4096",
                                                          "--model.stream.lambda2", "0"]),
    # the reservoir in binary16 (model.stream.reservoir_precision, issue 32 item 4; the device config's default)
    "single pendulum, B = 2048, float16": (C_CONFIG, []),
    "single pendulum, B = 4096, float16": (C_CONFIG, ["--model.stream.capacity", "4096"]),
}


def speedup_line(out: dict) -> str:
    """One line of `microcontroller.host_speed.host_speedup`'s result on `C_CONFIG`."""
    med, repeats = out["median_wall_s"], len(out["wall_s"]["c"])
    return (f"whole run, median of {repeats}: C trainer {med['c']:.2f} s, Python trainer {med['python']:.2f} s, "
            f"speed-up {out['speedup']:.1f}x; of the C run: plant {out['plant_s_median']:.2f} s, "
            f"8000 C updates (with their Python calls) {out['c_updates_s_median']:.2f} s")


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


def add_bayesrace_arguments(ap: argparse.ArgumentParser) -> None:
    """``--config``, ``--validation`` (the other track) and the MHE evaluation's ``--starts`` and ``--passes``, shared
    by the BayesRace benchmarks of Table 1."""
    ap.add_argument("--config", default=BAYESRACE_CONFIG, help="a PEM-MHE config on a BayesRace recording")
    ap.add_argument("--validation", default=BAYESRACE_VALIDATION, help="the BayesRace recording to validate on")
    ap.add_argument("--starts", type=int, default=3, help="cold starts per window of the MHE evaluation")
    ap.add_argument("--passes", type=int, default=3, help="passes of propagated starts per MHE evaluation "
                    "(mhe.estimator.solver.propagated_solve); 0: none")


def add_split_arguments(ap: argparse.ArgumentParser) -> None:
    """``--config`` (a PEM-MHE config on a part of an IAC log, optionally followed by variants layered on it) and
    ``--validation-part`` (a, b, ...), shared by the IAC benchmarks; `mhe.problems.iac.validation_source` reads
    the latter."""
    ap.add_argument("--config", nargs="+", default=[IAC_CONFIG], metavar="CONFIG",
                    help="a PEM-MHE config on a part of an IAC log, optionally followed by variants layered on it "
                         "(e.g. configs/mhe_iac_split_blocked/physics.yaml)")
    ap.add_argument("--validation-part", type=float, nargs="+", default=None, metavar="FRACTION",
                    help="the fractions (a, b) of the gated stretch to validate on, or several pairs (a1, b1, a2, b2, "
                         "...); default: the rest of the stretch, what the config's part leaves out")


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

"""Jet matching on the real EMPS positioning axis from position only, beside the RK4 baseline, f_known and IDIM-LS.

    python -m benchmarks.real.emps [--config configs/emps.yaml] [--seeds 0 1 2]
                              [--baseline CONFIG] [--iterations N] [--rate HZ] [--steps K] [--windows B]

The electro-mechanical positioning system of the nonlinear system-identification benchmark
(../shared/data/emps, Janot, Gautier, Brunot) logs the motor position ``qm`` and the
controller voltage ``vir`` (force ``gtau vir``) at 1 kHz, no velocity. The state
``(q, q')`` is ``qm`` and its centred SG derivative (`torch_ude.position_only`, the config's
``data.velocity_from_position``); known model ``M q'' = gtau vir``
(`torch_ude.systems.LinearAxisModel` without friction, the IDIM-LS mass). Trained on
DATA_EMPS, scored on the validation record DATA_EMPS_PULSES. Per seed, the same protocol as on the
DFKI pendulums (`benchmarks.real.dfki_pendulum`):

* jet matching: ``torch-ude fit --config CONFIG --seed_everything SEED`` (`torch_ude.cli.jet_matching_run`), its
  EMA field;
* the RK4 multiple-shooting baseline on the same derived states and voltages:
  ``torch-ude fit --config configs/baseline_emps.yaml --seed_everything SEED`` (observed at its
  ``data.rate``, ``data.steps`` RK4 steps per window, ``data.n_windows`` windows, full-batch Adam
  with the discrete adjoint), the run ``torch-ude score`` scores;
* once, f_known alone and the benchmark's inverse-model fit IDIM-LS (`torch_ude.systems.linear_axis.idim_ls`: recomputed
  here from DATA_EMPS as Script_IDIM_LS.m does) as a whole model
  ``M q'' = gtau vir - Fv q' - Fc tanh(q' / 1 mm/s) - offset``: a reference, not the truth.

Scores (on DATA_EMPS_PULSES, never trained on): one-step and 1 s / 5 s open-loop NRMSE from
the measured state (`torch_ude.prediction`), and the benchmark's own protocol,
`torch_ude.prediction.full_simulation`: one open-loop RK4 simulation of the whole record at 1 kHz from its first
state with the recorded voltage, position error RMS in m and R^2 (both:
`torch_ude.prediction.prediction_and_simulation`). The record's voltage
already holds its force pulses (``vir`` steps by 5.07 V, 178 N, at every onset of
``pulses_N``; `torch_ude.systems.linear_axis.pulse_steps`), so the input is ``vir`` alone. Each learned residual is
compared with IDIM-LS's friction and offset on the validation record's states, as forces
(N, `torch_ude.metrics.residual_forces`): ``M N(x, u)`` against ``-(Fv q' + Fc tanh(q' / v_c) + offset)``.

Writes results/emps/emps.json, residual_force.png (residual forces over the velocity, seed
0) and simulation.png (the full-record simulations, seed 0).
"""
from __future__ import annotations

import argparse

import numpy as np
import torch
import yaml
from matplotlib.figure import Figure

from benchmarks.common import (RESULTS, add_run_arguments, require_data, rk4_baseline, save_run, summarize_seeds,
                               torque_figure)
from torch_ude.cli import jet_matching_run
from torch_ude.field import HybridField
from torch_ude.metrics import residual_forces
from torch_ude.position_only import noise_gains
from torch_ude.prediction import prediction_and_simulation
from torch_ude.systems.linear_axis import EMPS_IDIM_LS, idim_ls, idim_ls_model, pulse_steps

KEYS = ("one_step_nrmse", "open_loop_1s_nrmse", "open_loop_5s_nrmse", "simulation_rms_q_mm", "simulation_r2_q")


def simulation_figure(fs: float, runs: dict[str, dict | None]) -> Figure:
    """Measured and simulated position over the validation record (segments joined, ``fs`` in Hz),
    and the errors; a diverged run (None) is left out, and so is f_known alone, which drifts
    metres away."""
    fig = Figure(figsize=(9.0, 6.0))
    top, bottom = fig.add_subplot(2, 1, 1), fig.add_subplot(2, 1, 2)
    finite = {name: series for name, series in runs.items() if series is not None}
    if not finite:
        top.set_title("every simulation diverged")
        return fig
    t = np.arange(next(iter(finite.values()))["measured"].shape[0]) / fs
    top.plot(t, next(iter(finite.values()))["measured"], color="k", lw=1.0, label="measured")
    for name, series in finite.items():
        top.plot(t, series["simulated"], lw=0.8, label=name)
        bottom.plot(t, 1e3 * (series["simulated"] - series["measured"]), lw=0.8, label=name)
    top.set_ylabel("position (m)")
    bottom.set_ylabel("simulation error (mm)")
    bottom.set_xlabel("time (s)")
    top.legend(fontsize=7)
    bottom.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _line(name: str, row: dict) -> str:
    return f"{name}: " + ", ".join(f"{k} {row.get(k):.4g}" for k in KEYS if row.get(k) is not None)


def main(argv: list[str] | None = None) -> None:
    """Run the comparison, save the JSON and the plots."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_arguments(ap, "configs/emps.yaml")
    args = ap.parse_args(argv)
    require_data(args.config, "emps")
    data = yaml.safe_load(args.config.read_text())["data"]["init_args"]
    torch.set_num_threads(1)
    name = args.config.stem
    fit = idim_ls(data["files"][0])
    print(f"IDIM-LS on {data['files'][0]}: " + ", ".join(f"{k} {fit[k]:.4f} +- {fit['std'][k]:.4f}"
                                                      for k in ("M", "Fv", "Fc", "offset"))
          + f" (relative error {fit['relative_error_percent']:.2f} %); the benchmark's script values "
          + ", ".join(f"{k} {v}" for k, v in EMPS_IDIM_LS.items()), flush=True)
    out = {"config": str(args.config), "settings": vars(args) | {"config": str(args.config)},
           "idim_ls": fit | {"benchmark_values": EMPS_IDIM_LS}, "pulse_steps": pulse_steps(data["val_files"][0]),
           "jet_matching": [], "rk4_baseline": []}
    dm, comparisons, simulations = None, {}, {}
    for seed in args.seeds:
        metrics, dm, jet_field = jet_matching_run(args.config, seed, RESULTS / name / f"jet_{seed}")
        base, base_field = rk4_baseline(args.config, seed, RESULTS / name / f"baseline_{seed}", args, jet_field)
        known = dm.system.known
        reference = idim_ls_model(fit, known.gain, known.coulomb_velocity)
        for method, field, row, key in (("jet matching", jet_field, metrics, "jet_matching"),
                                        ("RK4 baseline", base_field, base, "rk4_baseline")):
            score = prediction_and_simulation(field, dm.val_logs, dm.horizons)
            forces = residual_forces(field, reference, known, dm.val_logs)
            keep = {k: v for k, v in row.items() if k != "config"}
            out[key].append(keep | {k: v for k, v in score.items() if k != "series"} | {"seed": seed} |
                            {"residual_force": {k: v for k, v in forces.items() if k != "series"}})
            print(f"seed {seed}: " + _line(method, out[key][-1]) + f"; residual force RMS "
                  f"{forces['rms_residual'][0]:.3f} N against IDIM-LS {forces['rms_reference'][0]:.3f} N, "
                  f"difference {forces['rms_difference'][0]:.3f} N", flush=True)
            if seed == args.seeds[0]:
                comparisons[method], simulations[method] = forces, score["series"]
    alone = prediction_and_simulation(HybridField.configured_physics(known), dm.val_logs, dm.horizons)
    out["f_known_alone"] = {k: v for k, v in alone.items() if k != "series"}
    print(_line("f_known alone", alone), flush=True)
    idim_model = HybridField.configured_physics(idim_ls_model(fit, known.gain, known.coulomb_velocity))
    idim = prediction_and_simulation(idim_model, dm.val_logs, dm.horizons)
    out["idim_ls_model"] = {k: v for k, v in idim.items() if k != "series"}
    simulations["IDIM-LS model"] = idim["series"]
    print(_line("IDIM-LS model", idim), flush=True)
    log = dm.val_logs[0]
    sigma_q = float(out["jet_matching"][0]["calibration"]["sigma"][0])
    gains = noise_gains(dm.velocity_from_position)
    out["position_only"] = {"settings": dm.velocity_from_position, "sigma_q_hat_m": sigma_q,
                            "velocity_gain": gains["velocity"],
                            "sigma_v_derived_m_per_s": sigma_q * log.fs * gains["velocity"],
                            "velocity_rms_m_per_s": float(np.sqrt(np.mean(log.segments[0][:, 1] ** 2)))}
    print(f"position only: sigma_q {sigma_q:.3g} m -> sigma_v {out['position_only']['sigma_v_derived_m_per_s']:.3g} "
          f"m/s against a velocity RMS of {out['position_only']['velocity_rms_m_per_s']:.3g} m/s", flush=True)
    summary = {"jet_matching": summarize_seeds(out["jet_matching"], KEYS),
               "rk4_baseline": summarize_seeds(out["rk4_baseline"], KEYS),
               "f_known_alone": {k: out["f_known_alone"].get(k) for k in KEYS},
               "idim_ls_model": {k: out["idim_ls_model"].get(k) for k in KEYS}}
    folder = save_run(name, out, jet_field, dm, summary)
    fig = torque_figure(comparisons)
    fig.axes[0].set_xlabel("velocity (m/s)")
    fig.axes[0].set_ylabel("friction and offset force (N)")
    fig.axes[0].get_legend().texts[0].set_text("IDIM-LS friction and offset")
    fig.savefig(folder / "residual_force.png", dpi=120)
    simulation_figure(log.fs, simulations).savefig(folder / "simulation.png", dpi=120)
    print(f"saved {folder}")


if __name__ == "__main__":
    main()

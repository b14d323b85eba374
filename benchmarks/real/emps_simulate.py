"""The EMPS benchmark's own score of any trained run: full-record simulation RMS (mm) and R^2 of the position.

    python -m benchmarks.real.emps_simulate RUN [RUN ...] [--file ../shared/data/emps/DATA_EMPS_PULSES.mat]

Each ``RUN`` is a run folder of ``torch-ude fit`` (jet matching, the RK4 baseline or PEM-MHE, e.g.
``configs/mhe_emps.yaml``) or its ``field.pt``; `torch_ude.load_field` reads it. The record is read at 1 kHz with
the velocity derived from the position as ``configs/emps.yaml`` derives it (``half_width`` 5, order 2), and the
whole record is simulated open loop from its first state with the recorded voltage
(`torch_ude.prediction.full_simulation`, the protocol of RESULTS.md's EMPS rows). Prints one line per run;
``--idim-ls`` adds the benchmark's IDIM-LS model (its script values) as an anchor (RESULTS.md: 7.99 mm / 0.991
with the values recomputed from DATA_EMPS).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import torch

from torch_ude import HybridField, load_field
from torch_ude.position_only import VelocityFromPosition, with_velocities
from torch_ude.prediction import full_simulation
from torch_ude.recorded import read_log
from torch_ude.systems.linear_axis import EMPS_IDIM_LS, idim_ls_model

__all__ = ["main"]

DEFAULT_FILE = Path("../shared/data/emps/DATA_EMPS_PULSES.mat")


def main(argv: list[str] | None = None) -> dict[str, dict]:
    """Print and return ``{run: {"rms_q_mm", "r2_q", "fit_percent_q", "rms_v"}}``."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="*", help="run folders or field.pt files")
    ap.add_argument("--file", type=Path, default=DEFAULT_FILE, help="the record (default: %(default)s)")
    ap.add_argument("--idim-ls", action="store_true", help="also the benchmark's IDIM-LS model (script values)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    log = with_velocities(read_log(args.file, "t", ["qm"], ["vir"], 1000.0), VelocityFromPosition(5, 2))
    fields = {str(r): load_field(r) for r in args.runs}
    if args.idim_ls:
        fields["IDIM-LS (script values)"] = HybridField.configured_physics(idim_ls_model(EMPS_IDIM_LS, 35.15065188))
    out = {}
    for name, field in fields.items():
        sim = full_simulation(field, log)
        out[name] = {k: v for k, v in sim.items() if k != "series"}
        print(f"{name}: full-record simulation RMS {sim['rms_q_mm']:.3f} mm, R^2 {sim['r2_q']:.4f}, "
              f"fit {sim['fit_percent_q']:.2f} %", flush=True)
    return out


if __name__ == "__main__":
    main()

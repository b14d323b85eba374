"""Error of the on-device noise estimate (Eq. 23, with our outlier screen) against the true sensor noise.

For each noise level and seed the single pendulum (Case A plant) streams at 1 kHz
(`torch_ude.systems.simulate`, the jet-matching configs' stream) and `torch_ude.calibration.calibrate`
estimates ``sigma_hat`` per channel (`torch_ude.metrics.noise_estimate_errors`) from the first
``calibration_s`` seconds (3 s, what the trainer uses) and from the whole record (60 s, the same
estimator on more windows). Reported per level: the mean signed relative error
``sigma_hat / sigma - 1`` over seeds and channels (the bias; the paper's "0.04 % empirical error"
of Section 1 is of this kind), its standard deviation and the mean absolute relative error.

    python -m benchmarks.jet.noise_estimate [--noise 0.001 0.005 0.01 0.02 0.05] [--seeds 0 ... 9]
        [--calibration-s 3] [--duration 60]

Writes ``results/jet_noise_estimate/jet_noise_estimate.json``.
"""
from __future__ import annotations

import argparse
import statistics

import torch

from benchmarks.common import save
from torch_ude.metrics import noise_estimate_errors
from torch_ude.systems import SinglePendulum

__all__ = ["main"]


def _stats(errors: list[float]) -> dict:
    return {"bias": statistics.fmean(errors), "std": statistics.stdev(errors),
            "mean_abs": statistics.fmean(abs(e) for e in errors), "n": len(errors)}


def main(argv: list[str] | None = None) -> None:
    """Estimate, summarize, save JSON and print the table."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--noise", type=float, nargs="+", default=[0.001, 0.005, 0.01, 0.02, 0.05])
    ap.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    ap.add_argument("--calibration-s", type=float, default=3.0, help="the trainer's calibration phase in s")
    ap.add_argument("--duration", type=float, default=60.0, help="the whole record in s")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    out: dict = {"settings": vars(args), "levels": {}}
    print("| noise | record | bias | std | mean abs |")
    for noise in args.noise:
        row = {}
        for label, seconds in (("calibration", args.calibration_s), ("whole", args.duration)):
            errors = [e for seed in args.seeds
                      for e in noise_estimate_errors(SinglePendulum(), noise, seed, seconds, args.duration)]
            row[label] = _stats(errors)
            s = row[label]
            print(f"| {noise:.3f} | {label} ({seconds:g} s) | {100 * s['bias']:+.3f} % | {100 * s['std']:.3f} % | "
                  f"{100 * s['mean_abs']:.3f} % |", flush=True)
        out["levels"][str(noise)] = row
    print(f"saved {save('jet_noise_estimate', out)}")


if __name__ == "__main__":
    main()

"""Shared runner of the baseline benchmarks: one `torch-ude fit` of the baseline config per setting.

Runs live in ``results/baseline_runs/<plant>_r<rate>_K<K>_<noise>_<seed>/`` so that the
comparison and the K sweep share the runs they have in common.
"""
from __future__ import annotations

from benchmarks.jet_runs import RESULTS, fit

__all__ = ["CONFIGS", "VARIANTS", "baseline_run"]

CONFIGS = {"single": "configs/baseline_pendulum_case_a.yaml", "double": "configs/baseline_double_pendulum_case_a.yaml"}
#: Overrides of a variant of the baseline config ("" is the config itself).
VARIANTS = {"": [], "wd": ["--model.weight_decay", "0.1", "--model.weight_decay_full_at", "0.01"]}
KEYS = ("e_field", "e_field_visited", "c_hat", "c_hat_channels", "tape_bytes", "wall_s", "updates", "skipped_steps")


def baseline_run(steps: int, noise: float, seed: int, rate: float = 50.0, plant: str = "single",
                 reuse: bool = True, variant: str = "") -> dict:
    """The metrics of one baseline run, read from disk when ``reuse`` and it exists.

    Args:
        steps: K.
        noise: relative sensor noise.
        seed: ``seed_everything`` (stream and initial weights).
        rate: observation rate in Hz.
        plant: ``"single"`` or ``"double"`` (its config in `CONFIGS`).
        reuse: keep a finished run instead of training again.
        variant: a key of `VARIANTS`; "wd" adds jet matching's noise-adaptive weight
            decay (W = 0.1, full from 1 % noise).
    """
    suffix = f"_{variant}" if variant else ""
    root = RESULTS / "baseline_runs" / f"{plant}_r{rate:g}_K{steps}_{noise}_{seed}{suffix}"
    m = fit(CONFIGS[plant], root, seed, ["--data.noise", str(noise), "--data.steps", str(steps),
                                         "--data.rate", str(rate), *VARIANTS[variant]], reuse=reuse)
    print(f"baseline{suffix} {plant} rate={rate:g} K={steps} noise={noise:.3f} seed={seed}: "
          f"e_field_visited={m['e_field_visited']:.5f} e_field={m['e_field']:.5f} c_hat={m['c_hat']:.4f} "
          f"tape={m['tape_bytes'] / 1e6:.2f} MB wall={m['wall_s']:.0f}s", flush=True)
    return {k: m[k] for k in KEYS} | {"plant": plant, "rate": rate, "K": steps, "noise": noise, "seed": seed}

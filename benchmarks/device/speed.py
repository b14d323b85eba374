"""Wall time of the whole run, C trainer against Python trainer, side by side in one process.

``python -m benchmarks.device.speed`` runs single pendulum Case A, 1 % noise, 60 s stream, 8000
updates, B = 2048 (``configs/pendulum_case_a_c.yaml``) with the C trainer and with the Python
trainer on the same settings (its default granularity: one chunk per step, 25 replay updates per step), alternating,
``--repeats`` times each (default 3; `microcontroller.host_speed.host_speedup`). Both include the simulated plant.
Reports the run's own ``wall_s`` (fit start to end: stream, calibration, updates, periodic evaluation and checkpoints)
and the split of the C run into the plant, the C library and the rest; saves
``results/c_speed/c_speed.json``. Run it on a quiet machine: the ratio, not the seconds, is the
result.
"""
from __future__ import annotations

import argparse

import torch

from microcontroller.host_speed import host_speedup

from benchmarks.common import C_CONFIG, RESULTS, save, speedup_line


def main(argv: list[str] | None = None) -> None:
    """Command line: see the module doc."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.device.speed", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    out = host_speedup(C_CONFIG, args.repeats, RESULTS / "c_speed")
    print(speedup_line(out))
    print(f"saved in {save('c_speed', out)}")


if __name__ == "__main__":
    main()

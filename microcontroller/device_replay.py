"""A stream file replayed on an emulated core, scored and checked against a reference.

`replay_simulated`: a simulated plant's stream (`microcontroller.golden.golden_stream`); the weights the
firmware writes back are scored against the plant (e_field, c_hat) and compared with the host build of
the same sources on the same file (`microcontroller.ctrainer.CTrainer.replay`).

`replay_log` (issue 32, item 3): a stream of recorded logs (`microcontroller.golden.data_stream` of the
data module); the weights are exported as a run folder ``torch-ude score`` reads and scored on the data
module's validation logs with its prediction errors (`torch_ude.prediction`) beside the float32 Python
trainer on the same file with the same seed and PCG32 draws (`microcontroller.golden.reference_run`) and
beside the known model alone.

Both take a stream file written by `microcontroller.files.write_stream` and a firmware of
`microcontroller.target.build_firmware`, and raise RuntimeError if the firmware's replay fails.
"""
from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np
import torch

from .ctrainer import CTrainer
from .files import read_result, read_stream
from .generate import DeviceSpec
from .golden import physical_fit, reference_run
from .headers import refit_evaluations
from .target import CORTEX_M4, Target, export_result, run_firmware

__all__ = ["replay_simulated", "replay_log"]

_KEYS = ("one_step_nrmse", "open_loop_1s_nrmse", "open_loop_5s_nrmse")


def replay_simulated(spec: DeviceSpec, stream: str | Path, elf: str | Path, folder: str | Path, name: str,
                     target: Target = CORTEX_M4, states: dict | None = None, extra: dict | None = None,
                     timeout_s: int = 600) -> dict:
    """Train on a simulated plant's stream file on an emulated core, score it and compare it with the host build.

    The firmware replays ``stream`` and writes ``folder/result-NAME.bin``; its weights are exported to
    ``folder/replay-NAME`` and scored against ``spec.system``; the host build of the same sources trains on
    the same file (`microcontroller.ctrainer.CTrainer.replay`).

    Args:
        spec: the settings the firmware was generated from.
        stream: the stream file, in ``folder`` or given by its path.
        elf: the firmware of ``spec`` for ``target``.
        folder: the firmware's working folder.
        name: names the result file and the run folder.
        target: the core ``elf`` was built for.
        states: ``{"grid", "visited"}`` states of the field error (default: the plant's grid and its visited part;
            `torch_ude.training.StreamDataModule.evaluation_states`).
        extra: further entries for the run's ``metrics.json``.
        timeout_s: wall-clock seconds before the emulation is cut.

    Returns:
        ``e_field``, ``e_field_visited``, ``c_hat``, ``m``, ``updates`` and ``counters`` of the device's
        run, ``qemu_wall_s`` (s, the replay, its export and the host's run) and
        ``max_weight_difference_to_host`` (the flat EMA weights).

    Raises:
        RuntimeError: if the firmware's replay fails.
    """
    folder = Path(folder)
    t0 = time.perf_counter()
    run_firmware(Path(elf), ["replay", str(stream), f"result-{name}.bin"], cwd=folder, timeout_s=timeout_s,
                 target=target, check=True)
    metrics, _ = export_result(spec, folder / f"result-{name}.bin", folder / f"replay-{name}", states=states,
                               extra=extra, target=target)
    ema, _, _ = read_result(folder / f"result-{name}.bin")
    host = CTrainer(spec).replay(*read_stream(folder / stream))
    report = metrics["report"]
    return {"e_field": metrics["e_field"], "e_field_visited": metrics["e_field_visited"], "c_hat": metrics["c_hat"],
            "m": report["calibration"]["m"], "updates": report["updates"], "counters": report["counters"],
            "qemu_wall_s": round(time.perf_counter() - t0, 1),
            "max_weight_difference_to_host": float(np.abs(host.weights(True) - ema).max())}


def replay_log(spec: DeviceSpec, dm, stream: str | Path, elf: str | Path, folder: str | Path,
               target: Target = CORTEX_M4, timeout_s: int = 600) -> dict:
    """Train on a stream file of recorded logs on an emulated core and score it beside the float32 Python trainer.

    The firmware replays ``stream`` under ``-icount`` and writes ``folder/result.bin``; its weights are
    exported to ``folder/device``. The Python reference ends as a Python run of these settings ends: with
    the end-of-run refit of trained physical parameters where the settings refit them (float64,
    `microcontroller.golden.physical_fit`).

    Args:
        spec: the device settings (`microcontroller.generate.spec_from_config` of a recorded config).
        dm: their `torch_ude.training.RecordedDataModule` (`microcontroller.golden.data_module`): it scores
            every field on its validation logs.
        stream: the stream file, in ``folder`` or given by its path.
        elf: the firmware of ``spec`` for ``target`` (`microcontroller.target.build_firmware`).
        folder: the firmware's working folder.
        target: the core ``elf`` was built for.
        timeout_s: wall-clock seconds before the emulation is cut.

    Returns:
        ``device``, ``python`` and ``known_model``: their one-step, 1 s and 5 s open-loop NRMSE on the validation
        logs (``one_step_nrmse``, ``open_loop_1s_nrmse``, ``open_loop_5s_nrmse``);
        ``device_over_python_1s``, the device's 1 s open-loop NRMSE over the Python trainer's;
        ``max_weight_difference_to_python`` (the flat EMA weights, theta refitted where refitted);
        ``python_updates``, ``updates``, ``m`` and ``counters`` (the device's report); ``qemu_wall_s`` (s);
        ``run_folder``; and ``refit``, the firmware's lines of its end-of-run refit.

    Raises:
        RuntimeError: if the firmware's replay fails.
    """
    folder = Path(folder)
    t0 = time.perf_counter()
    run = run_firmware(Path(elf), ["replay", str(stream), "result.bin"], cwd=folder, timeout_s=timeout_s, icount=True,
                       target=target, check=True)
    wall = time.perf_counter() - t0
    device, field = export_result(spec, folder / "result.bin", folder / "device", target=target, data=dm)
    y, ticks, segment = read_stream(folder / stream)
    ref = reference_run(spec, y, ticks, segment)
    fit = physical_fit(ref, spec.lambda1) if refit_evaluations(spec) else None  # Python's end-of-run refit, float64
    weights = ref.ema_weights if fit is None else np.concatenate([ref.ema_weights[:-len(fit["theta"])], fit["theta"]])
    with torch.no_grad():
        python = dm.evaluate(ref.field.double() if fit is None else fit["field"])
        known = dm.evaluate(field.without_residual())
    ema, _, _ = read_result(folder / "result.bin")
    return {"device": {k: device[k] for k in _KEYS}, "python": {k: python[k] for k in _KEYS},
            "known_model": {k: known[k] for k in _KEYS},
            "device_over_python_1s": device["open_loop_1s_nrmse"] / python["open_loop_1s_nrmse"],
            "max_weight_difference_to_python": float(np.abs(ema - weights).max()),
            "python_updates": ref.updates, "updates": device["updates"], "m": device["m"],
            "counters": device["counters"], "qemu_wall_s": round(wall, 1), "run_folder": str(folder / "device"),
            "refit": re.findall(r"^refit: .*$", run.output, re.M)}

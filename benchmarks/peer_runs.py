"""One run of one method on one stream, in a child process, with its wall time and peak memory.

Every method of `benchmarks.peers` sees the jet-matching run's stream: the plant, case
and duration of its config and the noise and seed of the run (`peer_stream`). Each run
is executed in a child process (`run_measured`; forked where the platform can, so it
starts at once with the modules and the recorded stream loaded, else spawned) so that
its peak memory is its own: the resident set size (RSS) is sampled every 5 ms from just
before the fit to its end, and ``peak_rss_mb`` is the largest increase over the RSS at
the start (imports and the recorded stream are already loaded then; a forked child may
also reuse heap the parent freed, so the figure is a lower bound of what the fit
allocates). ``wall_s`` is the fit alone: for PySINDy the differentiation and regression,
for torchdiffeq the optimization, for PEM–MHE the outer loop (its L4CasADi build
included), for jet matching and the RK4 baseline the time measured inside ``torch-ude fit``
(jet matching's includes simulating and streaming the plant).
"""
from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import torch
import yaml

from benchmarks.jet_runs import fit
from benchmarks.peer_pem import PEMSettings, pem_fit
from benchmarks.peer_sindy import SindySettings, sindy_fit
from benchmarks.peer_torchdiffeq import torchdiffeq_fit
from torch_ude.metrics import evaluate_field
from torch_ude.systems.base import System
from torch_ude.systems.simulate import SimulatedStream, simulate
from torch_ude.training.data import StreamDataModule

__all__ = ["ROOT", "PLANTS", "peer_stream", "trainer_job", "run_measured"]

ROOT = Path(__file__).resolve().parents[1]
#: Plant -> (jet-matching config, RK4-baseline config); the stream is the jet config's.
PLANTS = {"case_a": ("configs/pendulum_case_a.yaml", "configs/baseline_pendulum_case_a.yaml"),
          "friction": ("configs/friction_pendulum.yaml", "configs/baseline_friction_pendulum.yaml")}


def peer_stream(plant: str, noise: float, seed: int, duration: float | None = None
                ) -> tuple[StreamDataModule, SimulatedStream]:
    """The jet-matching run's data module and its whole stream as one recording.

    Args:
        plant: a key of `PLANTS`.
        noise: relative sensor noise.
        seed: the run seed (stream and initial weights).
        duration: stream length in s; None keeps the config's.

    Returns:
        ``(dm, rec)``: the `StreamDataModule` a ``torch-ude fit`` of the config would build
        (its ``evaluation_states()`` are the metric's states) and the recording of its
        stream, ``simulate`` with the data module's settings (the chunks it streams, in one
        piece).
    """
    data = yaml.safe_load((ROOT / PLANTS[plant][0]).read_text())["data"]["init_args"]
    settings = {k: v for k, v in data.items() if k not in ("system", "noise", "seed", "duration")}
    dm = StreamDataModule(System.from_spec(data["system"]), noise=noise, seed=seed,
                          duration=data["duration"] if duration is None else duration, **settings)
    rec = simulate(dm.system, dm.duration, fs=dm.fs, noise=dm.noise, seed=dm.seed, substeps=dm.substeps)
    return dm, rec


def trainer_job(plant: str, method: str, noise: float, seed: int, folder: Path, duration: float | None = None,
                steps: int | None = None) -> dict:
    """The ``torch-ude fit`` of a jet-matching (``"jet"``) or RK4-baseline (``"rk4"``) run of a plant.

    Args:
        plant: a key of `PLANTS`.
        method: ``"jet"`` or ``"rk4"``.
        noise, seed: the run's noise and seed.
        folder: the benchmark's results folder; the run lives in
            ``folder/trainer/<plant>_<method>_<noise>_<seed>``.
        duration: stream length in s, or None for the config's.
        steps: ``trainer.max_steps`` (updates or iterations), or None for the config's.

    Returns:
        ``{"config", "root", "seed", "overrides"}``, the arguments of `benchmarks.jet_runs.fit`
        (config relative to the repository root).
    """
    overrides = ["--data.noise", str(noise)]
    if duration is not None:
        overrides += ["--data.duration", str(duration)]
    if steps is not None:
        overrides += ["--trainer.max_steps", str(steps)]
    root = Path(folder) / "trainer" / f"{plant}_{method}_{noise}_{seed}"
    return {"config": PLANTS[plant][method == "rk4"], "root": str(root), "seed": seed, "overrides": overrides}


def _trainer_run(config: str, root: str, seed: int, overrides: list[str]) -> dict:
    """A ``torch-ude fit`` (jet matching or the RK4 baseline) and its own metrics."""
    m = fit(str(ROOT / config), Path(root), seed, overrides)
    return {k: m[k] for k in ("e_field", "e_field_visited", "c_hat", "wall_s", "updates")}


def _peer_fit(kind: str, dm: StreamDataModule, rec: SimulatedStream, options: dict) -> tuple[Callable, dict]:
    """A PySINDy, torchdiffeq or PEM–MHE fit on a stream: the fitted field and the fit's information."""
    if kind == "sindy":
        field, info = sindy_fit(dm.system, dm.case, rec, SindySettings(**options))
        return field, info | {"equations": field.equations()}
    if kind == "pem":
        return pem_fit(dm, PEMSettings(**options))
    field, info = torchdiffeq_fit(dm.system, dm.case, rec, dm.seed, **options)
    return field.evaluate, info


def _child(kind: str, kwargs: dict, conn) -> None:
    """Run one fit in this (child) process and send back its metrics."""
    torch.set_num_threads(1)
    try:
        proc, peak, done = psutil.Process(), [0], threading.Event()
        start_rss = proc.memory_info().rss

        def sample() -> None:
            while not done.wait(0.005):
                peak[0] = max(peak[0], proc.memory_info().rss)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            if kind == "trainer":
                info = _trainer_run(**kwargs)
            else:
                dm, rec = kwargs["stream"]
                field, info = _peer_fit(kind, dm, rec, kwargs["options"])
        finally:
            done.set()
            sampler.join()
        if kind != "trainer":
            metrics = evaluate_field(field, dm.system, dm.case, dm.evaluation_states())
            info.update({k: metrics[k] for k in ("e_field", "e_field_visited", "c_hat")})
        info["peak_rss_mb"] = max(peak[0] - start_rss, 0) / 2**20
        conn.send(("ok", info))
    except Exception as exc:  # reported to the parent, which raises it with the run named
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def run_measured(kind: str, **kwargs) -> dict:
    """Run one fit in a child process and return its metrics, ``wall_s`` and ``peak_rss_mb``.

    Args:
        kind: ``"trainer"`` (kwargs of a ``torch-ude fit``: config, root, seed, overrides),
            ``"sindy"``, ``"torchdiffeq"`` or ``"pem"`` (kwargs: ``stream``, the ``(dm, rec)`` of
            `peer_stream`, and ``options``, the `SindySettings` fields, the keyword arguments
            of `torchdiffeq_fit` or the `benchmarks.peer_pem.PEMSettings` fields; the seed is
            the data module's).

    Raises:
        RuntimeError: if the run failed; the message names the run and the child's error.
    """
    ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    parent, child = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_child, args=(kind, kwargs, child))
    start = time.perf_counter()
    process.start()
    child.close()
    try:
        status, payload = parent.recv()
    except EOFError:
        status, payload = "error", "the process ended without a result"
    process.join()
    if status != "ok":
        named = {k: v for k, v in kwargs.items() if k != "stream"}
        if "stream" in kwargs:
            dm = kwargs["stream"][0]
            named |= {"plant": type(dm.system).__name__, "noise": dm.noise, "seed": dm.seed, "duration": dm.duration}
        raise RuntimeError(f"the {kind} run {named} failed: {payload}")
    payload["process_s"] = time.perf_counter() - start
    return payload

"""One run of one method on one stream, in a child process, with its wall time and peak memory.

Every peer of jet matching sees the jet-matching run's stream: the plant, case and duration of
its config and the noise and seed of the run (`config_stream`). Each run is executed in a child
process (`run_measured`; forked where the platform can, so it starts at once with the modules
and the recorded stream loaded, else spawned) so that its peak memory is its own: the resident
set size (RSS) is sampled every 5 ms from just before the fit to its end, and ``peak_rss_mb`` is
the largest increase over the RSS at the start (imports and the recorded stream are already
loaded then; a forked child may also reuse heap the parent freed, so the figure is a lower bound
of what the fit allocates). ``wall_s`` is the fit alone: for PySINDy the differentiation and
regression, for torchdiffeq the optimization, for PEM–MHE the outer loop (its L4CasADi build
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

from torch_ude.cli import fit_config
from torch_ude.metrics import evaluate_field
from torch_ude.systems.base import System
from torch_ude.systems.simulate import SimulatedStream, simulate
from torch_ude.training.data import StreamDataModule

from .neural_ode import torchdiffeq_fit
from .sindy import SindySettings, sindy_fit

__all__ = ["config_stream", "run_measured"]


def config_stream(config: str | Path, noise: float, seed: int, duration: float | None = None
                  ) -> tuple[StreamDataModule, SimulatedStream]:
    """The data module of a jet-matching config's run and its whole stream as one recording.

    Args:
        config: a jet-matching YAML config with a simulated plant (``data.init_args.system``).
        noise: relative sensor noise.
        seed: the run seed (stream and initial weights).
        duration: stream length in s; None keeps the config's.

    Returns:
        ``(dm, rec)``: the `StreamDataModule` a ``torch-ude fit`` of the config would build
        (its ``evaluation_states()`` are the metric's states) and the recording of its
        stream, ``simulate`` with the data module's settings (the chunks it streams, in one
        piece: states (T, n) at ``dm.fs``).
    """
    data = yaml.safe_load(Path(config).read_text())["data"]["init_args"]
    settings = {k: v for k, v in data.items() if k not in ("system", "noise", "seed", "duration")}
    dm = StreamDataModule(System.from_spec(data["system"]), noise=noise, seed=seed,
                          duration=data["duration"] if duration is None else duration, **settings)
    rec = simulate(dm.system, dm.duration, fs=dm.fs, noise=dm.noise, seed=dm.seed, substeps=dm.substeps)
    return dm, rec


def _trainer_run(config: str, root: str, seed: int, overrides: list[str]) -> dict:
    """A ``torch-ude fit`` (jet matching or the RK4 baseline) and its own metrics."""
    m = fit_config(config, Path(root), seed, overrides)
    return {k: m[k] for k in ("e_field", "e_field_visited", "c_hat", "wall_s", "updates")}


def _peer_fit(kind: str, dm: StreamDataModule, rec: SimulatedStream, options: dict) -> tuple[Callable, dict]:
    """A PySINDy, torchdiffeq or PEM–MHE fit on a stream: the fitted field and the fit's information."""
    if kind == "sindy":
        field, info = sindy_fit(dm.system, dm.case, rec, SindySettings(**options))
        return field, info | {"equations": field.equations()}
    if kind == "pem":
        from .pem import PEMSettings, pem_fit  # the mhe extra (CasADi, L4CasADi)

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
        kind: ``"trainer"`` (kwargs of `torch_ude.cli.fit_config`: config, root, seed, overrides),
            ``"sindy"``, ``"torchdiffeq"`` or ``"pem"`` (kwargs: ``stream``, the ``(dm, rec)`` of
            `config_stream`, and ``options``, the `SindySettings` fields, the keyword arguments
            of `torchdiffeq_fit` or the `baselines.peers.pem.PEMSettings` fields; the seed is
            the data module's).
        **kwargs: as ``kind`` says.

    Returns:
        The fit's information (``wall_s`` and what the fit reports), the field's ``e_field``,
        ``e_field_visited`` and ``c_hat`` (`torch_ude.metrics.evaluate_field`), ``peak_rss_mb``
        (MiB) and ``process_s`` (the child process's whole time, s).

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

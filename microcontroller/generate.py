"""Generate the C trainer's headers from a torch-ude config or run.

``python -m microcontroller.generate --config configs/pendulum_case_a_c.yaml --out build/gen``
writes ``tu_config.h`` (sizes and hyperparameters as macros), ``tu_model_data.h`` (the
constant tables: Savitzky-Golay rows and projection, initial weights and scales) and
``tu_plant_code.h`` (the plant's known field f_known and its Jacobians as float C, traced from
its Python definition: `microcontroller.plant_code`; any `System`, a user's own included,
named by the config's ``class_path``) for a fresh network seeded like every trainer of the project
(`torch_ude.HybridField.from_seed`); ``--run DIR`` starts instead from the trained field of a
run folder (``field.pt`` + ``field.json`` of a jet-matching run, `microcontroller.run_folder`)
to fine-tune it on the device, with the settings recorded in that run unless ``--config`` is
also given. The headers are stamped with the generator, the torch-ude and torch versions and
a hash of the settings (as CMSIS-NN's generated test headers are). ``--also CONFIG`` (repeatable)
puts further configurations into the same image: each is a ``const tu_config`` (sizes, settings,
plant code, tables) that a ``tu_trainer`` is initialised with, and the instance buffers take the
maxima over them (`microcontroller.memory.build_maxima`), so one firmware trains, say, one trainer
per axis. ``--with-sources`` also copies
the library's sources and headers and the on-device application (`library_files`) into the folder,
which then builds on its own: an Arduino library's ``src/``, an ESP-IDF component
(``microcontroller/esp32/README.md``). Settings the C port cannot
run, and a trainer larger than the target's RAM (``--ram-budget BYTES``, default the
Cortex-M4F firmware's, `microcontroller.memory`), are errors here, in one line, before any
compiler sees them.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field as dataclass_field
from pathlib import Path

import torch

from torch_ude.envelope import DEFAULT_MARGIN
from torch_ude.export import FIELD_FILE, SIDECAR_FILE
from torch_ude.field import HybridField
from torch_ude.position_only import VelocityFromPosition
from torch_ude.stream import StreamSettings
from torch_ude.systems import System

from .build import ROOT, library_sources
from .headers import GENERATOR, headers_for, input_map, write_headers
from .memory import default_ram_budget
from .plant_code import PlantCode, plant_code
from .run_folder import read_run

__all__ = ["DeviceSpec", "envelope_wanted", "input_map", "spec_from_config", "spec_from_run", "spec_from_settings",
           "stream_data", "write_headers", "headers_for",
           "library_files", "copy_library", "main", "GENERATOR"]

_MAX_CAL_LEN = 1 << 14  # the calibration record keys its segments modulo 2^14


@dataclass
class DeviceSpec:
    """Everything the C build of one trainer needs (the generator's resolved settings).

    Attributes:
        system: the plant (any `System` whose known field traces into CasADi, `microcontroller.symbolic`).
        case: the known-model case.
        field: the initial hybrid field (float64; its weights and scales are rounded to float32).
        pretrained: True when ``field`` is a trained one to fine-tune (its scales are kept).
        stream: the streaming settings (Algorithm 1, lines 3-12).
        batch_size: minibatch size.
        lr, lr_min: the cosine schedule's first and last learning rate.
        cosine: cosine schedule (False: constant ``lr``).
        ema_decay: EMA decay, or None for no weight averaging.
        weight_decay, weight_decay_full_at: the noise-adaptive AdamW decay.
        grad_clip: gradient-norm clip.
        lambda1: first-order loss weight.
        fs: sample rate in Hz.
        train_rate: updates per second of live stream.
        noise: the stream's relative sensor noise (the firmware's simulated plant uses it).
        duration: the stream's length in s (likewise).
        max_steps: length of the cosine schedule in updates.
        seed: the run seed (the default seed of the firmware).
        envelope: True when the run exports a field with a trust envelope (`torch_ude.envelope`): the trainer then
            records the span of the jets it offers to the reservoir (``TU_ENVELOPE``, ``tu_trainer_span``).
        envelope_margin: the envelope's fade band as a fraction of its width per input column (used at export
            only, `torch_ude.envelope.install_span`: not a device setting, not in `settings`).
        source: where the settings came from (recorded in the stamp).
        physics_first: for a known model that trains physical parameters (``field.physical``), the share of
            ``max_steps`` in which they train alone (`torch_ude.training.JetMatchingModule`'s ``physics_first``;
            1: the residual never trains and starts at zero, ``HybridField.without_residual``); unused otherwise.
        velocity: for a position-only log (``data.velocity_from_position``), the centred Savitzky-Golay derivative
            the device applies to the streamed positions (``TU_VELOCITY``: the stream holds the ``n / 2``
            positions and the inputs; `torch_ude.position_only.with_velocities` is the reference); None: every
            state is streamed.
        physics_refit: for such a model, whether a physics-alone run (``physics_first`` 1) ends with the refit of
            its parameters (``model.physics_refit``, `torch_ude.physical.refit_physical_parameters`:
            ``tu_trainer_refit`` on the device, `microcontroller.headers.refit_evaluations`); unused otherwise.
    """

    system: System
    case: str
    field: HybridField
    pretrained: bool
    stream: StreamSettings
    batch_size: int
    lr: float
    lr_min: float
    cosine: bool
    ema_decay: float | None
    weight_decay: float
    weight_decay_full_at: float | None
    grad_clip: float
    lambda1: float
    fs: float
    train_rate: float
    noise: float
    duration: float
    max_steps: int
    seed: int
    envelope: bool = False
    envelope_margin: float = DEFAULT_MARGIN
    source: str = dataclass_field(default="")
    physics_first: float = 0.0
    velocity: VelocityFromPosition | None = None
    physics_refit: bool = False

    def validate(self) -> None:
        """Refuse settings the C port cannot run, with the setting, what was given and the fix.

        Raises:
            ValueError: for a known field without a C form (`plant`), or impossible sizes and settings.
        """
        self.plant()  # a known field without a C form is refused here, by name
        self.stream.validate()
        if self.velocity is not None:
            self.velocity.validate()
        if len(self.field.mlp.sizes) < 3:
            raise ValueError(
                f"model.hidden is {list(self.field.mlp.sizes[1:-1])}, no hidden layer; the C port needs at least one: "
                f"set model.hidden to a list of widths such as [16, 16], or train without hidden layers with the "
                f"Python trainer (model.class_path torch_ude.training.JetMatchingModule).")
        if self.batch_size < 1 or self.stream.capacity < self.batch_size:
            raise ValueError(
                f"the reservoir capacity B = {self.stream.capacity} is smaller than the minibatch size "
                f"{self.batch_size}; raise model.stream.capacity or lower model.batch_size.")
        chunk = self.fs / self.train_rate
        if not (math.isfinite(chunk) and abs(chunk - round(chunk)) < 1e-9 and round(chunk) >= 1):
            raise ValueError(f"fs / train_rate must be a positive integer; got {self.fs} / {self.train_rate}.")
        cal_len = self.stream.calibration_ticks(self.fs)
        if cal_len >= _MAX_CAL_LEN:
            raise ValueError(
                f"the calibration phase holds {cal_len} samples; the C port keys segments of its record modulo "
                f"{_MAX_CAL_LEN}: shorten model.stream.calibration_s below {_MAX_CAL_LEN / self.fs:.2f} s.")
        if self.max_steps is None or self.max_steps < 1:
            raise ValueError(f"trainer.max_steps (the schedule's length) must be >= 1; got {self.max_steps}.")
        for name in ("lr", "grad_clip"):
            if not getattr(self, name) > 0:
                raise ValueError(f"model.{name} must be positive; got {getattr(self, name)}.")

    def plant(self) -> PlantCode:
        """The known field (and the simulated truth) of this plant and case as CasADi functions for
        the C code (`microcontroller.plant_code.plant_code`; traced from ``field.known``).

        Raises:
            ValueError: if the known field has no CasADi form or reads another number of inputs
                than the plant names.
        """
        return plant_code(self.system, self.case, self.field.known)

    def settings(self) -> dict:
        """The resolved settings as plain JSON values (what the stamp's hash covers; the stream's as
        `_device_stream` gives them)."""
        return {
            "plant": {"class_path": f"{type(self.system).__module__}.{type(self.system).__qualname__}",
                      "init_args": self.system.init_args()},
            "case": self.case, "layer_sizes": list(self.field.mlp.sizes), "pretrained": self.pretrained,
            **({"linear": True, "input_affine": self.field.input_affine} if self.field.linear else {}),
            **({"input_map": input_map(self.field)} if input_map(self.field) else {}),
            **({"envelope": True} if self.envelope else {}),
            **({"physical": {"trainable": self.field.known.trainable_spec(), "physics_first": self.physics_first,
                             **({"refit": True} if self.physics_refit else {})}}
               if self.field.physical else {}),
            **({"velocity_from_position": asdict(self.velocity)} if self.velocity is not None else {}),
            "stream": _device_stream(self.stream), "batch_size": self.batch_size, "lr": self.lr, "lr_min": self.lr_min,
            "cosine": self.cosine, "ema_decay": self.ema_decay, "weight_decay": self.weight_decay,
            "weight_decay_full_at": self.weight_decay_full_at, "grad_clip": self.grad_clip,
            "lambda1": self.lambda1, "fs": self.fs, "train_rate": self.train_rate, "noise": self.noise,
            "duration": self.duration, "max_steps": self.max_steps,
            "seed": self.seed,
            "weights": hashlib.sha256(b"".join(
                p.detach().to(torch.float32).numpy().tobytes() for p in self.field.parameters_list())).hexdigest(),
        }

    def push_channels(self) -> int:
        """Channels of one sample the device receives: the states, then the inputs, or with ``velocity`` the
        positions (the first ``n / 2`` states), then the inputs."""
        positions = self.field.n_states // 2 if self.velocity is not None else 0
        return self.field.n_states - positions + self.field.n_inputs

    def config_hash(self) -> str:
        """SHA-256 of the canonical JSON of `settings` (first 16 hex digits)."""
        text = json.dumps(self.settings(), sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def state_hash(self) -> str:
        """`config_hash` of the settings but the schedule's length (``max_steps``): what a checkpoint of
        the C trainer must match to be restored (a longer schedule may continue it)."""
        settings = self.settings()
        settings.pop("max_steps")
        text = json.dumps(settings, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _device_stream(stream: StreamSettings) -> dict:
    """The stream settings the C trainer runs, as plain values: those of `StreamSettings` less
    ``calibration_replay`` when it is false and less ``reservoir_precision`` when it is the default float32, so
    that a configuration keeps the settings hash it had before those settings existed (its checkpoints restore)."""
    settings = asdict(stream)
    if not settings["calibration_replay"]:
        del settings["calibration_replay"]
    if settings["reservoir_precision"] == "float32":
        del settings["reservoir_precision"]
    return settings


def _unsupported_trust_features(field: HybridField, model: dict) -> list[str]:
    """The trust features of `torch_ude.training.JetMatchingModule` (issue 31) that ``model`` turns on and the
    C trainer cannot run, each with the setting that turns it off. A setting absent from ``model`` (a run made
    before the feature existed) takes the module's default. (Periodic and invariant states, the network's input
    map, the trust envelope and trainable physical parameters with ``physics_first`` run on the device:
    `microcontroller.headers.input_map`, `envelope_wanted`, `microcontroller.headers.physics_updates`.)"""
    out = []
    if (field.physical and model.get("physics_refit", True) and float(model.get("physics_first", 0.25)) < 1.0
            and model.get("residual_check", True)):
        out.append("the refit of the physical parameters after the residual check rejects the residual (the "
                   "device refits a physics-alone run, physics_first 1, only; set model.physics_refit: false or "
                   "model.residual_check: false)")
    return out


def envelope_wanted(model: dict, data: dict) -> bool:
    """Whether a run of ``model``'s settings exports a trust envelope, as
    `torch_ude.training.JetMatchingModule.envelope_wanted` decides: ``model["envelope"]``, or where that is
    None or absent, whether the stream is recorded logs (``data["recorded"]``; absent: a simulated plant)."""
    envelope = model.get("envelope")
    return bool(data.get("recorded", False)) if envelope is None else bool(envelope)


def stream_data(dm) -> dict:
    """The stream settings of a data module that `spec_from_settings` reads (``data``): ``fs``, ``train_rate``,
    ``duration``, ``noise`` of a simulated plant (a recorded log's data module has none: the firmware simulates
    only simulated plants), ``recorded`` where the module says it streams recorded logs and
    ``velocity_from_position`` where it derives velocities from positions (the device then derives them)."""
    keys = ("fs", "train_rate", "noise", "duration", "recorded", "velocity_from_position")
    return {key: getattr(dm, key) for key in keys if hasattr(dm, key)}


def _velocity(data: dict) -> VelocityFromPosition | None:
    """``data["velocity_from_position"]`` as a `VelocityFromPosition` (a run's recorded settings hold a dict).

    Raises:
        TypeError: for a value that is neither None, a dict nor a `VelocityFromPosition`.
    """
    value = data.get("velocity_from_position")
    if value is None or isinstance(value, VelocityFromPosition):
        return value
    if isinstance(value, dict) and set(value) <= {"half_width", "order"}:
        return VelocityFromPosition(**value)
    raise TypeError(f"data.velocity_from_position must be null or {{half_width, order}}; got {value!r}.")


def spec_from_settings(system: System, case: str, field: HybridField, pretrained: bool, model: dict, data: dict,
                       max_steps: int, seed: int, source: str) -> DeviceSpec:
    """The spec of a plant, an initial field and a trainer's settings, validated.

    Args:
        system, case: the plant and its known-model case.
        field: the initial field; ``pretrained`` keeps its scales on the device.
        model: the jet-matching module's settings (``JetMatchingModule`` arguments: ``stream``,
            ``batch_size``, ``lr``, ...), as a dict.
        data: the stream's ``fs``, ``train_rate``, ``noise`` and ``duration``, ``recorded`` (recorded
            logs: the envelope's default, `envelope_wanted`) and ``velocity_from_position`` (a position-only log:
            the device derives the velocities, `DeviceSpec.velocity`).
        max_steps: the cosine schedule's length in updates.
        seed: the run seed.
        source: where the settings came from (recorded in the stamp).

    Raises:
        ValueError: for settings the C port cannot run (`DeviceSpec.validate`).
    """
    unsupported = _unsupported_trust_features(field, model)
    if unsupported:
        raise ValueError(
            f"the C port does not implement {'; '.join(unsupported)} yet (issue 32); turn "
            f"{'them' if len(unsupported) > 1 else 'it'} off for the device, or train with the Python trainer "
            f"(model.class_path torch_ude.training.JetMatchingModule).")
    stream = model.get("stream")
    stream = stream if isinstance(stream, StreamSettings) else StreamSettings(**(stream or {}))
    physics_first = float(model.get("physics_first", 0.25)) if field.physical else 0.0
    if physics_first >= 1.0:  # the residual stays at zero, as JetMatchingModule.setup starts it
        field = field.without_residual()
    spec = DeviceSpec(
        system=system, case=case, field=field, pretrained=pretrained, stream=stream,
        batch_size=int(model.get("batch_size", 64)), lr=float(model.get("lr", 5e-3)),
        lr_min=float(model.get("lr_min", 5e-5)), cosine=model.get("schedule", "cosine") == "cosine",
        ema_decay=model.get("ema_decay", 0.995), weight_decay=float(model.get("weight_decay", 0.0)),
        weight_decay_full_at=model.get("weight_decay_full_at"), grad_clip=float(model.get("grad_clip", 5.0)),
        lambda1=float(model.get("lambda1", 1.0)), fs=float(data["fs"]), train_rate=float(data["train_rate"]),
        noise=float(data.get("noise", 0.01)), duration=float(data.get("duration", 60.0)), max_steps=max_steps,
        seed=int(seed), envelope=envelope_wanted(model, data),
        envelope_margin=float(model.get("envelope_margin", DEFAULT_MARGIN)), source=source, physics_first=physics_first,
        velocity=_velocity(data), physics_refit=field.physical and bool(model.get("physics_refit", True)))
    spec.validate()
    return spec


@contextmanager
def _quiet_cli() -> Iterator[None]:
    """LightningCLI called from Python with its arguments: without its warning that the
    process's own command line differs, and without Lightning's "Seed set to" and accelerator
    lines (the generator trains nothing)."""
    argv, loggers = sys.argv, [logging.getLogger(name) for name in ("lightning.fabric", "lightning.pytorch")]
    levels = [log.level for log in loggers]
    sys.argv = argv[:1]
    for log in loggers:
        log.setLevel(logging.WARNING)
    try:
        yield
    finally:
        sys.argv = argv
        for log, level in zip(loggers, levels):
            log.setLevel(level)


def spec_from_config(config: str | Path, overrides: list[str] | None = None) -> DeviceSpec:
    """The spec of a fresh, seeded network from a ``torch-ude`` YAML config (and CLI overrides).

    The config is read by the project's LightningCLI, so every default and override applies
    exactly as in ``torch-ude fit``.

    Raises:
        ValueError: for settings the C port cannot run (see `DeviceSpec.validate`); a bad
            setting of the config itself propagates as LightningCLI raises it (the command
            line shortens it to the project's message, `torch_ude.cli.user_error`).
    """
    from torch_ude.cli import main

    with _quiet_cli():
        cli = main(["--config", str(config), *(overrides or [])], run=False)
    dm, model = cli.datamodule, cli.model
    field = model.initial_field(dm.system, dm.system.known_field(dm.case), dm.seed)
    return spec_from_settings(dm.system, dm.case, field, False, dict(model.hparams), stream_data(dm),
                 cli.trainer.max_steps, dm.seed, f"config {config} {' '.join(overrides or [])}".strip())


def spec_from_run(run: str | Path, config: str | Path | None = None,
                  overrides: list[str] | None = None) -> DeviceSpec:
    """The spec of a trained field to fine-tune on the device, from a run folder.

    Args:
        run: a folder with ``field.pt`` and ``field.json`` written by any trainer.
        config: settings for the device run; default: the settings recorded in the run.
        overrides: CLI overrides applied to ``config``.

    Raises:
        FileNotFoundError: if the folder lacks the field files.
        ValueError: for a folder `microcontroller.run_folder.read_run` refuses, a run whose
            plant, case or size disagrees with ``config``, or settings the C port cannot run.
    """
    folder = Path(run)
    system, case, field = read_run(folder)
    sizes = tuple(field.mlp.sizes)
    sidecar = json.loads((folder / SIDECAR_FILE).read_text())
    if config is not None:
        base = spec_from_config(config, overrides)
        if type(base.system) is not type(system) or base.case != case or tuple(base.field.mlp.sizes) != sizes \
                or input_map(base.field) != input_map(field):
            raise ValueError(
                f"the run in {folder} trained {type(system).__name__} case {case} with layers {list(sizes)} and input "
                f"map {input_map(field) or 'none'}, but {config} describes {type(base.system).__name__} case "
                f"{base.case} with layers {list(base.field.mlp.sizes)} and input map "
                f"{input_map(base.field) or 'none'}; "
                f"use a config of the same plant, case and network (model.periodic, model.invariant).")
        base.field, base.pretrained, base.source = field, True, f"run {folder}; {base.source}"
        base.validate()
        return base
    recorded = (sidecar.get("extra") or {}).get("config")
    if not isinstance(recorded, dict) or not all(k in recorded for k in ("model", "data", "max_steps")) \
            or not all(k in (recorded["data"] or {}) for k in ("fs", "train_rate")):
        raise ValueError(f"{folder / SIDECAR_FILE} records no run settings (model, data with fs and train_rate, "
                         f"max_steps); pass --config for the device run.")
    return spec_from_settings(system, case, field, True, recorded["model"], recorded["data"],
                              int(recorded["max_steps"]), int(sidecar["extra"].get("seed", 0)), f"run {folder}")


def library_files() -> list[Path]:
    """What a build needs beside the generated headers: the library's headers (``include/*.h``) and
    sources (``src/*.c``), and the on-device application of the ESP32 projects (``support/tu_app``
    and ``support/tu_eval``, ``.h`` and ``.c``), sorted by name; no two share a name."""
    app = [ROOT / "support" / f"{stem}{ext}" for stem in ("tu_app", "tu_eval") for ext in (".h", ".c")]
    return sorted([*(ROOT / "include").glob("*.h"), *library_sources(), *app], key=lambda p: p.name)


def copy_library(out: str | Path) -> list[Path]:
    """Copy `library_files` into the folder ``out`` (created if missing; one flat folder, as an
    Arduino library's ``src/`` and an ESP-IDF component hold them). With the generated headers
    beside them the folder compiles on its own: every ``#include`` of these files names a file in it
    or a C library header.

    Returns:
        The paths written, sorted by name.
    """
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    return [Path(shutil.copyfile(src, folder / src.name)) for src in library_files()]


def main(argv: list[str] | None = None) -> int:
    """Command line: see the module doc and ``--help``. An error of a setting or a file is one
    line ``microcontroller.generate: error: ...`` and exit status 2."""
    from torch_ude.cli import USER_ERRORS, user_error

    parser = argparse.ArgumentParser(prog="python -m microcontroller.generate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", help="torch-ude YAML config of the device run (fresh seeded network)")
    parser.add_argument("--run", help=f"run folder with {FIELD_FILE} and {SIDECAR_FILE} to fine-tune")
    parser.add_argument("--also", action="append", default=[], metavar="CONFIG",
                        help="a further torch-ude config in the same image (repeatable): configuration 1, 2, ... "
                             "(tu_config_get(k)), a trainer of its own plant and sizes beside --config's (fresh "
                             "seeded network; the overrides apply to --config/--run only)")
    parser.add_argument("--out", required=True, help="folder for tu_config.h, tu_model_data.h and tu_plant_code.h")
    parser.add_argument("--ram-budget", type=int, default=None, metavar="BYTES",
                        help="static RAM the trainer may take on the target (default: the Cortex-M4F firmware's "
                             "RAM less its stack and buffers)")
    parser.add_argument("--with-sources", action="store_true",
                        help="also copy the library's sources and headers and the on-device application into --out, "
                             "so that the folder builds on its own (an Arduino library's src/, an ESP-IDF component)")
    args, overrides = parser.parse_known_args(argv)
    args.overrides = overrides  # anything else is a LightningCLI override of --config, e.g. --data.noise 0.02
    if not (args.config or args.run):
        parser.error("give --config, --run, or both.")
    budget = default_ram_budget() if args.ram_budget is None else args.ram_budget
    if budget < 1:
        parser.error(f"--ram-budget must be a positive number of bytes; got {args.ram_budget}.")
    try:
        spec = spec_from_run(args.run, args.config, args.overrides) if args.run else \
            spec_from_config(args.config, args.overrides)
        specs = [spec, *(spec_from_config(path) for path in args.also)]
        paths = write_headers(specs, args.out, budget)
        copied = copy_library(args.out) if args.with_sources else []
    except USER_ERRORS as exc:
        err = user_error(exc)
        if err is None:
            raise
        print(f"microcontroller.generate: error: {err.args[0] if isinstance(err, KeyError) else err}", file=sys.stderr)
        return 2
    also = f" and {len(copied)} files of the library beside them" if copied else ""
    hashes = ", ".join(s.config_hash() for s in specs)
    print(f"wrote {', '.join(str(p) for p in paths)}{also} (settings hash{'es' if len(specs) > 1 else ''} {hashes})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Generate the C trainer's headers from a torch-ude config or run.

``python -m microcontroller.generate --config configs/pendulum_case_a_c.yaml --out build/gen``
writes ``tu_config.h`` (sizes and hyperparameters as macros) and ``tu_model_data.h`` (the
constant tables: Savitzky-Golay rows and projection, initial weights and scales, plant
constants) for a fresh network seeded like every trainer of the project
(`torch_ude.HybridField.from_seed`); ``--run DIR`` starts instead from the trained field of a
run folder (``field.pt`` + ``field.json``, any trainer) to fine-tune it on the device, with
the settings recorded in that run unless ``--config`` is also given. Both headers are stamped
with the generator, the torch-ude and torch versions and a hash of the settings (as
CMSIS-NN's generated test headers are). Settings the C port cannot run are errors here,
before any compiler sees them.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import math
import sys
from dataclasses import asdict, dataclass, field as dataclass_field
from pathlib import Path

import torch

from torch_ude import __version__ as torch_ude_version
from torch_ude.calibration import CALIBRATION_M0
from torch_ude.export import FIELD_FILE, SIDECAR_FILE, load_field
from torch_ude.field import HybridField
from torch_ude.savgol import SavitzkyGolay
from torch_ude.stream import StreamSettings
from torch_ude.systems import SinglePendulum, System
from torch_ude.systems.double_pendulum import DoublePendulumField
from torch_ude.systems.pendulum import PendulumField

__all__ = ["DeviceSpec", "spec_from_config", "spec_from_run", "spec_from_settings", "write_headers", "headers_for",
           "main", "GENERATOR"]

GENERATOR = "microcontroller.generate 1.0"
_MAX_CAL_LEN = 1 << 14  # the calibration record keys its segments modulo 2^14


@dataclass
class DeviceSpec:
    """Everything the C build of one trainer needs (the generator's resolved settings).

    Attributes:
        system: the plant (SinglePendulum or DoublePendulum).
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
        source: where the settings came from (recorded in the stamp).
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
    source: str = dataclass_field(default="")

    def validate(self) -> None:
        """Refuse settings the C port cannot run, with the setting, what was given and the fix.

        Raises:
            ValueError: for an unsupported plant, the residual's linear term, or impossible
                sizes and settings.
        """
        if self.field.linear:
            raise ValueError(
                "model.linear (the residual's linear term, HybridField(..., linear=True)) is not in the C port; "
                "set model.linear false for the device, or train and use the field with the Python trainer "
                "(its field.pt exports the linear term).")
        known = self.field.known
        if not isinstance(known, (PendulumField, DoublePendulumField)):
            raise ValueError(
                f"the C port implements the known fields of SinglePendulum and DoublePendulum; this run's plant "
                f"{type(self.system).__name__} has {type(known).__name__}. Add its field and Jacobian to "
                f"microcontroller/src/tu_plant.c, or train it with the Python trainer.")
        self.stream.validate()
        if self.stream.tap_average:
            raise ValueError(
                "model.stream.tap_average (box-averaged taps, issue 17) is not in the C port yet (it needs the "
                "m-dependent SG rows in RAM and a box sum per channel, about 1.4 kB more static memory for the "
                "single pendulum; RESULTS.md); set model.stream.tap_average false for the device, or train with "
                "the Python trainer.")
        if len(self.field.mlp.sizes) < 3:
            raise ValueError("the C port needs at least one hidden layer (model.hidden must not be empty).")
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

    def settings(self) -> dict:
        """The resolved settings as plain JSON values (what the stamp's hash covers)."""
        return {
            "plant": {"class_path": f"{type(self.system).__module__}.{type(self.system).__qualname__}",
                      "init_args": self.system.init_args()},
            "case": self.case, "layer_sizes": list(self.field.mlp.sizes), "pretrained": self.pretrained,
            "stream": asdict(self.stream), "batch_size": self.batch_size, "lr": self.lr, "lr_min": self.lr_min,
            "cosine": self.cosine, "ema_decay": self.ema_decay, "weight_decay": self.weight_decay,
            "weight_decay_full_at": self.weight_decay_full_at, "grad_clip": self.grad_clip,
            "lambda1": self.lambda1, "fs": self.fs, "train_rate": self.train_rate, "noise": self.noise,
            "duration": self.duration, "max_steps": self.max_steps,
            "seed": self.seed,
            "weights": hashlib.sha256(b"".join(
                p.detach().to(torch.float32).numpy().tobytes() for p in self.field.parameters_list())).hexdigest(),
        }

    def config_hash(self) -> str:
        """SHA-256 of the canonical JSON of `settings` (first 16 hex digits)."""
        text = json.dumps(self.settings(), sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def spec_from_settings(system: System, case: str, field: HybridField, pretrained: bool, model: dict, data: dict,
                       max_steps: int, seed: int, source: str) -> DeviceSpec:
    """The spec of a plant, an initial field and a trainer's settings, validated.

    Args:
        system, case: the plant and its known-model case.
        field: the initial field; ``pretrained`` keeps its scales on the device.
        model: the jet-matching module's settings (``JetMatchingModule`` arguments: ``stream``,
            ``batch_size``, ``lr``, ...), as a dict.
        data: the stream's ``fs``, ``train_rate``, ``noise`` and ``duration``.
        max_steps: the cosine schedule's length in updates.
        seed: the run seed.
        source: where the settings came from (recorded in the stamp).

    Raises:
        ValueError: for settings the C port cannot run (`DeviceSpec.validate`).
    """
    stream = model.get("stream")
    stream = stream if isinstance(stream, StreamSettings) else StreamSettings(**(stream or {}))
    spec = DeviceSpec(
        system=system, case=case, field=field, pretrained=pretrained, stream=stream,
        batch_size=int(model.get("batch_size", 64)), lr=float(model.get("lr", 5e-3)),
        lr_min=float(model.get("lr_min", 5e-5)), cosine=model.get("schedule", "cosine") == "cosine",
        ema_decay=model.get("ema_decay", 0.995), weight_decay=float(model.get("weight_decay", 0.0)),
        weight_decay_full_at=model.get("weight_decay_full_at"), grad_clip=float(model.get("grad_clip", 5.0)),
        lambda1=float(model.get("lambda1", 1.0)), fs=float(data["fs"]), train_rate=float(data["train_rate"]),
        noise=float(data.get("noise", 0.01)), duration=float(data.get("duration", 60.0)), max_steps=max_steps,
        seed=int(seed), source=source)
    spec.validate()
    return spec


def spec_from_config(config: str | Path, overrides: list[str] | None = None) -> DeviceSpec:
    """The spec of a fresh, seeded network from a ``torch-ude`` YAML config (and CLI overrides).

    The config is read by the project's LightningCLI, so every default and override applies
    exactly as in ``torch-ude fit``.

    Raises:
        ValueError: for settings the C port cannot run (see `DeviceSpec.validate`).
    """
    from torch_ude.cli import main

    cli = main(["--config", str(config), *(overrides or [])], run=False)
    dm, model = cli.datamodule, cli.model
    hp = dict(model.hparams)
    field = HybridField.from_seed(dm.system.known_field(dm.case), dm.seed, hidden=tuple(hp.get("hidden", (16, 16))),
                                  linear=bool(hp.get("linear", False)))
    data = {"fs": dm.fs, "train_rate": dm.train_rate, "noise": dm.noise, "duration": dm.duration}
    return spec_from_settings(dm.system, dm.case, field, False, hp, data,
                 cli.trainer.max_steps, dm.seed, f"config {config} {' '.join(overrides or [])}".strip())


def _system_from_sidecar(sidecar: dict) -> System:
    plant = sidecar["plant"]
    module, _, name = plant["class_path"].rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    return cls(**plant.get("init_args", {}))


def spec_from_run(run: str | Path, config: str | Path | None = None,
                  overrides: list[str] | None = None) -> DeviceSpec:
    """The spec of a trained field to fine-tune on the device, from a run folder.

    Args:
        run: a folder with ``field.pt`` and ``field.json`` written by any trainer.
        config: settings for the device run; default: the settings recorded in the run.
        overrides: CLI overrides applied to ``config``.

    Raises:
        FileNotFoundError: if the folder lacks the field files.
        ValueError: for a run whose plant, case or size disagrees with ``config``, or
            settings the C port cannot run.
    """
    folder = Path(run)
    module, sidecar = load_field(folder)
    if sidecar.get("linear"):
        raise ValueError(f"the field in {folder} has the residual's linear term (field.json: \"linear\": true), "
                         f"which the C port does not implement; fine-tune it with the Python trainer, or train "
                         f"the device's field with model.linear false.")
    system = _system_from_sidecar(sidecar)
    case = sidecar["case"]
    sizes = tuple(sidecar["layer_sizes"])
    field = HybridField(system.known_field(case), hidden=sizes[1:-1])
    state = {k.rpartition("mlp.")[2]: v for k, v in module.state_dict().items() if "mlp." in k}
    with torch.no_grad():
        for name, p in field.mlp.named_parameters():
            p.copy_(state[name].to(p.dtype))
    field.set_scales(torch.tensor(sidecar["in_scale"], dtype=torch.float64),
                     torch.tensor(sidecar["out_scale"], dtype=torch.float64))
    if config is not None:
        base = spec_from_config(config, overrides)
        if type(base.system) is not type(system) or base.case != case or tuple(base.field.mlp.sizes) != sizes:
            raise ValueError(
                f"the run in {folder} trained {type(system).__name__} case {case} with layers {list(sizes)}, but "
                f"{config} describes {type(base.system).__name__} case {base.case} with layers "
                f"{list(base.field.mlp.sizes)}; use a config of the same plant, case and network.")
        base.field, base.pretrained, base.source = field, True, f"run {folder}; {base.source}"
        base.validate()
        return base
    recorded = sidecar.get("extra", {}).get("config")
    if not recorded or "model" not in recorded or "data" not in recorded:
        raise ValueError(f"{folder / SIDECAR_FILE} records no run settings; pass --config for the device run.")
    return spec_from_settings(system, case, field, True, recorded["model"], recorded["data"],
                              int(recorded["max_steps"]), int(sidecar["extra"].get("seed", 0)), f"run {folder}")


def _f(value: float) -> str:
    """A C float literal that round-trips the float32 value of ``value``."""
    v = float(torch.tensor(value, dtype=torch.float32))
    if math.isinf(v):
        return "INFINITY" if v > 0 else "(-INFINITY)"
    text = f"{v:.9g}"
    if "e" not in text and "." not in text:
        text += ".0"
    return text + "f"


def _array(values) -> str:
    """A (nested) C initializer of float literals with the shape of ``values``."""
    t = torch.as_tensor(values, dtype=torch.float64)
    if t.ndim <= 1:
        return "{" + ", ".join(_f(float(v)) for v in t.flatten()) + "}"
    return "{" + ", ".join(_array(row) for row in t) + "}"


def _plant_init(field) -> str:
    if isinstance(field, PendulumField):
        return f"{{{_f(field.gravity)}, {_f(field.length)}, {_f(field.damping)}}}"
    return (f"{{{_f(field.gravity)}, {_f(field.m1)}, {_f(field.m2)}, {_f(field.l1)}, {_f(field.l2)}, "
            f"{_f(field.c1)}, {_f(field.c2)}}}")


def _stamp(spec: DeviceSpec) -> str:
    return (f"/* Generated by {GENERATOR} (torch-ude {torch_ude_version}, torch {torch.__version__}) from\n"
            f" * {spec.source}\n * settings hash {spec.config_hash()}. Do not edit: regenerate. */\n")


def config_header(spec: DeviceSpec) -> str:
    """The text of ``tu_config.h``: sizes and hyperparameters as macros."""
    st, sizes = spec.stream, spec.field.mlp.sizes
    plant = "TU_PLANT_PENDULUM" if isinstance(spec.field.known, PendulumField) else "TU_PLANT_DOUBLE_PENDULUM"
    macros = [
        ("TU_CONFIG_HASH", f'"{spec.config_hash()}"', "hash of the generator's settings"),
        ("TU_N", len(spec.system.state_names), "state channels n"),
        ("TU_NUM_LAYERS", len(sizes) - 1, "affine layers of the MLP"),
        ("TU_LAYER_SIZES", "{" + ", ".join(str(s) for s in sizes) + "}", "layer widths"),
        ("TU_WIDTH_MAX", max(sizes), "widest layer"),
        ("TU_NUM_PARAMS", spec.field.num_parameters(), "trainable weights"),
        ("TU_PLANT", plant, type(spec.system).__name__ + ", case " + spec.case),
        ("TU_PRETRAINED", int(spec.pretrained), "1: keep the tables' scales (fine-tuning)"),
        ("TU_DEFAULT_SEED", f"{spec.seed}u", "the run seed"),
        ("TU_HALF_WIDTH", st.half_width, "SG half width M"),
        ("TU_TAPS", 2 * st.half_width + 1, "SG taps 2M + 1"),
        ("TU_ORDER", st.order, "SG order P"),
        ("TU_STRIDE", st.stride or 0, "window stride s in ticks (0: s = m)"),
        ("TU_FS", _f(spec.fs), "sample rate, Hz"),
        ("TU_TRAIN_EVERY", round(spec.fs / spec.train_rate), "ticks per training tick"),
        ("TU_CAL_LEN", st.calibration_ticks(spec.fs), "calibration samples"),
        ("TU_M_FIXED", st.m or 0, "fixed tap spacing (0: adaptive, Eq. 24)"),
        ("TU_M0", min(CALIBRATION_M0, st.m_max), "first tap spacing of the adaptive search"),
        ("TU_M_MAX", st.m_max, "largest tap spacing"),
        ("TU_DT_SCALE", _f(st.dt_scale), "constant of Eq. (24)"),
        ("TU_OUTLIER_THRESHOLD", _f(st.outlier_threshold or 0.0), "outlier screen, robust SDs (0: off)"),
        ("TU_MAX_BRIDGE", st.max_bridge, "longest bridged gap, ticks"),
        ("TU_LAMBDA1", _f(spec.lambda1), "first-order loss weight"),
        ("TU_LAMBDA2", _f(st.lambda2), "second-order loss weight lambda2^0"),
        ("TU_SNR_GATE", int(st.snr_gate), "gate lambda2 by Eq. (25)-(26)"),
        ("TU_SNR_THRESHOLD", _f(st.snr_threshold), "tau_SNR"),
        ("TU_QUALITY_GATE", int(st.quality_gate), "misfit gate of Eq. (27)"),
        ("TU_GATE_FACTOR", _f(st.gate_factor), "gate: multiple of the running median"),
        ("TU_GATE_FLOOR", _f(st.gate_floor), "gate: multiple of the window RMS"),
        ("TU_GATE_HISTORY", st.gate_history, "gate: windows in the running median"),
        ("TU_BUFFER_RESERVOIR", int(st.buffer == "reservoir"), "1: reservoir sampling, 0: FIFO"),
        ("TU_CAPACITY", st.capacity, "reservoir capacity B"),
        ("TU_JET_ROWS", 3 if st.lambda2 > 0 else 2, "rows of a stored jet (2: no second-order term)"),
        ("TU_FORGET_WINDOW", st.forget_window or 0, "forgetting window of the reservoir (0: uniform)"),
        ("TU_BATCH", spec.batch_size, "minibatch size"),
        ("TU_LR", _f(spec.lr), "learning rate"),
        ("TU_LR_MIN", _f(spec.lr_min), "final learning rate of the cosine schedule"),
        ("TU_SCHEDULE_COSINE", int(spec.cosine), "1: cosine schedule, 0: constant"),
        ("TU_MAX_STEPS", spec.max_steps, "updates the schedule spans"),
        ("TU_EMA", int(spec.ema_decay is not None), "1: EMA of the weights"),
        ("TU_EMA_WEIGHT", _f(1.0 - (spec.ema_decay or 0.0)), "1 - EMA decay"),
        ("TU_WEIGHT_DECAY", _f(spec.weight_decay), "AdamW decay at and above full_at"),
        ("TU_WEIGHT_DECAY_FULL_AT", _f(spec.weight_decay_full_at or 0.0), "relative noise of full decay (0: constant)"),
        ("TU_GRAD_CLIP", _f(spec.grad_clip), "gradient-norm clip"),
    ]
    if isinstance(spec.system, SinglePendulum):  # the firmware's own simulated plant (support/tu_eval.c)
        p = spec.system
        macros += [
            ("TU_SIM_X0", "{" + ", ".join(_f(v) for v in p.x0) + "}", "initial state, rad and rad/s"),
            ("TU_SIM_ENERGY", "{" + ", ".join(_f(v) for v in p.energy_fraction) + "}", "re-excitation energy range"),
            ("TU_SIM_REEXCITE", "{" + ", ".join(_f(v) for v in p.reexcite_interval) + "}",
             "seconds between re-excitations"),
            ("TU_SIM_NOISE", _f(spec.noise), "relative sensor noise"),
            ("TU_SIM_SECONDS", _f(spec.duration), "stream length, s"),
        ]
    width = max(len(name) for name, _, _ in macros)
    lines = [f"#define {name:<{width}} {value}  /* {doc} */" for name, value, doc in macros]
    return (_stamp(spec) + "#ifndef TU_CONFIG_H\n#define TU_CONFIG_H\n\n" + "\n".join(lines)
            + "\n\n#endif /* TU_CONFIG_H */\n")


def model_header(spec: DeviceSpec) -> str:
    """The text of ``tu_model_data.h``: the constant tables (see microcontroller/include/tu_model.h)."""
    sg = SavitzkyGolay(spec.stream.half_width, spec.stream.order)
    norms = torch.linalg.vector_norm(sg.rows, dim=1)
    params = torch.cat([p.detach().flatten() for p in spec.field.parameters_list()])
    body = (
        "static const tu_model TU_MODEL_DATA = {\n"
        f"    .sg_rows = {_array(sg.rows)},\n"
        f"    .sg_row_norm = {_array(norms)},\n"
        f"    .sg_projection = {_array(sg.projection)},\n"
        f"    .sg_noise_gain = {_f(sg.noise_gain)},\n"
        f"    .init_params = {_array(params)},\n"
        f"    .in_scale = {_array(spec.field.in_scale)},\n"
        f"    .out_scale = {_array(spec.field.out_scale)},\n"
        f"    .known = {_plant_init(spec.field.known)},\n"
        f"    .truth = {_plant_init(spec.system.true_field())},\n"
        "};\n")
    return (_stamp(spec) + "#ifndef TU_MODEL_DATA_H\n#define TU_MODEL_DATA_H\n\n#include <math.h>\n\n"
            "#include \"tu_model.h\"\n\n" + body + "\n#endif /* TU_MODEL_DATA_H */\n")


def write_headers(spec: DeviceSpec, out: str | Path) -> tuple[Path, Path]:
    """Write ``tu_config.h`` and ``tu_model_data.h`` into ``out`` (created if missing).

    Returns:
        The two paths.
    """
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    paths = (folder / "tu_config.h", folder / "tu_model_data.h")
    for path, text in zip(paths, (config_header(spec), model_header(spec))):
        path.write_text(text)
    return paths


def headers_for(spec: DeviceSpec, root: str | Path | None = None) -> Path:
    """Write the headers of ``spec`` into the build cache (``root``/gen-<settings hash>) and return the folder."""
    from .build import BUILD_ROOT

    folder = Path(root or BUILD_ROOT) / f"gen-{spec.config_hash()}"
    write_headers(spec, folder)
    return folder


def main(argv: list[str] | None = None) -> int:
    """Command line: see the module doc and ``--help``."""
    parser = argparse.ArgumentParser(prog="python -m microcontroller.generate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", help="torch-ude YAML config of the device run (fresh seeded network)")
    parser.add_argument("--run", help=f"run folder with {FIELD_FILE} and {SIDECAR_FILE} to fine-tune")
    parser.add_argument("--out", required=True, help="folder for tu_config.h and tu_model_data.h")
    args, overrides = parser.parse_known_args(argv)
    args.overrides = overrides  # anything else is a LightningCLI override of --config, e.g. --data.noise 0.02
    if not (args.config or args.run):
        parser.error("give --config, --run, or both.")
    try:
        spec = spec_from_run(args.run, args.config, args.overrides) if args.run else \
            spec_from_config(args.config, args.overrides)
        paths = write_headers(spec, args.out)
    except (ValueError, FileNotFoundError, KeyError) as err:
        print(f"microcontroller.generate: error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {paths[0]} and {paths[1]} (settings hash {spec.config_hash()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

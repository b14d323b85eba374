"""The RK4 baseline matched to a jet-matching config on recorded logs: same files, known model and field form.

A jet-matching config of a recorded data set (``configs/dfki_pendulum.yaml``, ``configs/emps.yaml``, ...)
has its RK4 multiple-shooting baseline beside it (`baseline_config`: ``baseline_<data set>.yaml``).
`matched_baseline` runs that baseline through ``torch-ude fit`` on the jet config's training and
validation files and known model (its trainable physical parameters included) with the trained jet
field's hidden widths, linear term and input-affine form, so that both methods fit the same model
to the same data; for a data set's own config these are the baseline config's settings already,
so the run is the one a user's ``torch-ude fit --config baseline_<data set>.yaml`` makes.
"""
from __future__ import annotations

import importlib
import inspect
import json
from pathlib import Path

import yaml

from torch_ude.cli import main as cli_main
from torch_ude.field import HybridField

__all__ = ["CONFIG_VARIANTS", "baseline_config", "matched_baseline"]

#: The suffixes of a data set's config variants (input-affine or linear residual, extrapolation
#: split, the device trainer's settings); a variant's RK4 baseline is its data set's.
CONFIG_VARIANTS = ("_affine", "_linear", "_extrapolate", "_c")


def baseline_config(config: str | Path) -> Path:
    """The RK4 baseline's config for a jet-matching config: ``baseline_<stem>.yaml`` beside it, for a variant
    (`CONFIG_VARIANTS`) that of its data set.

    Args:
        config: the jet-matching config.

    Returns:
        The path of the baseline config.

    Raises:
        FileNotFoundError: where neither exists (the message names both).
    """
    config = Path(config)
    stem = config.stem
    for suffix in CONFIG_VARIANTS:
        stem = stem.removesuffix(suffix)
    for name in dict.fromkeys((config.stem, stem)):
        path = config.with_name(f"baseline_{name}.yaml")
        if path.is_file():
            return path
    raise FileNotFoundError(f"no RK4 baseline config for {config}: looked for "
                            f"{config.with_name(f'baseline_{config.stem}.yaml')} and "
                            f"{config.with_name(f'baseline_{stem}.yaml')}.")


def _whole(known: dict) -> dict:
    """``known`` (a config's ``class_path`` / ``init_args``) with every constructor argument it leaves out at
    its default, so that on the command line it replaces a config's known model instead of being merged
    into it (jsonargparse keeps the config's other arguments of the same class)."""
    module, _, name = known["class_path"].rpartition(".")
    signature = inspect.signature(getattr(importlib.import_module(module), name))
    defaults = {k: p.default for k, p in signature.parameters.items() if p.default is not inspect.Parameter.empty}
    return {"class_path": known["class_path"], "init_args": defaults | known.get("init_args", {})}


def matched_baseline(config: str | Path, seed: int, folder: str | Path, form: HybridField,
                     baseline: str | Path | None = None, iterations: int | None = None, rate: float | None = None,
                     steps: int | None = None, windows: int | None = None) -> tuple[dict, HybridField]:
    """One RK4 baseline run matched to a jet-matching config (module doc), through ``torch-ude fit``.

    Args:
        config: the jet-matching config (recorded logs: ``data.init_args`` with ``files``, ``val_files``
            and ``known``).
        seed: ``seed_everything``.
        folder: the run folder (``trainer.default_root_dir``; no logger, no progress bar).
        form: the trained jet-matching field whose hidden widths, linear term and input-affine form the
            baseline takes.
        baseline: the baseline config; None for `baseline_config` of ``config``.
        iterations: ``trainer.max_steps`` (Adam iterations), or None for the baseline config's.
        rate: ``data.rate``, the observation rate in Hz, or None.
        steps: ``data.steps``, K, RK4 steps per window, or None.
        windows: ``data.n_windows``, B, or None.

    Returns:
        The run's ``metrics.json`` with the field's number of weights (``num_parameters``), and the field it
        trained.

    Raises:
        FileNotFoundError: for a missing baseline config (`baseline_config`).
    """
    folder = Path(folder)
    data = yaml.safe_load(Path(config).read_text())["data"]["init_args"]
    argv = ["fit", "--config", str(baseline or baseline_config(config)), "--seed_everything", str(seed),
            "--trainer.logger", "false", "--trainer.enable_progress_bar", "false",
            "--trainer.default_root_dir", str(folder),
            "--data.files", json.dumps(data["files"]), "--data.val_files", json.dumps(data["val_files"]),
            "--data.known", json.dumps(_whole(data["known"])),
            "--model.hidden", json.dumps(list(form.mlp.sizes[1:-1])), "--model.linear", json.dumps(form.linear),
            "--model.input_affine", json.dumps(form.input_affine)]
    for option, value in (("--trainer.max_steps", iterations), ("--data.rate", rate), ("--data.steps", steps),
                          ("--data.n_windows", windows)):
        if value is not None:
            argv += [option, str(value)]
    field = cli_main(argv).model.field
    return json.loads((folder / "metrics.json").read_text()) | {"num_parameters": field.num_parameters()}, field

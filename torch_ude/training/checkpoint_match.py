"""Refuse to evaluate a checkpoint under a config that describes another model (issue 35, item 2).

``torch-ude validate`` / ``test`` load a checkpoint's weights into the model and data module the config
builds. A config of another network shape, residual form, plant, case, known model or channel layout
would then evaluate something else than the run trained (a ``[16, 16]`` checkpoint under ``--model.hidden
[32, 32]``, a Case-A checkpoint under the Case-B config), and without a checkpoint the untrained initial
model. `checkpoint_mismatch` compares what decides the model: the module's hyperparameters stored in
the checkpoint, and the run's saved ``config.yaml`` beside its checkpoint folder (the data settings),
with the config of the command.
"""
from __future__ import annotations

from pathlib import Path

import torch
import yaml

from ..score import class_of

__all__ = ["MODEL_KEYS", "DATA_KEYS", "checkpoint_mismatch"]

#: Module settings that decide the network's shape and form.
MODEL_KEYS = ("hidden", "linear", "input_affine", "periodic", "invariant")
#: Data settings that decide the plant, its case and its channels (compared where both configs name them).
DATA_KEYS = ("case", "states", "inputs", "periodic", "invariant")


def _saved_config(ckpt: Path) -> dict | None:
    """The run's saved settings beside a checkpoint (``.../checkpoints/x.ckpt`` -> ``.../config.yaml``)."""
    path = ckpt.parent.parent / "config.yaml"
    if not path.is_file():
        return None
    content = yaml.safe_load(path.read_text(encoding="utf-8"))
    return content if isinstance(content, dict) else None


def checkpoint_mismatch(ckpt: str | Path, current: dict) -> list[str]:
    """The settings in which the command's config ``current`` describes another model than the checkpoint's.

    Args:
        ckpt: the checkpoint file (``--ckpt_path``).
        current: the command's settings as a plain dictionary (``model``, ``data``, ...).

    Returns:
        One ``"setting: checkpoint X, config Y"`` entry per difference (empty when they agree): the model's
        class and `MODEL_KEYS` against the checkpoint's hyperparameters, the data module's class, its plant's
        (``system``) or known model's class and `DATA_KEYS` against the run's saved ``config.yaml``.
    """
    path = Path(ckpt)
    stored = torch.load(path, map_location="cpu", weights_only=False).get("hyper_parameters") or {}
    out = []
    model = current.get("model") or {}
    theirs = model.get("init_args") or {}
    if stored.get("_class_path") and class_of({"class_path": stored["_class_path"]}) is not class_of(model):
        out.append(f"model.class_path: checkpoint {stored['_class_path']}, config {model.get('class_path')}")
    for key in MODEL_KEYS:
        if key in stored and key in theirs and _plain(stored[key]) != _plain(theirs[key]):
            out.append(f"model.{key}: checkpoint {_plain(stored[key])!r}, config {_plain(theirs[key])!r}")
    saved = _saved_config(path)
    if saved is None:
        return out
    old, new = saved.get("data") or {}, current.get("data") or {}
    if class_of(old) is not class_of(new):
        out.append(f"data.class_path: checkpoint {old.get('class_path')}, config {new.get('class_path')}")
        return out
    a, b = old.get("init_args") or {}, new.get("init_args") or {}
    for key in ("system", "known"):
        if key in a and key in b and class_of(a[key]) is not class_of(b[key]):
            out.append(f"data.{key}: checkpoint {(a[key] or {}).get('class_path')}, config "
                       f"{(b[key] or {}).get('class_path')}")
    for key in DATA_KEYS:
        if key in a and key in b and _plain(a[key]) != _plain(b[key]):
            out.append(f"data.{key}: checkpoint {_plain(a[key])!r}, config {_plain(b[key])!r}")
    return out


def _plain(value: object) -> object:
    """Tuples as lists and case names upper-cased, so equal settings compare equal."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value.upper() if isinstance(value, str) and len(value) == 1 else value

"""The C99 port of the streaming jet-matching trainer: header generator, host build, Python backend.

The C library itself is in ``include/`` and ``src/`` (see README.md). Importing this package
builds and loads nothing; the names below are imported on first use.
"""
from __future__ import annotations

import importlib

__all__ = ["DeviceSpec", "spec_from_config", "spec_from_run", "write_headers"]

_HOME = {"DeviceSpec": "generate", "spec_from_config": "generate", "spec_from_run": "generate",
         "write_headers": "generate"}


def __getattr__(name: str) -> object:
    if name not in _HOME:
        raise AttributeError(f"module 'microcontroller' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)

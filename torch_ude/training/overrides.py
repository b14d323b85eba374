"""Command-line overrides of ``torch-ude`` that jsonargparse takes differently from YAML, and its errors in one line.

Three behaviours of jsonargparse (the parser under `lightning.pytorch.cli.LightningCLI`) surprise a
user of the command line; `torch_ude.cli` corrects them with the functions here:

* **A nested value holding null, NaN or infinity** (``--data.problem.arrival.box '[[0.0, 15.0],
  null]'``): jsonargparse parses the value, then hands it on to the nested class as the text of its
  Python ``repr`` (``[[0.0, 15.0], None]``), which YAML reads back with the string ``'None'`` (and
  ``'nan'``, ``'inf'``) in place of the value. The same setting works from a YAML file.
  `nest_override_values` rewrites such an override into the form a layered YAML file takes
  (``--data '{problem: {arrival: {box: [[0.0, 15.0], null]}}}'``), which merges into the config's
  settings exactly as the file would.
* **A class changed on the command line** (``--data.known.class_path OtherModel``): jsonargparse
  passes the previous class's ``init_args`` that the new class also accepts on to it, so the new
  class silently receives settings meant for another model. `reset_changed_classes` gives the new
  class its own defaults instead, plus what the command line sets for it after the class, and
  returns a note naming what was not passed on. A subclass of the previous class that keeps its
  constructor (a specialization that overrides behaviour, not settings) keeps the settings too:
  they were written for the very ``__init__`` it runs.
* **Errors**: a bad value deep in a nested config makes jsonargparse print the whole usage (about
  60 lines) and a tree of every subtype it tried. `short_parse_error` keeps the setting's dotted
  name and the innermost reason, as one line.
"""
from __future__ import annotations

import importlib
import math
import re
from collections.abc import Callable, Sequence

import yaml
from jsonargparse import ArgumentParser, Namespace

__all__ = ["nest_override_values", "reset_changed_classes", "short_parse_error", "override_pairs"]

#: The settings that are classes chosen by ``class_path`` (LightningCLI's subclass mode).
_CLASS_ROOTS = ("data", "model")
_NAME = re.compile(r"^[A-Za-z_][\w.]*$")


def override_pairs(args: Sequence[str]) -> list[tuple[int, str, str | None]]:
    """The ``--key value`` / ``--key=value`` overrides of ``args`` as ``(index, key, value)``.

    ``value`` is None for a flag followed by another flag (or nothing); the index is that of the
    ``--key`` token.
    """
    out = []
    for i, token in enumerate(args):
        if not token.startswith("--") or token == "--":
            continue
        key, eq, value = token[2:].partition("=")
        if eq:
            out.append((i, key, value))
        elif i + 1 < len(args) and not args[i + 1].startswith("--"):
            out.append((i, key, args[i + 1]))
        else:
            out.append((i, key, None))
    return out


def _lost_in_repr(value: object) -> bool:
    """Whether ``value`` holds something its Python ``repr`` does not give back through YAML."""
    if value is None:
        return True
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, (list, tuple)):
        return any(_lost_in_repr(v) for v in value)
    if isinstance(value, dict):
        return any(_lost_in_repr(v) for v in value.values())
    return False


def nest_override_values(args: Sequence[str]) -> list[str]:
    """``args`` with every nested ``--data.X.Y value`` / ``--model.X.Y value`` whose value holds null,
    NaN or infinity rewritten as ``--data '{X: {Y: value}}'`` (see the module doc); the rest unchanged.

    A value that is not YAML, and a ``class_path``, are left to jsonargparse.
    """
    args = list(args)
    pairs = {i: (key, value) for i, key, value in override_pairs(args)}
    out: list[str] = []
    i = 0
    while i < len(args):
        key, value = pairs.get(i, (None, None))
        root, _, rest = (key or "").partition(".")
        if root in _CLASS_ROOTS and rest and value is not None and not key.endswith(".class_path"):
            try:
                parsed = yaml.safe_load(value)
            except yaml.YAMLError:
                parsed = value
            if _lost_in_repr(parsed):
                nested: object = parsed
                for part in reversed(rest.split(".")):
                    nested = {part: nested}
                out += [f"--{root}", yaml.safe_dump(nested, default_flow_style=True, width=1 << 30).strip()]
                i += 1 if "=" in args[i] else 2
                continue
        out.append(args[i])
        i += 1
    return out


def _node_key(config: Namespace, key: str) -> str:
    """The key of ``config`` that a command-line key names: ``data.known`` is ``data.init_args.known``."""
    parts, node = [], config
    for part in key.split("."):
        if isinstance(node, Namespace) and "class_path" in node and part not in ("class_path", "init_args"):
            parts.append("init_args")
            node = node.get("init_args")
        parts.append(part)
        node = node.get(part) if isinstance(node, Namespace) else None
    return ".".join(parts)


def _class_of(config: Namespace, key: str) -> Namespace | None:
    node = config.get(_node_key(config, key)) if config is not None else None
    return node if isinstance(node, Namespace) and isinstance(node.get("class_path"), str) else None


def _plain(value: object) -> object:
    """``value`` with tuples as lists (jsonargparse holds a parsed sequence as a list, a default as given)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _class(class_path: str) -> type:
    """The class a ``class_path`` names."""
    module, _, name = class_path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _defaults(class_path: str) -> Namespace:
    """The defaults of a class's ``__init__`` arguments, as jsonargparse holds them."""
    parser = ArgumentParser(exit_on_error=False)
    parser.add_class_arguments(_class(class_path), fail_untyped=False)
    return parser.get_defaults()


def reset_changed_classes(config: Namespace, args: Sequence[str], parse_prefix: Callable[[list[str]], Namespace | None]
                          ) -> list[str]:
    """Give a class that the command line changes its own settings, not the previous class's (a subclass that
    keeps the previous class's constructor keeps them).

    For every ``--K.class_path NEW`` (or ``--K NEW`` for a class-valued ``K`` under ``data``/``model``)
    of ``args`` that changes the class ``K`` held before it (``parse_prefix(args[:i])``, the
    config parsed up to that override), each ``init_args`` entry of ``K`` in ``config`` that the
    command line does not set after the change is put back to ``NEW``'s default (removed where
    ``NEW`` has none, so a required argument must then be given).

    Args:
        config: the parsed config (the subcommand's part), edited in place.
        args: the command line as parsed (after `nest_override_values`).
        parse_prefix: parses a prefix of ``args`` to the same part of the config, or None if it cannot.

    Returns:
        One note per changed class that dropped a setting, naming the class, the old class and what
        was not passed on.
    """
    pairs = override_pairs(args)
    notes = []
    for i, key, value in pairs:
        if key.endswith(".class_path"):
            target = key[: -len(".class_path")]
        elif key.partition(".")[0] in _CLASS_ROOTS and value is not None and _NAME.match(value):
            target = key
        else:
            continue
        new = _class_of(config, target)
        if new is None or target.partition(".")[0] not in _CLASS_ROOTS:
            continue
        if key == target and not (new.class_path == value or new.class_path.endswith("." + value)):
            continue  # a string setting, not a class
        old = _class_of(parse_prefix(list(args[:i])), target)
        if old is None or old.class_path == new.class_path or not isinstance(new.get("init_args"), Namespace):
            continue
        new_class, old_class = _class(new.class_path), _class(old.class_path)
        if issubclass(new_class, old_class) and new_class.__init__ is old_class.__init__:
            continue  # a specialization with the same constructor: the settings were written for it
        later = {k[len(target) + 1:].removeprefix("init_args.").partition(".")[0] for j, k, _ in pairs
                 if j > i and k.startswith(target + ".") and k != target + ".class_path"}
        defaults, dropped = _defaults(new.class_path), {}
        for name, held in list(vars(new.init_args).items()):
            if name in later:
                continue
            if name in defaults:
                if _plain(held) != _plain(defaults[name]):
                    dropped[name] = held
                    new.init_args[name] = defaults[name]
            else:
                dropped[name] = held
                del new.init_args[name]
        if dropped:
            short = lambda path: path.rpartition(".")[2]  # noqa: E731
            settings = ", ".join(f"{k}: {v}" for k, v in dropped.items())
            notes.append(f"{target} is {short(new.class_path)} on the command line, not {short(old.class_path)}: "
                         f"the settings given for {short(old.class_path)} ({settings}) are not passed to it; it takes "
                         f"its own defaults and the --{target}.<name> values given after the class.")
    return notes


_STRUCTURE = ("Parser key ", "Problem with given class_path", "Does not validate against any", "Subtypes:", "Errors:",
              "Given value type:", "Given value:")
_UNINFORMATIVE = (re.compile(r"^Expected a <class 'NoneType'>"),
                  re.compile(r"^Import path \S+ does not correspond to a subclass of"))


def short_parse_error(message: str) -> str:
    """jsonargparse's error, nested over many lines, as one sentence: the dotted setting and the reason.

    The setting is the chain of ``Parser key "..."`` lines above the innermost reason (the reason
    under the most keys; alternatives that only say the value is not None, or not another base
    class, are passed over). A message that is one line already is kept.
    """
    lines = [line for line in message.splitlines() if line.strip()]
    if len(lines) <= 1:
        return message.strip()
    stack: list[tuple[int, str]] = []
    best: tuple[int, list[str], str] | None = None
    for line in lines:
        indent, text = len(line) - len(line.lstrip()), line.strip().removeprefix("- ").strip()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        key = re.match(r'^Parser key "([^"]+)":', text)
        if key:
            stack.append((indent, key.group(1)))
            continue
        if text.startswith(_STRUCTURE) or any(p.match(text) for p in _UNINFORMATIVE):
            continue
        path = [k for _, k in stack]
        if best is None or len(path) > len(best[1]):
            best = (len(path), path, text)
    if best is None:
        return lines[-1].strip()
    reason = re.sub(r"<class '([\w.]+)'>", r"\1", best[2])
    reason = re.sub(r"^Expected a (\S+)\. Got value: (.*)$",
                    lambda m: f"expected {'an' if m.group(1)[0] in 'aeiou' else 'a'} {m.group(1)}, got {m.group(2)}",
                    reason)
    reason = reason[:1].lower() + reason[1:]
    setting = ".".join(best[1])
    return f"{setting}: {reason}" if setting else reason

"""RESULTS.md, generated from the stored summaries in ``results/summaries/``.

Each experiment keeps one small JSON summary in the committed folder ``results/summaries/``: what was measured, the
commands, its tables (columns and rows of strings, numbers as measured) and two lines of reading. ``headline.json``
holds the headline table of the papers' claims and the page's opening text. This module renders them, in their
``order``, into RESULTS.md; the history of how each number moved, with every earlier table, is
``docs/results_notebook.md``, which each section points to (a heading of that page, checked to exist).

    python -m benchmarks.results_md           # write RESULTS.md
    python -m benchmarks.results_md --check   # exit 1 if RESULTS.md is not what the summaries give

A benchmark that measures a section's tables again stores them with `store_tables` (the text stays; the reading is
the author's to revisit), then this command regenerates the page.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from pathlib import Path

__all__ = ["SUMMARIES", "NOTEBOOK", "load_headline", "load_sections", "render", "notebook_anchors", "store_tables",
           "main"]

ROOT = Path(__file__).resolve().parent.parent
SUMMARIES = ROOT / "results" / "summaries"
NOTEBOOK = "docs/results_notebook.md"
WIDTH = 118
_SECTION_KEYS = {"order": int, "part": str, "title": str, "what": str, "commands": list, "tables": list,
                 "reading": str, "details": str}
_HEADLINE_KEYS = {"intro": str, "how": str, "columns": list, "rows": list, "note": str}


def _read(path: Path, keys: dict[str, type]) -> dict:
    """One summary file, its keys and their types checked; a one-line error names the file and the key."""
    data = json.loads(path.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path.name}: a summary is a JSON object, got {type(data).__name__}")
    missing = sorted(set(keys) - set(data))
    if missing:
        raise ValueError(f"{path.name}: missing key {missing[0]!r} (a summary has {', '.join(sorted(keys))})")
    unknown = sorted(set(data) - set(keys))
    if unknown:
        raise ValueError(f"{path.name}: unknown key {unknown[0]!r} (a summary has {', '.join(sorted(keys))})")
    for key, kind in keys.items():
        if not isinstance(data[key], kind):
            raise ValueError(f"{path.name}: {key!r} must be a {kind.__name__}, got {type(data[key]).__name__}")
    return data


def _check_table(name: str, columns: list, rows: list) -> None:
    """Every cell a string and every row as long as the columns."""
    if not columns or not all(isinstance(c, str) for c in columns):
        raise ValueError(f"{name}: a table's columns are a non-empty list of strings")
    for k, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != len(columns) or not all(isinstance(c, str) for c in row):
            raise ValueError(f"{name}: row {k} must be {len(columns)} strings, one per column, got {row!r}")


def load_headline(folder: Path = SUMMARIES) -> dict:
    """The headline summary (``headline.json``): ``intro`` and ``how`` (text), the table's ``columns`` and ``rows``
    (strings), the ``note`` under it.

    Raises:
        ValueError: a missing or unknown key, a key of the wrong type, or a row of the wrong length.
    """
    data = _read(folder / "headline.json", _HEADLINE_KEYS)
    _check_table("headline.json", data["columns"], data["rows"])
    return data


def load_sections(folder: Path = SUMMARIES) -> list[dict]:
    """Every section summary of ``folder`` (all ``*.json`` but ``headline.json``), sorted by ``order``.

    A section has ``order`` (int, unique), ``part`` (the ``##`` heading it sits under), ``title``, ``what``,
    ``commands`` (strings), ``tables`` (objects with ``columns``, ``rows`` and an optional ``caption``),
    ``reading`` and ``details`` (a heading of `NOTEBOOK`).

    Raises:
        ValueError: a malformed summary (named with its file and key) or two sections with one ``order``.
    """
    sections = []
    for path in sorted(folder.glob("*.json")):
        if path.name == "headline.json":
            continue
        data = _read(path, _SECTION_KEYS)
        for k, table in enumerate(data["tables"]):
            if not isinstance(table, dict) or not {"columns", "rows"} <= set(table) \
                    or not set(table) <= {"columns", "rows", "caption"}:
                raise ValueError(f"{path.name}: table {k} is an object with columns, rows and an optional caption")
            _check_table(f"{path.name} table {k}", table["columns"], table["rows"])
        if not all(isinstance(c, str) for c in data["commands"]):
            raise ValueError(f"{path.name}: 'commands' must be a list of strings")
        data["name"] = path.stem
        sections.append(data)
    orders = [s["order"] for s in sections]
    twice = sorted({o for o in orders if orders.count(o) > 1})
    if twice:
        raise ValueError(f"two summaries have order {twice[0]}: "
                         + ", ".join(s["name"] for s in sections if s["order"] == twice[0]))
    return sorted(sections, key=lambda s: s["order"])


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def notebook_anchors(text: str) -> dict[str, str]:
    """The headings of a Markdown page (outside fenced code) and their anchors, the first of equal headings."""
    anchors: dict[str, str] = {}
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            heading = line.lstrip("#").strip()
            anchors.setdefault(heading, _slug(heading))
    return anchors


def _wrap(text: str) -> list[str]:
    return textwrap.wrap(text, WIDTH, break_long_words=False, break_on_hyphens=False)


def _table(columns: list[str], rows: list[list[str]]) -> list[str]:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(cells) + " |"
    return [line(columns), line(["---"] * len(columns))] + [re.sub(r"\|  (?=\|)", "| ", line(r)) for r in rows]


def render(headline: dict, sections: list[dict], anchors: dict[str, str]) -> str:
    """RESULTS.md's text from the headline and the sections (in their order); ``anchors`` maps the notebook's
    headings to their anchors (`notebook_anchors`).

    Raises:
        ValueError: a section whose ``details`` is not a heading of the notebook.
    """
    out = ["# Results", ""] + _wrap(headline["intro"]) + ["", "## Headline: the papers' claims", ""]
    out += _table(headline["columns"], headline["rows"]) + [""] + _wrap(headline["note"])
    out += ["", "## How these were measured", ""] + _wrap(headline["how"])
    part = None
    for s in sections:
        if s["details"] not in anchors:
            raise ValueError(f"{s['name']}.json: 'details' names no heading of {NOTEBOOK}: {s['details']!r}")
        if s["part"] != part:
            part = s["part"]
            out += ["", f"## {part}"]
        out += ["", f"### {s['title']}", ""] + _wrap(s["what"])
        if s["commands"]:
            out += [""] + _wrap("Run: " + "; ".join(f"`{c}`" for c in s["commands"]) + ".")
        for table in s["tables"]:
            out += [""] + ([table["caption"] + ":", ""] if table.get("caption") else [])
            out += _table(table["columns"], table["rows"])
        link = f"Details: [the notebook]({NOTEBOOK}#{anchors[s['details']]})."
        out += [""] + _wrap((s["reading"] + " " if s["reading"] else "") + link)
    return "\n".join(out) + "\n"


def store_tables(name: str, tables: list[dict], folder: Path = SUMMARIES) -> Path:
    """Replace the tables of the summary ``name`` (``folder/name.json``) by a new measurement, keeping its text.

    Args:
        name: the summary's file stem (e.g. ``"jet_noise_sweep"``).
        tables: objects with ``columns`` (strings), ``rows`` (lists of strings, one per column, numbers formatted as
            the benchmark prints them) and an optional ``caption``.

    Returns:
        The path written.

    Raises:
        FileNotFoundError: no summary of that name (a new section is written by hand first).
        ValueError: a malformed table.
    """
    path = folder / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(f"no summary {path}; write its text first (see {Path(__file__).name})")
    data = _read(path, _SECTION_KEYS)
    for k, table in enumerate(tables):
        _check_table(f"{name} table {k}", table["columns"], table["rows"])
    data["tables"] = [dict(t) for t in tables]
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    """Write RESULTS.md from the summaries, or with ``--check`` say whether it is up to date (exit 1 if not)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 on a difference")
    parser.add_argument("--summaries", type=Path, default=SUMMARIES, help="the folder of summaries")
    parser.add_argument("--out", type=Path, default=ROOT / "RESULTS.md", help="the page to write or check")
    args = parser.parse_args(argv)
    anchors = notebook_anchors((ROOT / NOTEBOOK).read_text())
    text = render(load_headline(args.summaries), load_sections(args.summaries), anchors)
    if args.check:
        current = args.out.read_text() if args.out.is_file() else ""
        if current != text:
            print(f"{args.out} is not what {args.summaries} gives: run python -m benchmarks.results_md",
                  file=sys.stderr)
            return 1
        print(f"{args.out} is up to date ({len(text.splitlines())} lines)")
        return 0
    args.out.write_text(text)
    print(f"wrote {args.out} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

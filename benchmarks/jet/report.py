"""Tables of the jet-matching benchmark results, for RESULTS.md.

    python -m benchmarks.jet.report [--store]

Reads results/jet_*/... JSON written by the other jet scripts (`benchmarks.jet.noise_sweep`,
`benchmarks.jet.ablation`, `benchmarks.jet.cases`, rollout, timing) and prints tables with the paper's
numbers beside ours. ``--store`` also writes the noise-sweep and ablation tables into their summaries
(``results/summaries/jet_noise_sweep.json``, ``jet_ablation.json``; `benchmarks.results_md.store_tables`),
so that a rerun shows in ``git diff results/summaries`` and ``python -m benchmarks.results_md`` puts it
on the page.
"""
from __future__ import annotations

import argparse
import json

from benchmarks.common import RESULTS, markdown_table
from benchmarks.results_md import SUMMARIES, store_tables

PAPER_V2 = {0.01: 0.0022}
PAPER_V1 = {0.01: 0.0090}


def _load(name: str, file: str | None = None) -> dict | None:
    path = RESULTS / name / (file or f"{name}.json")
    return json.loads(path.read_text()) if path.is_file() else None


def _ms(s: dict, digits: int = 5) -> str:
    return f"{s['mean']:.{digits}f} +- {s['std']:.{digits}f}"


def noise_table(data: dict) -> dict:
    """Table 2 analogue: e_field (visited and full grid) and c_hat per noise level, per variant, as a summary
    table (``columns``, ``rows`` of formatted cells)."""
    columns = ["noise", "v2 e_field visited", "v2 e_field grid", "v2 c_hat (min-max)", "v2 m",
               "paper's v2 (no decay) e_field visited", "v1 e_field visited", "v1 c_hat", "paper v2", "paper v1"]
    rows = []
    for lvl in sorted({r["noise"] for r in data["runs"]}):
        v2, v2p, v1 = (data["summary"].get(f"{v}@{lvl}") for v in ("v2", "v2_paper", "v1"))
        ms = sorted({r["m"] for r in data["runs"] if r["noise"] == lvl and r["variant"] == "v2"})
        rows.append([f"{100 * lvl:g} %", _ms(v2["e_field_visited"]) if v2 else "-", _ms(v2["e_field"]) if v2 else "-",
                     f"{v2['c_hat']['min']:.4f}-{v2['c_hat']['max']:.4f}" if v2 else "-", "/".join(map(str, ms)),
                     _ms(v2p["e_field_visited"]) if v2p else "-", _ms(v1["e_field_visited"]) if v1 else "-",
                     f"{v1['c_hat']['mean']:.4f}" if v1 else "-", str(PAPER_V2.get(lvl, "")),
                     str(PAPER_V1.get(lvl, ""))])
    return {"columns": columns, "rows": rows}


def ablation_table(data: dict) -> dict:
    """Table 4 analogue, as a summary table."""
    return {"columns": ["step", "e_field visited (mean +- std)", "e_field grid", "c_hat"],
            "rows": [[t["name"], _ms(t["e_field_visited"]), _ms(t["e_field"]), f"{t['c_hat']['mean']:.4f}"]
                     for t in data["table"]]}


def cases_table(data: dict) -> str:
    """Cases A, B, C and the double pendulum, per seed."""
    rows = ["| case | seed | e_field visited | e_field grid | c_hat (per damping term) | m |",
            "| --- | --- | --- | --- | --- | --- |"]
    for r in data["runs"]:
        c = ", ".join(f"{v:.4f}" for v in r["c_hat_channels"])
        rows.append(f"| {r['case']} | {r['seed']} | {r['e_field_visited']:.5f} | {r['e_field']:.5f} | {c} | {r['m']} |")
    for case, s in data["summary"].items():
        rows.append(f"| **{case} mean** | | {_ms(s['e_field_visited'])} | {_ms(s['e_field'])} | "
                    f"{s['c_hat']['mean']:.4f} (min {s['c_hat']['min']:.4f}, max {s['c_hat']['max']:.4f}) | |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    """Print every table whose results exist; with ``--store``, store the summary tables among them."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks.jet.report", description=__doc__.splitlines()[0])
    ap.add_argument("--store", action="store_true",
                    help="write the noise-sweep and ablation tables into results/summaries (their text is kept)")
    args = ap.parse_args(argv)
    for title, name, fn in (("Noise sweep", "jet_noise_sweep", noise_table),
                            ("Ablation", "jet_ablation", ablation_table)):
        data = _load(name)
        print(f"### {title}\n")
        if data is None:
            print("(not run)\n")
            continue
        table = fn(data)
        markdown_table(table["columns"], table["rows"])
        if args.store:
            path = store_tables(name, [table], SUMMARIES)
            print(f"stored in {path}; python -m benchmarks.results_md writes the page")
        print()
    data = _load("jet_cases")
    print(f"### Cases\n\n{cases_table(data) if data else '(not run)'}\n")
    roll = _load("jet_rollout")
    if roll:
        print("### Rollout\n")
        print(json.dumps(roll["summary"], indent=2))
    for what in ("run", "macs", "memory", "profile"):
        t = _load("jet_timing", f"{what}.json")
        if t:
            print(f"### Timing: {what}\n")
            print(json.dumps({k: v for k, v in t.items() if k not in ("samples", "top_cumulative", "runs")}, indent=2))


if __name__ == "__main__":
    main()

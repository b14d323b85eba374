"""Markdown tables of the jet-matching benchmark results, for RESULTS.md.

    python -m benchmarks.jet.report

Reads results/jet_*/... JSON written by the other jet_* scripts and prints tables with
the paper's numbers beside ours.
"""
from __future__ import annotations

import argparse
import json

from benchmarks.common import RESULTS

PAPER_V2 = {0.01: 0.0022}
PAPER_V1 = {0.01: 0.0090}


def _load(name: str, file: str | None = None) -> dict | None:
    path = RESULTS / name / (file or f"{name}.json")
    return json.loads(path.read_text()) if path.is_file() else None


def _ms(s: dict, digits: int = 5) -> str:
    return f"{s['mean']:.{digits}f} +- {s['std']:.{digits}f}"


def noise_table(data: dict) -> str:
    """Table 2 analogue: e_field (visited and full grid) and c_hat per noise level, per variant."""
    rows = ["| noise | v2 e_field visited | v2 e_field grid | v2 c_hat (min-max) | v2 m | paper's v2 (no decay) "
            "e_field visited | v1 e_field visited | v1 c_hat | paper v2 | paper v1 |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    levels = sorted({r["noise"] for r in data["runs"]})
    for lvl in levels:
        v2, v2p, v1 = (data["summary"].get(f"{v}@{lvl}") for v in ("v2", "v2_paper", "v1"))
        ms = sorted({r["m"] for r in data["runs"] if r["noise"] == lvl and r["variant"] == "v2"})
        c_range = f"{v2['c_hat']['min']:.4f}-{v2['c_hat']['max']:.4f}" if v2 else "-"
        v1_c = f"{v1['c_hat']['mean']:.4f}" if v1 else "-"
        rows.append(
            f"| {100 * lvl:g} % | {_ms(v2['e_field_visited']) if v2 else '-'} | {_ms(v2['e_field']) if v2 else '-'} | "
            f"{c_range} | {'/'.join(map(str, ms))} | {_ms(v2p['e_field_visited']) if v2p else '-'} | "
            f"{_ms(v1['e_field_visited']) if v1 else '-'} | {v1_c} | {PAPER_V2.get(lvl, '')} | "
            f"{PAPER_V1.get(lvl, '')} |")
    return "\n".join(rows)


def ablation_table(data: dict) -> str:
    """Table 4 analogue."""
    rows = ["| step | e_field visited (mean +- std) | e_field grid | c_hat |", "| --- | --- | --- | --- |"]
    for t in data["table"]:
        rows.append(f"| {t['name']} | {_ms(t['e_field_visited'])} | {_ms(t['e_field'])} | {t['c_hat']['mean']:.4f} |")
    return "\n".join(rows)


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
    """Print every table whose results exist."""
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    for title, name, fn in (("Noise sweep", "jet_noise_sweep", noise_table),
                            ("Ablation", "jet_ablation", ablation_table), ("Cases", "jet_cases", cases_table)):
        data = _load(name)
        print(f"### {title}\n\n{fn(data) if data else '(not run)'}\n")
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

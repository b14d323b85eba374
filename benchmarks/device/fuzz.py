"""libFuzzer over the C trainer's whole public API: executions, findings, and the lines the corpus covers.

``python -m benchmarks.device.fuzz`` (clang-14 with libFuzzer, llvm-14; not part of the tests:
about half an hour on one core) builds ``microcontroller/tests/fuzz_trainer.c`` with ASan and
UBSan (`microcontroller.fuzz`), runs ``--runs`` executions (default 10^6) from the corpus kept
in the repository (``microcontroller/tests/fuzz_corpus/``), and fails on any finding. Then it
runs the repository's corpus, and that corpus with the run's new inputs, once each through a
build with clang's source coverage and prints the share of the lines of ``tu_trainer.c`` and
``tu_calibration.c`` executed (llvm-cov), with the lines never executed. ``--update-corpus``
replaces the repository's corpus with the merge of both, minimized by libFuzzer (``-merge=1``
on coverage edges: the inputs that keep every edge), so the tests' short run starts from it. Saves
``results/c_fuzz/c_fuzz.json``.
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from microcontroller.fuzz import CORPUS, coverage, fuzz, minimize

from benchmarks.common import save

FILES = ("tu_trainer.c", "tu_calibration.c")


def _lines(cov: dict) -> str:
    return ", ".join(f"{name} {cov[name]['percent']:.2f} % ({cov[name]['covered']}/{cov[name]['count']} lines; never: "
                     f"{cov['uncovered'].get(name) or 'none'})" for name in FILES)


def main(argv: list[str] | None = None) -> None:
    """Command line: see the module doc."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.device.fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1_000_000, help="executions (default 10^6)")
    parser.add_argument("--seed", type=int, default=1, help="libFuzzer's seed")
    parser.add_argument("--update-corpus", action="store_true",
                        help="replace microcontroller/tests/fuzz_corpus/ by the minimized merge of it and the new "
                             "inputs")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        new = Path(tmp) / "new"
        stats = fuzz(args.runs, seed=args.seed, out=new)  # raises on a finding
        print(f"{stats['executions']:,} executions in {stats['wall_s']} s, no finding; {stats['coverage_edges']} "
              f"coverage edges; {len(list(new.iterdir()))} new inputs ({stats['command']})")
        kept = coverage([CORPUS])
        grown = coverage([CORPUS, new])
        print(f"lines run by the repository's corpus ({stats['corpus_inputs']} inputs): {_lines(kept)}")
        print(f"lines run by it and the new inputs: {_lines(grown)}")
        out = {"fuzz": stats, "coverage_repository_corpus": kept, "coverage_with_new_inputs": grown}
        if args.update_corpus:
            merged = Path(tmp) / "merged"
            count = minimize([CORPUS, new], merged)
            shutil.rmtree(CORPUS)
            shutil.copytree(merged, CORPUS)
            out["updated_corpus"] = {"inputs": count, "bytes": sum(p.stat().st_size for p in CORPUS.iterdir()),
                                     "coverage": coverage([CORPUS])}
            print(f"wrote {count} inputs to {CORPUS} ({out['updated_corpus']['bytes']:,} bytes): "
                  f"{_lines(out['updated_corpus']['coverage'])}")
    print(f"saved in {save('c_fuzz', out)}")


if __name__ == "__main__":
    main()

"""A short libFuzzer run over the C trainer's whole public API in every test run, from the corpus
kept in the repository (the long run and the line coverage are ``python -m benchmarks.device.fuzz``)."""
from microcontroller.fuzz import CORPUS, fuzz, seed_inputs


def test_arbitrary_api_programs_never_crash_or_corrupt_the_trainer():
    stats = fuzz(runs=5_000, seed=7)  # raises with the fuzzer's report on any finding
    assert stats["executions"] == 5_000
    # the kept corpus (the benchmark's 10^6 executions, minimized) reaches every line of
    # tu_trainer.c: 597 edges; the hand-written seeds alone reach 509
    assert stats["corpus_inputs"] >= len(seed_inputs()) and stats["coverage_edges"] >= 590, stats


def test_the_float16_reservoir_survives_arbitrary_api_programs():
    # restores from changed bytes put arbitrary binary16 patterns (Inf, NaN) into the reservoir
    stats = fuzz(runs=5_000, seed=7, precision="float16")
    assert stats["executions"] == 5_000 and stats["coverage_edges"] >= 590, stats


def test_the_corpus_is_kept_in_the_repository():
    inputs = list(CORPUS.iterdir())
    assert inputs and sum(p.stat().st_size for p in inputs) < 1_000_000

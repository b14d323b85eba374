"""A short libFuzzer run of the stream API in every test run (the long one is a benchmark)."""
from microcontroller.fuzz import fuzz


def test_arbitrary_bytes_never_crash_or_corrupt_the_weights():
    stats = fuzz(runs=5_000, seed=7)  # raises with the fuzzer's report on any finding
    assert stats["executions"] == 5_000
    assert stats["coverage_edges"] > 300  # the inputs reach calibration, windows and updates (empty corpus: ~90)

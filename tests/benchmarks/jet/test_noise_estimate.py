"""The noise-estimate benchmark measures sigma_hat / sigma - 1 per channel."""
from benchmarks.jet.noise_estimate import relative_errors


def test_relative_errors_are_small_per_channel_and_shrink_with_the_record():
    short = relative_errors(0.01, 0, 3.0, 20.0)
    long = relative_errors(0.01, 0, 20.0, 20.0)
    assert len(short) == len(long) == 2
    assert max(abs(e) for e in short) < 0.06 and max(abs(e) for e in long) < 0.02

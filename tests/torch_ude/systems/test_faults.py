"""SensorFaults: independent faults, long dropouts, reproducibility across chunks."""
import numpy as np
import pytest

from torch_ude import SinglePendulum, Simulator
from torch_ude.systems import SensorFaults


def _run(faults, chunks=50, size=40):
    sim = Simulator(SinglePendulum(), noise=0.01, seed=0, rms_horizon=5.0)
    ticks = []
    for c in range(chunks):
        rec = sim.read(size)
        _, t, _ = faults.apply(rec, np.arange(c * size, (c + 1) * size))
        ticks.append(t)
    return np.concatenate(ticks)


def test_dropouts_lose_runs_of_the_given_length_across_chunks():
    ticks = _run(SensorFaults(dropout_rate=0.002, dropout_length=75, seed=3))
    missing = np.diff(ticks) - 1
    runs = missing[missing > 0]
    assert runs.size >= 2 and np.all(runs % 75 == 0)  # back-to-back dropouts merge into multiples
    assert ticks[0] == 0 or ticks[0] % 75 == 0


def test_a_dropout_running_into_the_next_chunk_is_resumed_from_state():
    a = SensorFaults(dropout_rate=0.01, dropout_length=60, seed=5)
    whole = _run(a)
    b = SensorFaults(dropout_rate=0.01, dropout_length=60, seed=5)
    first = _run(b, chunks=25)
    c = SensorFaults(dropout_rate=0.01, dropout_length=60, seed=5)
    c.load_state_dict(b.state_dict())
    sim = Simulator(SinglePendulum(), noise=0.01, seed=0, rms_horizon=5.0)
    sim.read(25 * 40)
    rest = [c.apply(sim.read(40), np.arange(k * 40, (k + 1) * 40))[1] for k in range(25, 50)]
    assert np.array_equal(whole, np.concatenate([first, *rest]))


def test_no_dropout_draws_keep_old_fault_sequences():
    # a config without dropouts draws exactly the random numbers it drew before they existed
    rng = np.random.default_rng(7)
    f = SensorFaults(drop_rate=0.1, seed=7)
    ticks = _run(f, chunks=1, size=200)
    rng.integers(0, 2, size=200)
    for _ in range(3):
        rng.random(200)
    assert np.array_equal(ticks, np.flatnonzero(rng.random(200) >= 0.1))


@pytest.mark.parametrize("kwargs, match", [
    (dict(dropout_rate=1.0), "dropout_rate must be a probability"),
    (dict(dropout_length=0), "dropout_length must be a positive"),
    (dict(drop_rate=-0.1), "drop_rate must be a probability"),
])
def test_bad_fault_settings_are_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SensorFaults(**kwargs)

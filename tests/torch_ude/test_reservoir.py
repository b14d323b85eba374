"""SampleBuffer: reservoir uniformity, FIFO order, fixed memory, checkpoint."""
import numpy as np
import pytest
import torch

from torch_ude.reservoir import SampleBuffer, stored_jets
from torch_ude.stream import StreamSettings


def _items(start, count, n=2):
    v = torch.arange(start, start + count, dtype=torch.float64)
    return v.reshape(-1, 1, 1).expand(count, 3, n).clone()


def test_reservoir_keeps_a_uniform_subset():
    counts = np.zeros(1000)
    for seed in range(200):
        buf = SampleBuffer(50, 2, "reservoir", seed=seed)
        for start in range(0, 1000, 37):
            buf.add(_items(start, min(37, 1000 - start)))
        kept = buf.data[:, 0, 0].long().numpy()
        assert len(set(kept.tolist())) == 50  # no duplicates
        counts[kept] += 1
    # each item should be kept with probability 50/1000: 10 times in 200 runs
    early, late = counts[:500].mean(), counts[500:].mean()
    assert abs(early - 10) < 1.0 and abs(late - 10) < 1.0


def test_chunked_and_one_by_one_insertion_agree():
    a, b = SampleBuffer(20, 2, seed=3), SampleBuffer(20, 2, seed=3)
    a.add(_items(0, 300))
    for i in range(300):
        b.add(_items(i, 1))
    assert a.seen == b.seen == 300
    # same stream, same generator draws: the same subset (order of draws identical)
    assert torch.equal(a.data, b.data)


def test_fifo_holds_the_most_recent_samples():
    buf = SampleBuffer(8, 2, "fifo")
    buf.add(_items(0, 21))
    assert sorted(buf.data[:, 0, 0].long().tolist()) == list(range(13, 21))
    assert buf.full and buf.fill == 8


def test_memory_does_not_grow_and_state_round_trips():
    buf = SampleBuffer(64, 4, seed=1)
    ptr = buf.data.data_ptr()
    for s in range(0, 5000, 50):
        buf.add(_items(s, 50, 4))
    assert buf.data.data_ptr() == ptr and buf.data.shape == (64, 3, 4)
    other = SampleBuffer(64, 4, seed=9)
    other.load_state_dict(buf.state_dict())
    buf.add(_items(5000, 100, 4))
    other.add(_items(5000, 100, 4))
    assert torch.equal(buf.data, other.data)


def test_bad_buffers_are_errors():
    with pytest.raises(ValueError, match="capacity"):
        SampleBuffer(0, 2)
    with pytest.raises(ValueError, match="mode"):
        SampleBuffer(4, 2, mode="lifo")
    with pytest.raises(RuntimeError, match="empty"):
        SampleBuffer(4, 2).sample(2, torch.Generator())


def test_a_forgetting_reservoir_keeps_about_the_last_window():
    cap, window, n = 200, 400, 6000
    buffers = {w: SampleBuffer(cap, 1, seed=3, forget_window=w) for w in (None, window)}
    for start in range(0, n, 50):
        stamps = torch.arange(start, start + 50, dtype=torch.float64).reshape(-1, 1, 1).expand(-1, 3, 1)
        for b in buffers.values():
            b.add(stamps)
    ages = {w: n - b.data[:, 0, 0].numpy() for w, b in buffers.items()}
    # uniform: the slots are spread over the whole history; forgetting: survival (1 - 1/W)^age,
    # a mean age of about W
    assert np.median(ages[None]) > 0.3 * n
    assert 0.5 * window < ages[window].mean() < 1.5 * window
    with pytest.raises(ValueError, match="forget_window must be an integer >= capacity"):
        SampleBuffer(cap, 1, forget_window=cap - 1)


def test_the_span_covers_every_offered_sample_even_after_it_was_replaced():
    buf = SampleBuffer(8, 2, seed=0)
    low, high = buf.span()
    assert bool(torch.isinf(low).all()) and bool(torch.isinf(high).all())
    buf.add(_items(-50, 1))  # the smallest value, soon replaced
    buf.add(_items(0, 500))
    low, high = buf.span()
    assert low.tolist() == [-50.0, -50.0] and high.tolist() == [499.0, 499.0]
    assert float(buf.data[:, 0, 0].min()) > -50  # it left the buffer, not the span
    other = SampleBuffer(8, 2, seed=1)
    other.load_state_dict(buf.state_dict())
    assert [t.tolist() for t in other.span()] == [low.tolist(), high.tolist()]
    old = buf.state_dict()
    del old["low"], old["high"]  # a checkpoint from before the span: the held samples' span
    other.load_state_dict(old)
    assert other.span()[1].tolist() == buf.data[:, 0].amax(0).tolist()


def test_float16_storage_rounds_in_units_of_the_scale_to_nearest_even():
    scale = torch.tensor([0.5, 3.0], dtype=torch.float32)
    rng = np.random.default_rng(0)
    jets = torch.as_tensor(rng.normal(size=(500, 3, 2)) * 10.0 ** rng.uniform(-6, 4, size=(500, 3, 2)),
                           dtype=torch.float32)
    jets[0, 0, 0] = 65520.0 * 0.5  # the first value that overflows binary16, in units of the scale
    stored = stored_jets(jets, scale)
    with np.errstate(over="ignore"):  # (the overflow to inf is meant)
        want = torch.from_numpy((jets / scale).numpy().astype(np.float16).astype(np.float32)) * scale
    assert torch.equal(stored, want) and stored.dtype == torch.float32
    finite = torch.isfinite(stored)
    rel = ((stored - jets) / jets).abs()[finite & (jets.abs() >= 2.0 ** -14 * scale)]
    assert rel.max() <= 2.0 ** -11 * (1 + 2.0 ** -10)  # half an ulp of binary16 (and the float32 roundings)
    assert torch.isinf(stored[0, 0, 0]) and finite.sum() == finite.numel() - 1
    # a buffer stores what `stored` gives; float32 storage leaves the samples as they are
    buffer = SampleBuffer(4, 2, dtype=torch.float32, half_scale=scale)
    assert torch.equal(buffer.stored(jets[:4]), stored[:4])
    same = jets[:4]
    assert SampleBuffer(4, 2, dtype=torch.float32).stored(same) is same
    with pytest.raises(ValueError, match="stream.reservoir_precision must be one of 'float32', 'float16'; got 'int8'"):
        StreamSettings(reservoir_precision="int8").validate()

"""The noise of a recording's outputs (`mhe.data.recording.output_noise_std`): white noise of a known level on a
smooth signal, and the stretches of a gapped recording pooled as if each were read alone."""
import pytest
import torch

from mhe.data.recording import Recording, output_noise_std


def noisy(length: int, std: tuple[float, float], seed: int, breaks: tuple[int, ...] = ()) -> Recording:
    """A slow sine and cosine (T, 2) plus white noise of ``std`` per output, sampled at 0.04 s."""
    g = torch.Generator().manual_seed(seed)
    t = 0.04 * torch.arange(length, dtype=torch.float64)
    y = torch.stack([torch.sin(0.5 * t), torch.cos(0.3 * t)], dim=-1)
    y = y + torch.tensor(std, dtype=torch.float64) * torch.randn(length, 2, generator=g, dtype=torch.float64)
    return Recording(torch.zeros(length, 0), torch.zeros(length, 1), y, 0.04, breaks)


def test_the_estimate_finds_the_noise_level_of_each_output():
    assert output_noise_std(noisy(4000, (0.01, 0.05), seed=0)) == pytest.approx([0.01, 0.05], rel=0.05)


def test_a_gapped_recording_pools_its_stretches_and_no_window_spans_the_gap():
    rec = noisy(300, (0.01, 0.02), seed=1, breaks=(120,))
    parts = [Recording(rec.states[a:b], rec.inputs[a:b], rec.outputs[a:b], rec.dt) for a, b in ((0, 120), (120, 300))]
    alone = [output_noise_std(p) for p in parts]
    w = [len(p.outputs) - 10 for p in parts]  # windows of 2 M + 1 = 11 taps per stretch
    pooled = [((w[0] * a ** 2 + w[1] * b ** 2) / sum(w)) ** 0.5 for a, b in zip(*alone)]
    assert output_noise_std(rec) == pytest.approx(pooled, rel=1e-12)

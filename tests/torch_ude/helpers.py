"""Builders shared by the torch_ude tests."""
import torch

from torch_ude import DoublePendulum, HybridField, SinglePendulum

PLANTS = {"single": SinglePendulum, "double": DoublePendulum}


def random_field(plant: str, case: str, seed: int) -> HybridField:
    """A hybrid field with non-trivial random weights and scales, float64."""
    system = PLANTS[plant]()
    gen = torch.Generator().manual_seed(seed)
    field = HybridField(system.known_field(case), generator=gen, last_layer_gain=1.0)
    n = system.n_states
    field.set_scales(0.5 + torch.rand(n, generator=gen), 0.5 + torch.rand(n, generator=gen))
    with torch.no_grad():
        for _, b in field.mlp.layers:
            b.uniform_(-0.5, 0.5, generator=gen)
    return field


def random_batch(n: int, batch: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random states and derivative targets, each (batch, n)."""
    gen = torch.Generator().manual_seed(100 + seed)
    return tuple(torch.randn(batch, n, generator=gen) for _ in range(3))

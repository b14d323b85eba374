"""PCG32, the random generator of the C trainer, in Python (O'Neill 2014, "XSH RR").

The C port (``microcontroller/src/tu_prng.c``) draws its reservoir slots and minibatch
indices from PCG32; with this class the Python trainer can draw exactly the same
sequence (`torch_ude.reservoir.SampleBuffer` and `torch_ude.stream.StreamEstimator` take
it as ``generator``), which is how whole runs of the two are compared.
"""
from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["Pcg32", "STREAM_RESERVOIR", "STREAM_BATCH"]

_MASK64 = (1 << 64) - 1
_MULT = 6364136223846793005
STREAM_RESERVOIR = 1  # the C trainer's stream constants (tu_trainer.h)
STREAM_BATCH = 2


class Pcg32:
    """A PCG32 generator seeded like ``pcg32_srandom_r(seed, stream)``.

    Args:
        seed: any integer (taken modulo 2^64).
        stream: selects one of 2^63 independent sequences.
    """

    def __init__(self, seed: int, stream: int = 0) -> None:
        self.state = 0
        self.inc = ((int(stream) << 1) | 1) & _MASK64
        self.next_u32()
        self.state = (self.state + int(seed)) & _MASK64
        self.next_u32()

    def next_u32(self) -> int:
        """The next 32 uniformly distributed bits."""
        old = self.state
        self.state = (old * _MULT + self.inc) & _MASK64
        xorshifted = (((old >> 18) ^ old) >> 27) & 0xFFFFFFFF
        rot = old >> 59
        return ((xorshifted >> rot) | (xorshifted << ((32 - rot) & 31))) & 0xFFFFFFFF

    def below(self, bound: int) -> int:
        """A uniform integer in ``[0, bound)`` without modulo bias; ``1 <= bound < 2^32``."""
        if not 1 <= bound <= 0xFFFFFFFF:
            raise ValueError(f"bound must be an integer in [1, 2^32); got {bound!r}.")
        threshold = (0x100000000 - bound) % bound
        while True:
            r = self.next_u32()
            if r >= threshold:
                return r % bound

    def indices(self, count: int, bound: int) -> Tensor:
        """``count`` draws of `below` (e.g. a minibatch of slots), int64 tensor of shape (count,)."""
        return torch.tensor([self.below(bound) for _ in range(count)], dtype=torch.int64)

    def get_state(self) -> tuple[int, int]:
        """``(state, inc)``, enough to continue the sequence exactly."""
        return self.state, self.inc

    def set_state(self, state: tuple[int, int]) -> None:
        """Restore from `get_state`."""
        self.state, self.inc = int(state[0]), int(state[1])

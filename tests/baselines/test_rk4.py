"""The taped RK4 forward pass: same states as the core RK4, tape sized as documented."""
import pytest
import torch

from baselines.rk4 import RK4Tape, rk4_forward
from tests.torch_ude.helpers import random_batch, random_field
from torch_ude.rk4 import rk4_rollout


@pytest.mark.parametrize("plant", ["single", "double"])
def test_forward_matches_core_rk4_and_records_the_stages(plant):
    field = random_field(plant, "A", 2)
    x0 = random_batch(field.n_states, 6, 2)[0]
    h, steps = 0.02, 5
    tape = RK4Tape.allocate(field, steps, 6)
    states = rk4_forward(field, x0, h, tape)
    ref = rk4_rollout(field.evaluate, x0, h, steps)
    assert torch.allclose(states, ref[1:], rtol=1e-14, atol=1e-14)
    assert torch.allclose(tape.stages[:, 0], ref[:-1], rtol=1e-14, atol=1e-14)  # stage 1 of step k is x_k
    with torch.no_grad():
        k1 = field.evaluate(ref[2])
        acts = field.mlp.activations((ref[2] + 0.5 * h * k1) / field.in_scale)
    assert torch.allclose(tape.stages[2, 1], ref[2] + 0.5 * h * k1, rtol=1e-14, atol=1e-14)
    for buf, act in zip(tape.hidden, acts.hidden):
        assert torch.allclose(buf[2, 1], act, rtol=1e-14, atol=1e-14)


def test_tape_bytes_count_stage_states_activations_and_step_states():
    field = random_field("single", "A", 0)
    tape = RK4Tape.allocate(field, 40, 128)
    # per step: 4 stages x (n = 2 state + 16 + 16 hidden) values and the step state (2), float64
    assert tape.nbytes == 40 * 128 * (4 * (2 + 16 + 16) + 2) * 8 == 5_652_480
    assert tape.nbytes == sum(t.nbytes for t in (tape.stages, tape.states, *tape.hidden))


def test_forward_runs_in_float32():
    field = random_field("single", "A", 0).float()
    tape = RK4Tape.allocate(field, 3, 2)
    assert tape.stages.dtype == torch.float32
    assert rk4_forward(field, torch.zeros(2, 2, dtype=torch.float32), 0.02, tape).dtype == torch.float32


def test_bad_sizes_and_mismatched_states_are_rejected():
    field = random_field("single", "A", 0)
    with pytest.raises(ValueError, match="steps must be a positive integer"):
        RK4Tape.allocate(field, 0, 4)
    with pytest.raises(ValueError, match="batch must be a positive integer"):
        RK4Tape.allocate(field, 3, 0)
    tape = RK4Tape.allocate(field, 3, 4)
    with pytest.raises(ValueError, match=r"x0 must have shape \(4, 2\)"):
        rk4_forward(field, torch.zeros(5, 2), 0.02, tape)
    with pytest.raises(ValueError, match="dtype"):
        rk4_forward(field, torch.zeros(4, 2, dtype=torch.float32), 0.02, tape)

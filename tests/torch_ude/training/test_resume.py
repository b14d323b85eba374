"""Extending a run: the cosine schedule recomputed for the new horizon, in closed form."""
import math

import pytest
import torch

from torch_ude.training.resume import check_extends, extend_cosine_schedule


def _schedule(horizon):
    opt = torch.optim.Adam([torch.nn.Parameter(torch.zeros(3))], lr=5e-3)
    return opt, torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=horizon, eta_min=5e-5)


@pytest.mark.parametrize("k", [40, 100])  # mid-run and at the end of a 100-step run
def test_the_resumed_rates_are_those_of_a_run_planned_for_the_new_horizon(k):
    opt, sched = _schedule(100)
    for _ in range(k):
        opt.step()
        sched.step()
    checkpoint = {"lr_schedulers": [sched.state_dict()], "optimizer_states": [opt.state_dict()]}
    assert extend_cosine_schedule(checkpoint, 300)[:2] == (k, 100)
    opt, sched = _schedule(300)  # a fresh process loads the edited states
    opt.load_state_dict(checkpoint["optimizer_states"][0])
    sched.load_state_dict(checkpoint["lr_schedulers"][0])
    rates = []
    for _ in range(k, 300):
        rates.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    closed = [5e-5 + (5e-3 - 5e-5) * (1 + math.cos(math.pi * j / 300)) / 2 for j in range(k, 300)]
    assert rates == pytest.approx(closed, rel=1e-10, abs=0)


def test_the_same_horizon_changes_nothing_and_a_shorter_one_is_an_error():
    opt, sched = _schedule(100)
    checkpoint = {"lr_schedulers": [sched.state_dict()], "optimizer_states": [opt.state_dict()]}
    assert extend_cosine_schedule(checkpoint, 100) is None
    assert checkpoint["lr_schedulers"][0] == sched.state_dict()
    check_extends(100, 101)
    check_extends(100, -1)  # no limit
    with pytest.raises(ValueError, match="max_steps = 100 does not exceed the 100 updates"):
        check_extends(100, 100)

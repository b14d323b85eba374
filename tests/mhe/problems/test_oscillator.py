"""The oscillator's identification problem (mhe.problems.oscillator): one recording for every hold, a start off."""
import pytest
import torch

from mhe.models.hold import HOLDS
from mhe.problems.oscillator import oscillator_problem


def test_every_hold_sees_the_same_recording_from_the_same_start():
    problems = {hold: oscillator_problem(hold, steps=120, noise=0.01, seed=3) for hold in HOLDS}
    first = problems["zoh"]
    for hold, problem in problems.items():
        assert problem.estimator().model.hold.name == hold
        assert torch.equal(problem.logged.outputs, first.logged.outputs)
        assert problem.physics.params.free_names == ("omega", "zeta", "gain")
    errors = first.relative_errors(first.estimator())
    assert errors == pytest.approx({"omega": 0.1, "zeta": 0.6, "gain": 0.1})
    assert not torch.equal(oscillator_problem("zoh", 120, 0.01, seed=4).logged.outputs, first.logged.outputs)

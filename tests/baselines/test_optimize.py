"""Full-batch Adam on the shooting objective: descent, state estimation, divergence handling."""
import pytest
import torch

from baselines.optimize import ShootingAdam
from baselines.shooting import ShootingObjective
from baselines.windows import ShootingWindows
from tests.baselines.helpers import Explosive, short_windows
from tests.torch_ude.helpers import random_field
from torch_ude import HybridField, SinglePendulum


def _pendulum_objective(fit_noise: float = 0.01) -> ShootingObjective:
    system = SinglePendulum()
    field = HybridField.from_seed(system.known_field("A"), 0)
    return ShootingObjective(field, short_windows("single", 10, 8, noise=fit_noise), state_scale=torch.ones(2))


def test_adam_lowers_the_loss_and_follows_the_cosine_schedule():
    objective = _pendulum_objective()
    adam = ShootingAdam(objective, lr=1e-2, iterations=30, lr_final=1e-4, fit_states=False)
    start = float(objective.loss())
    history = adam.run()
    assert history.iterations == 30 and history.skipped == 0
    assert float(objective.loss()) < 0.5 * start
    assert adam.optimizer.param_groups[0]["lr"] == pytest.approx(1e-4)
    assert adam.lr_factor(15) == pytest.approx(0.01 + 0.99 * 0.5)


def test_fit_states_moves_the_shooting_states_and_leaves_them_fixed_otherwise():
    fixed, free = _pendulum_objective(), _pendulum_objective()
    ShootingAdam(fixed, iterations=5, fit_states=False).run()
    ShootingAdam(free, iterations=5, fit_states=True, states_lr=1e-3).run()
    assert torch.equal(fixed.shooting_states, fixed.windows.x0)
    moved = (free.shooting_states - free.windows.x0).abs().max()
    assert 0 < float(moved) <= 1.1 * 5 * 1e-3  # Adam moves each entry by about lr per step at most


def test_weight_decay_applies_to_the_network_only():
    objective = _pendulum_objective()
    adam = ShootingAdam(objective, iterations=3, fit_states=True, weight_decay=0.5)
    assert isinstance(adam.optimizer, torch.optim.AdamW)
    assert [g["weight_decay"] for g in adam.optimizer.param_groups] == [0.5, 0.0]
    assert isinstance(ShootingAdam(_pendulum_objective(), iterations=3).optimizer, torch.optim.Adam)


def test_shooting_states_are_tied_to_their_observations():
    # K = 1 windows whose targets the rollout from the shifted states meets exactly: only
    # the k = 0 term (state minus its observation) is left, so a free state cannot absorb
    # its window's observation.
    field = HybridField.from_seed(SinglePendulum().known_field("A"), 0)
    objective = ShootingObjective(field, short_windows("single", 1, 8), state_scale=torch.ones(2))
    objective.shooting_states += 0.05
    with torch.no_grad():
        objective.windows.targets += objective.residual()[1:]
    result = objective.gradient()
    assert float(result.loss) == pytest.approx(0.05**2 / 2)  # (1/2) of the K + 1 = 2 rows
    assert torch.allclose(result.state_grad, torch.full_like(result.state_grad, 2 * objective.scale * 0.05))
    assert all(float(g.abs().max()) < 1e-15 for g in result.grads)


def _explosive_objective(start: float) -> ShootingObjective:
    field = HybridField(Explosive(), generator=torch.Generator().manual_seed(0))
    x0 = torch.full((3, 2), start)
    windows = ShootingWindows(x0=x0, targets=torch.zeros(10, 3, 2), h=0.05, starts=torch.arange(3).numpy(),
                              candidates=3, straddling=0)
    return ShootingObjective(field, windows)


def test_a_diverging_rollout_skips_the_step_without_touching_the_weights():
    objective = _explosive_objective(start=10.0)  # x' = x^2 blows up at t = 0.1 s < K h = 0.5 s
    before = [p.detach().clone() for p in objective.field.parameters_list()]
    history = ShootingAdam(objective, iterations=4).run()
    assert history.skipped == 4
    for p, b in zip(objective.field.parameters_list(), before):
        assert torch.equal(p, b)


def test_a_step_into_divergence_is_undone_and_the_learning_rate_backs_off():
    objective = _explosive_objective(start=0.5)  # finite at the start (blow-up at t = 2 s)
    adam = ShootingAdam(objective, lr=30.0, iterations=40, backoff=0.5)
    history = adam.run()
    assert history.skipped >= 1
    assert all(bool(torch.isfinite(p).all()) for p in objective.field.parameters_list())
    assert adam.lr_factor(0) == pytest.approx(0.5 ** history.skipped)
    assert torch.isfinite(objective.loss())


def test_bad_settings_are_rejected():
    objective = _pendulum_objective()
    for kwargs, message in [({"lr": 0.0}, "lr must be positive"), ({"iterations": 0}, "iterations must be"),
                            ({"lr": 1e-2, "lr_final": 1e-1}, "lr_final must lie in"),
                            ({"backoff": 0.0}, "backoff must lie in"), ({"states_lr": -1.0}, "states_lr must be"),
                            ({"weight_decay": -0.1}, "weight_decay must be")]:
        with pytest.raises(ValueError, match=message):
            ShootingAdam(objective, **kwargs)


def test_objective_rejects_windows_of_another_plant_and_bad_scales():
    field = random_field("double", "A", 0)
    with pytest.raises(ValueError, match="2-dimensional states but the field has n = 4"):
        ShootingObjective(field, short_windows("single", 3, 2))
    with pytest.raises(ValueError, match="state_scale must be 2 positive"):
        ShootingObjective(random_field("single", "A", 0), short_windows("single", 3, 2), torch.tensor([1.0, 0.0]))

"""The Deep Dynamics model (mhe.peers.deep_dynamics): the physics guard, the physics step, training, bad input."""
from pathlib import Path

import pytest
import torch
import yaml

from mhe import Bound, SingleTrackVehicle, StateSpaceModel
from mhe.data.recording import Recording
from mhe.peers.deep_dynamics import (DeepDynamics, DeepDynamicsSettings, coefficient_summary, ekf_deep_dynamics,
                                     fit_deep_dynamics, history_rows, next_state_errors, rollout, usable_samples)
from tests.mhe.datasets import bayesrace_problem

CONFIG = Path(__file__).resolve().parents[3] / "configs" / "mhe_iac_physics_gn.yaml"
TINY = DeepDynamicsSettings(history=4, gru_width=5, gru_layers=2, dense_width=16, dense_layers=2, epochs=30,
                            batch_size=32)


def iac_physics(**changes) -> SingleTrackVehicle:
    """The IAC config's single track: its start values, its 16 identified parameters and their bounds."""
    args = yaml.safe_load(CONFIG.read_text())["data"]["init_args"]["problem"]["physics"]["init_args"]
    values = {**args["values"], **changes}
    bounds = {n: Bound(**b) for n, b in args["bounds"].items()}
    return SingleTrackVehicle(values, identify=args["identify"], bounds=bounds, abs_vx=True)


def raw_of(physics: SingleTrackVehicle) -> torch.Tensor:
    """The guard's pre-sigmoid outputs that give the physics' current values."""
    params = physics.params
    return torch.tensor([params.bounds[n].to_raw(float(params()[n])) for n in params.free_names])


def states_and_inputs(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Racing-like states (vx 10-20 m/s, small vy and omega) and inputs (steer, pedal)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.stack([10 + 10 * torch.rand(n, generator=g), 0.3 * torch.randn(n, generator=g),
                     0.1 * torch.randn(n, generator=g)], dim=-1)
    u = torch.stack([0.05 * torch.randn(n, generator=g), torch.rand(n, generator=g) * 2 - 1], dim=-1)
    return x, u


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_guard_keeps_every_coefficient_inside_its_bounds_for_extreme_inputs(dtype):
    physics = iac_physics()
    model = DeepDynamics(physics, 0.04, "euler", TINY).to(dtype)
    with torch.no_grad():
        for p in model.network_parameters():
            p.mul_(1e3)
    rows = torch.cat([torch.full((2, 4, 5), 1e6), torch.full((2, 4, 5), -1e6), torch.randn(2, 4, 5) * 1e3])
    theta = model.coefficients(rows.to(dtype))
    lo = torch.tensor([physics.params.bounds[n].lower for n in model.names], dtype=dtype)
    hi = torch.tensor([physics.params.bounds[n].upper for n in model.names], dtype=dtype)
    assert theta.shape == (6, 16) and bool(torch.isfinite(theta).all())
    assert bool(((theta >= lo) & (theta <= hi)).all())
    assert bool((theta == lo).any() | (theta == hi).any())  # saturated: the extremes are reached, not crossed


@pytest.mark.parametrize("discretization", ["euler", "rk4"])
def test_a_constant_guard_output_gives_exactly_the_single_track_step(discretization):
    physics = iac_physics()
    model = DeepDynamics(physics, 0.04, discretization, TINY)
    with torch.no_grad():
        model.guard.weight.zero_()
        model.guard.bias.copy_(raw_of(physics))
    x, u = states_and_inputs(50)
    rows = history_rows(x, u, torch.arange(3, 50), 4)
    reference = StateSpaceModel(iac_physics(), dt=0.04, measured=(0, 2), discretization=discretization)
    expected = reference.step(x[3:], u[3:], torch.zeros_like(x[3:]))
    values = torch.stack([physics.params()[n] for n in model.names]).expand(len(rows), -1)
    # the physics step at the field's coefficients is the single-track step, bit for bit
    torch.testing.assert_close(model.step(x[3:], u[3:], values), expected, rtol=0.0, atol=0.0)
    # the guard's batched sigmoid/exp reproduces the coefficients to the last bits (measured: <= 1.4e-14 on Bf = 29.75)
    torch.testing.assert_close(model.coefficients(rows), values, rtol=1e-15, atol=0.0)
    torch.testing.assert_close(model(rows), expected, rtol=1e-14, atol=1e-15)
    # the rollout's first step is that step; the later ones use the predictions as history
    future = u[4:50][None].expand(1, -1, -1)[:, :5]
    states = rollout(model, rows[:1], future)
    assert states.shape == (1, 6, 3)
    torch.testing.assert_close(states[0, 0], model(rows[:1])[0], rtol=0.0, atol=0.0)
    torch.testing.assert_close(states[0, 1], reference.step(states[0, :1], u[4:5], torch.zeros(1, 3))[0],
                               rtol=1e-14, atol=1e-15)


def test_training_lowers_the_one_step_loss_on_a_synthetic_recording():
    truth = StateSpaceModel(iac_physics(Df=2000.0, Dr=1500.0, Cm1=4000.0), dt=0.04, measured=(0, 2),
                            discretization="euler")
    _, u = states_and_inputs(400, seed=1)
    x = [torch.tensor([15.0, 0.0, 0.0])]
    with torch.no_grad():
        for k in range(399):
            x.append(truth.step(x[-1][None], u[k:k + 1], torch.zeros(1, 3))[0])
    x = torch.stack(x)
    last = usable_samples(len(x), 4)
    rows, targets = history_rows(x, u, last, 4).float(), x[last + 1].float()
    model = DeepDynamics(iac_physics(), 0.04, "euler", TINY).float()
    model.set_scale(rows)
    with torch.no_grad():
        before = float(((model(rows) - targets) ** 2).sum(-1).mean())
    fit = fit_deep_dynamics(model, rows, targets)
    with torch.no_grad():
        after = float(((model(rows) - targets) ** 2).sum(-1).mean())
    assert fit.samples == (len(rows) - int(0.2 * len(rows)), int(0.2 * len(rows)))
    assert 1 <= fit.best_epoch <= TINY.epochs and len(fit.train_loss) == TINY.epochs
    assert fit.holdout_loss[fit.best_epoch - 1] == min(fit.holdout_loss)
    assert after < 0.5 * before and fit.train_loss[-1] < fit.train_loss[0]


def test_usable_samples_need_a_full_history_and_the_samples_ahead_in_one_segment():
    assert usable_samples(10, 4).tolist() == [3, 4, 5, 6, 7, 8]
    assert usable_samples(10, 4, ahead=3).tolist() == [3, 4, 5, 6]
    # a break at row 6: no history or target spans rows 5 -> 6
    assert usable_samples(12, 3, ahead=1, breaks=(6,)).tolist() == [2, 3, 4, 8, 9, 10]
    rows = history_rows(torch.arange(10.0)[:, None], -torch.arange(10.0)[:, None], torch.tensor([3, 9]), 4)
    assert rows[:, :, 0].tolist() == [[0, 1, 2, 3], [6, 7, 8, 9]] and rows[1, -1, 1] == -9


def test_bad_input_gives_clear_errors():
    model = DeepDynamics(iac_physics(), 0.04, "euler", TINY)
    with pytest.raises(ValueError, match=r"rows must have shape \(B, 4, 5\).*got \(2, 3, 5\)"):
        model(torch.zeros(2, 3, 5))  # a history shorter than the model needs
    with pytest.raises(ValueError, match=r"rows must have shape \(B, 4, 5\).*got \(4, 5\)"):
        model(torch.zeros(4, 5))
    with pytest.raises(ValueError, match=r"rows must have shape \(B, 4, 5\).*got \(2, 4, 3\)"):
        model.coefficients(torch.zeros(2, 4, 3))
    with pytest.raises(ValueError, match="has no stretch of history=15 rows plus 1 ahead"):
        usable_samples(15, 15)
    with pytest.raises(ValueError, match="needs history=4 rows before it"):
        history_rows(torch.zeros(10, 3), torch.zeros(10, 2), torch.tensor([2, 5]), 4)
    with pytest.raises(ValueError, match="need the same T"):
        history_rows(torch.zeros(10, 3), torch.zeros(9, 2), torch.tensor([5]), 4)
    with pytest.raises(ValueError, match=r"targets must have shape \(6, 3\)"):
        fit_deep_dynamics(model, torch.zeros(6, 4, 5), torch.zeros(6, 2))
    with pytest.raises(ValueError, match="leave 1 to train on"):
        fit_deep_dynamics(model, torch.zeros(1, 4, 5), torch.zeros(1, 3))
    with pytest.raises(ValueError, match=r"inputs must have shape \(2, S - 1, 2\)"):
        rollout(model, torch.zeros(2, 4, 5), torch.zeros(2, 3))
    with pytest.raises(ValueError, match="history must be an integer >= 1; got 0"):
        DeepDynamicsSettings(history=0)
    with pytest.raises(ValueError, match=r"holdout must lie in \[0, 1\)"):
        DeepDynamicsSettings(holdout=1.0)
    with pytest.raises(ValueError, match="state_weights needs one weight per state, 3"):
        DeepDynamics(iac_physics(), 0.04, "euler", DeepDynamicsSettings(state_weights=(1.0, 1.0)))
    with pytest.raises(ValueError, match=r"needs two bounds.*\['Cm2'\]"):
        values = {n: float(v.detach()) for n, v in iac_physics().params().items()}
        DeepDynamics(SingleTrackVehicle(values, identify=["Cm2"], bounds={"Cm2": Bound(lower=0.0)}), 0.04)
    with pytest.raises(ValueError, match="discretization must be one of"):
        DeepDynamics(iac_physics(), 0.04, "midpoint")


def test_next_state_errors_score_the_measured_states_against_the_next_outputs():
    x, u = states_and_inputs(20, seed=3)
    x = x.double()
    rec = Recording(x, u.double(), x[:, [0, 2]] + 0.1, 0.04)  # outputs 0.1 off the logged vx and omega
    last = torch.arange(5, 15)
    nxt = x[last + 1].clone()
    nxt[:, 1] += 0.2  # vy, unmeasured, 0.2 off
    out = next_state_errors(nxt, rec, (0, 2), x, last)
    assert out["mse"] == pytest.approx(0.01) and out["rmse"] == pytest.approx([0.1, 0.1]) and out["samples"] == 10
    assert out["state_mse_vs_ekf"] == pytest.approx([0.0, 0.04, 0.0])
    assert out["hidden_rmse_vs_logged"] == pytest.approx([0.2])
    unlogged = Recording(torch.zeros(20, 0), rec.inputs, rec.outputs, 0.04)
    assert "hidden_rmse_vs_logged" not in next_state_errors(nxt, unlogged, (0, 2), x, last)


def test_the_coefficient_summary_is_taken_over_the_samples():
    theta = torch.tensor([[1.0, 10.0], [3.0, 10.0]], dtype=torch.float32)
    out = coefficient_summary(("Bf", "Df"), theta)
    assert out["Bf"] == pytest.approx({"mean": 2.0, "std": 2 ** 0.5, "min": 1.0, "max": 3.0})
    assert out["Df"] == {"mean": 10.0, "std": 0.0, "min": 10.0, "max": 10.0}


def test_the_pipeline_trains_on_the_ekf_estimates_of_the_problems_recording(tmp_path):
    problem = bayesrace_problem()
    settings = DeepDynamicsSettings(history=4, gru_width=3, gru_layers=1, dense_width=8, dense_layers=1, epochs=2,
                                    batch_size=64)
    out = ekf_deep_dynamics(problem, settings, tmp_path)
    rec = problem.recording
    assert torch.equal(out.last, usable_samples(len(rec.outputs), 4, 1, rec.breaks))
    assert out.model.guard.weight.dtype == torch.float32 and not out.model.training
    assert len(out.fit.train_loss) == 2 and out.wall_s >= out.ekf.wall_s + out.fit.wall_s > 0
    # the same seed and estimates give the same training (to float32 rounding of the threads' sums)
    again = ekf_deep_dynamics(problem, settings, tmp_path, log_every=1)
    assert again.fit.train_loss == pytest.approx(out.fit.train_loss, rel=1e-4)

"""The hand-derived discrete adjoint against complex step and against autograd."""
import numpy as np
import pytest
import torch

from baselines.adjoint import rk4_adjoint
from baselines.gradcheck import adjoint_errors, autograd_gradient, complex_copy, relative_error
from baselines.rk4 import RK4Tape, rk4_forward
from baselines.shooting import ShootingObjective
from baselines.windows import ShootingWindows
from tests.baselines.helpers import short_windows
from tests.torch_ude.helpers import random_field, random_input_field, set_test_envelope, variant_field
from torch_ude.rk4 import rk4_rollout


def _check_against_complex_step(field, windows):
    """Assert the discrete adjoint's parameter and state gradients equal complex step (1e-12); return the objective."""
    scale = torch.tensor([0.5, 1.5, 4.0, 6.0][:field.n_states])
    objective = ShootingObjective(field, windows, state_scale=scale)
    objective.shooting_states += 0.01  # off the observations, so the state gradient is not special
    errors = adjoint_errors(objective, ["complex_step"])
    assert set(errors) == {"theta_vs_complex_step", "states_vs_complex_step"}
    assert max(errors.values()) <= 1e-12
    return objective


@pytest.mark.parametrize("steps", [1, 3, 5, 10])
def test_adjoint_matches_complex_step(steps):
    field = random_field("single", "A", steps)
    windows = short_windows("single", steps, 3, seed=steps)
    objective = _check_against_complex_step(field, windows)
    reference = ShootingObjective(complex_copy(field), windows, objective.state_scale)
    reference.shooting_states.copy_(objective.shooting_states)
    assert torch.allclose(reference.loss().real, objective.loss(), rtol=1e-14, atol=0.0)


@pytest.mark.parametrize("plant,case", [("single", "A"), ("double", "C")])
def test_adjoint_errors_against_both_references_are_at_rounding_level(plant, case):
    objective = ShootingObjective(random_field(plant, case, 2), short_windows(plant, 4, 3, seed=2))
    objective.shooting_states += 0.01
    errors = adjoint_errors(objective)
    assert list(errors) == ["theta_vs_complex_step", "states_vs_complex_step", "theta_vs_autograd",
                            "states_vs_autograd"]
    assert max(errors.values()) <= 1e-12
    assert relative_error(torch.tensor([3.0, 4.0]), torch.tensor([0.0, 5.0])) == pytest.approx(10**0.5 / 5)


def test_adjoint_errors_reject_an_unknown_reference_and_autograd_with_inputs():
    objective = ShootingObjective(random_field("single", "A", 0), short_windows("single", 2, 2))
    with pytest.raises(ValueError, match="references must be among"):
        adjoint_errors(objective, ["finite_differences"])
    field = random_input_field("torque", 0)
    with pytest.raises(ValueError, match="windows hold recorded inputs"):
        autograd_gradient(ShootingObjective(field, _input_windows(field, 2, 2, seed=0)))


def test_adjoint_of_a_field_with_the_linear_term_matches_complex_step():
    field = random_field("single", "A", 3, linear=True)
    _check_against_complex_step(field, short_windows("single", 3, 3, seed=3))


@pytest.mark.parametrize("plant,case,linear", [("single", "C", False), ("double", "A", False), ("double", "A", True)])
def test_adjoint_matches_autograd_through_the_unrolled_rk4(plant, case, linear):
    field = random_field(plant, case, 7, linear)
    steps, windows = 6, short_windows(plant, 6, 5, seed=1)
    tape = RK4Tape.allocate(field, steps, windows.batch)
    states = rk4_forward(field, windows.x0, windows.h, tape)
    state_bar = torch.randn(states.shape)
    grads, x0_bar = rk4_adjoint(field, tape, windows.h, state_bar)

    x0 = windows.x0.clone().requires_grad_(True)
    params = field.parameters_list()
    rollout = rk4_rollout(field.evaluate, x0, windows.h, steps)[1:]
    assert torch.allclose(rollout, states, rtol=1e-13, atol=1e-13)
    ref = torch.autograd.grad((rollout * state_bar).sum(), [*params, x0])
    for g, r in zip([*grads, x0_bar], ref):
        assert torch.allclose(g, r, rtol=1e-11, atol=1e-13)


def test_adjoint_rejects_a_cotangent_of_the_wrong_shape():
    field = random_field("single", "A", 0)
    tape = RK4Tape.allocate(field, 4, 2)
    with pytest.raises(ValueError, match="shape of the taped states"):
        rk4_adjoint(field, tape, 0.02, torch.zeros(3, 2, 2))


def _input_windows(field, steps, batch, seed):
    """Windows with random observations and recorded inputs for a field with inputs."""
    gen = torch.Generator().manual_seed(seed)
    n, m = field.n_states, field.n_inputs
    obs = torch.randn(steps + 1, batch, n, generator=gen)
    return ShootingWindows(x0=obs[0].clone(), targets=obs[1:].clone(), h=0.02, starts=np.arange(batch),
                           candidates=batch, straddling=0, inputs=torch.randn(steps + 1, batch, m, generator=gen))


@pytest.mark.parametrize("model,linear", [("torque", False), ("coupled", False), ("torque", True), ("coupled", True),
                                          ("torque", "affine"), ("coupled", "affine")])
def test_adjoint_with_inputs_matches_complex_step(model, linear):
    field = random_input_field(model, 4, linear)
    windows = _input_windows(field, 4, 3, seed=4)
    _check_against_complex_step(field, windows)


@pytest.mark.parametrize("linear", [False, True, "affine"])
def test_adjoint_with_inputs_matches_autograd_through_rk4_with_interpolated_inputs(linear):
    field = random_input_field("coupled", 7, linear)
    steps, windows = 5, _input_windows(field, 5, 4, seed=2)
    tape = RK4Tape.allocate(field, steps, windows.batch)
    states = rk4_forward(field, windows.x0, windows.h, tape, windows.inputs)
    state_bar = torch.randn(states.shape)
    grads, x0_bar = rk4_adjoint(field, tape, windows.h, state_bar)

    # reference: RK4 written out, the input linear in time over each step (first-order hold)
    x0 = windows.x0.clone().requires_grad_(True)
    u, h, x, out = windows.inputs, windows.h, x0, []
    for k in range(steps):
        f = lambda z, c: field.evaluate(z, u[k] + c * (u[k + 1] - u[k]))  # noqa: E731
        k1 = f(x, 0.0)
        k2 = f(x + 0.5 * h * k1, 0.5)
        k3 = f(x + 0.5 * h * k2, 0.5)
        k4 = f(x + h * k3, 1.0)
        x = x + h / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
        out.append(x)
    rollout = torch.stack(out)
    assert torch.allclose(rollout, states, rtol=1e-13, atol=1e-13)
    ref = torch.autograd.grad((rollout * state_bar).sum(), [*field.parameters_list(), x0])
    for g, r in zip([*grads, x0_bar], ref):
        assert torch.allclose(g, r, rtol=1e-11, atol=1e-13)


def test_rk4_forward_asks_for_the_inputs_of_a_field_with_inputs():
    field = random_input_field("torque", 0)
    tape = RK4Tape.allocate(field, 3, 2)
    with pytest.raises(ValueError, match=r"pass inputs of shape \(4, 2, 1\)"):
        rk4_forward(field, torch.zeros(2, 2), 0.02, tape)
    with pytest.raises(ValueError, match="the field has no inputs"):
        plain = random_field("single", "A", 0)
        rk4_forward(plain, torch.zeros(2, 2), 0.02, RK4Tape.allocate(plain, 3, 2), torch.zeros(4, 2, 1))


@pytest.mark.parametrize("known,periodic,physical", [("single", (0,), False), ("single", (0,), True),
                                                     ("torque", (0,), True), ("coupled", (1,), False),
                                                     ("double_torque", (0, 1), True)])
def test_adjoint_with_periodic_states_an_envelope_and_physical_parameters_matches_complex_step(known, periodic,
                                                                                                physical):
    """The taped input map, the fade (the tape then keeps the network's outputs) and the trained
    physical parameters' gradient (the last one) against complex step."""
    field = variant_field(known, 5, periodic, linear="affine" if "torque" in known else False, physical=physical)
    windows = short_windows("single", 4, 3, seed=5) if field.n_inputs == 0 else _input_windows(field, 4, 3, seed=5)
    x = windows.x0
    u = windows.inputs[0] if field.n_inputs else None
    set_test_envelope(field, torch.cat([x, windows.targets.reshape(-1, x.shape[1])]), None if u is None else
                      torch.cat([u, windows.inputs[1:].reshape(-1, u.shape[1])]))
    assert RK4Tape.allocate(field, 4, 3).outputs is not None
    _check_against_complex_step(field, windows)

"""Free-run simulation with each input hold against scipy's linear simulation, stretches between breaks, the
output-error refinement on the simulated two-tank process (unmeasured upper tank, overflow, clipped sensor), its
errors, and both criteria in the run's metrics (issue 33, item 3)."""
import json

import numpy as np
import pytest
import scipy.signal
import torch

from mhe import MHESettings, MovingHorizonEstimator, NeuralResidual, Recording, StateSpaceModel
from mhe.models.output import SensorOutput
from mhe.outer.free_run import OutputErrorSettings, free_run_rmse, refine_output_error, simulate_free_run
from mhe.problems.oscillator import LinearOscillator, multisine
from mhe.problems.two_tank import TRUTH, TwoTanks, TwoTankSimulation

OMEGA, ZETA, GAIN, DT = 2.0, 0.1, 1.5, 0.02


def _lsim(u, x0, interp):
    sys = scipy.signal.StateSpace([[0.0, 1.0], [-OMEGA ** 2, -2 * ZETA * OMEGA]], [[0.0], [GAIN]], np.eye(2),
                                  np.zeros((2, 1)))
    t = np.arange(len(u)) * DT
    return scipy.signal.lsim(sys, u, t, X0=x0, interp=interp)[2]


@pytest.mark.parametrize("hold, interp", [("zoh", False), ("foh", True)])
def test_the_free_run_of_each_hold_is_scipys_simulation_of_that_input(hold, interp):
    u = multisine(0.8, 6, seed=1)(torch.arange(400, dtype=torch.float64) * DT)
    x0 = (0.3, -0.2)
    model = StateSpaceModel(LinearOscillator(OMEGA, ZETA, GAIN), dt=DT, hold=hold)
    with torch.no_grad():
        run = simulate_free_run(model, x0, u)
    want = _lsim(u.numpy()[:, 0], x0, interp)
    other = _lsim(u.numpy()[:, 0], x0, not interp)
    scale = np.abs(want).max()
    err = np.abs(run.states.numpy() - want).max()
    assert err <= 1e-6 * scale  # RK4 at omega dt = 0.04
    assert np.abs(run.states.numpy() - other).max() >= 100 * err  # the other hold is another input
    assert torch.equal(run.outputs, run.states[:, :1])


def test_each_stretch_between_breaks_starts_from_its_own_state_and_shapes_are_checked():
    model = StateSpaceModel(LinearOscillator(OMEGA, ZETA, GAIN), dt=DT, hold="foh")
    u = torch.linspace(-1.0, 1.0, 60, dtype=torch.float64)[:, None]
    x0 = torch.tensor([[0.3, 0.0], [-0.5, 1.0]], dtype=torch.float64)
    with torch.no_grad():
        run = simulate_free_run(model, x0, u, breaks=(25,))
        tail = simulate_free_run(model, x0[1], u[25:])
    assert torch.equal(run.states[25], x0[1]) and torch.equal(run.states[25:], tail.states)
    with pytest.raises(ValueError, match=r"x0 needs one state of 2 numbers per stretch \(2\)"):
        simulate_free_run(model, x0[0], u, breaks=(25,))
    with pytest.raises(ValueError, match=r"inputs must have shape \(T, n_u\) = \(T, 1\)"):
        simulate_free_run(model, x0[0], u.repeat(1, 2))


@pytest.fixture(scope="module")
def tanks():
    return TwoTankSimulation(steps=500, seed=0).record()


def _tank_estimator(rec, residual=None, identify=("k", "a1", "a2")):
    physics = TwoTanks(k=0.07, a1=0.14, a2=0.17, identify=identify)
    sensor = SensorOutput((1,), offset=[0.0], identify=("offset_0",), limits=[(0.0, 10.0)], width=0.02)
    model = StateSpaceModel(physics, residual, dt=rec.dt, output=sensor)
    return MovingHorizonEstimator(model, MHESettings(10, (0.002, 0.002), (0.05,)), (5.0, 5.0), (3.0, 3.0))


def test_the_output_error_refinement_reaches_the_noise_floor_of_the_two_tank_process(tanks):
    rec, noise = tanks, 0.05
    assert bool((rec.outputs >= 10.0).any()) and bool((rec.states[:, 0] > TRUTH["rim"]).any())  # clips and overflows
    est = _tank_estimator(rec)
    res = refine_output_error(est, rec, OutputErrorSettings(segment=10))
    assert res.success and res.initial_states.shape == (1, 2)
    assert float(res.rmse_after) <= 1.1 * noise < float(res.rmse_before)
    values = est.parameter_values()
    for name in ("k", "a1", "a2"):
        assert values[name] == pytest.approx(TRUTH[name], rel=0.02)
    assert values["offset_0"] == pytest.approx(0.3, abs=0.02)
    with torch.no_grad():  # the reported RMSE is the free run's from the estimated initial state
        run = simulate_free_run(est.model, res.initial_states, rec.inputs)
    assert float(free_run_rmse(run, rec.outputs)) == pytest.approx(float(res.rmse_after), rel=1e-9)


def test_bad_refinements_are_one_line_errors_naming_the_setting(tanks):
    with pytest.raises(ValueError, match="simulation.segment .* must be an integer >= 1; got 0"):
        OutputErrorSettings(segment=0)
    with pytest.raises(ValueError, match="this model has a neural residual"):
        refine_output_error(_tank_estimator(tanks, NeuralResidual(2, 1, width=4)), tanks)
    with pytest.raises(ValueError, match="needs identified parameters"):
        est = _tank_estimator(tanks, identify=())
        est.model.output_map = None
        refine_output_error(est, tanks)
    with pytest.raises(ValueError, match="The recording has 2 inputs"):
        refine_output_error(_tank_estimator(tanks), Recording(tanks.states, tanks.inputs.repeat(1, 2), tanks.outputs,
                                                               tanks.dt))


def test_a_run_with_the_simulation_criterion_writes_both_criteria_to_its_metrics(tmp_path):
    from torch_ude.cli import main

    main(["fit", "--config", "configs/mhe_two_tank_gn.yaml", "--trainer.max_steps", "2",
          "--data.problem.recording.init_args.steps", "300", "--trainer.enable_progress_bar", "false",
          "--trainer.default_root_dir", str(tmp_path), "--model.solver.build_dir", str(tmp_path / "build")])
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    cr = metrics["criteria"]
    assert set(cr) == {"J_pem", "J_refined", "free_run_rmse_pem", "free_run_rmse_refined", "free_run_iterations",
                       "free_run_success"}
    assert cr["free_run_success"] and cr["free_run_rmse_refined"] < cr["free_run_rmse_pem"]
    assert metrics["parameters"]["k"] != 0.07 and metrics["status"] == "finished"
    # the run's last checkpoint holds the refined model, as field.json does (torch-ude score rebuilds from it)
    from torch_ude.score import pem_run_estimator
    rebuilt = pem_run_estimator(tmp_path).model.physics.params()
    field = json.loads((tmp_path / "field.json").read_text())["parameters"]
    assert {n: float(v) for n, v in rebuilt.items()} == pytest.approx(field, rel=1e-12)

"""The single pendulum as a PEM–MHE model and recording (mhe.problems.pendulum)."""
import numpy as np
import pytest
import torch

from mhe import StateSpaceModel
from mhe.data.windows import make_windows
from mhe.models.casadi_model import CasadiDynamics
from mhe.models.pendulum import PendulumPhysics, known_pendulum
from mhe.problems.pendulum import PendulumStream
from torch_ude.systems import DoublePendulum, FrictionPendulum, SinglePendulum
from torch_ude.systems.simulate import simulate


@pytest.mark.parametrize("case", ["A", "B", "C"])
def test_known_model_is_the_jet_matching_known_field(case):
    system = SinglePendulum()
    physics = known_pendulum(system, case)
    x = torch.randn(64, 2)
    expected = system.known_field(case)(x)
    assert torch.allclose(physics(x, x.new_zeros(64, 0)), expected, rtol=0, atol=1e-14)


def test_identified_damping_starts_where_asked_and_is_the_only_free_parameter():
    physics = known_pendulum(SinglePendulum(), "A", identify_damping=True, damping_start=0.2)
    assert physics.params.free_names == ("c",)
    assert float(physics.params()["c"].detach()) == pytest.approx(0.2, abs=1e-15)


def test_casadi_step_equals_torch_step(tmp_path):
    model = StateSpaceModel(PendulumPhysics(9.81, 0.4, identify_damping=True), dt=0.02, measured=(0,))
    dyn = CasadiDynamics(model, tmp_path)
    x = torch.tensor([[0.7, -1.3]])
    expected = model.step(x, x.new_zeros(1, 0), x.new_zeros(1, 2))
    got = dyn.step(x.numpy().T, np.zeros((0, 1)), np.zeros((2, 1)), CasadiDynamics.parameter_values(model))
    assert np.abs(np.asarray(got).T - expected.detach().numpy()).max() < 1e-14


def test_other_plants_and_bad_settings_are_clear_errors():
    with pytest.raises(ValueError, match="DoublePendulum.*DoublePendulumField"):
        known_pendulum(DoublePendulum(), "A")
    with pytest.raises(ValueError, match="case"):
        known_pendulum(SinglePendulum(), "D")
    with pytest.raises(ValueError, match="k = g/L"):
        PendulumPhysics(-1.0)
    with pytest.raises(ValueError, match="divide"):
        PendulumStream(SinglePendulum(), 0.01, 0, rate=300.0)
    with pytest.raises(ValueError, match="measured"):
        PendulumStream(SinglePendulum(), 0.01, 0, measured=(2,))


def test_friction_plant_known_model_has_no_friction():
    physics = known_pendulum(FrictionPendulum(), "A")
    assert float(physics.params()["c"].detach()) == 0.0


def test_stream_is_the_jet_matching_stream_decimated_and_windows_skip_reexcitations():
    system = SinglePendulum()
    source = PendulumStream(system, 0.01, 3, duration=12.0, rate=50.0, measured=(0,))
    rec = source.record()
    full = simulate(system, 12.0, fs=1000.0, noise=0.01, seed=3)
    assert rec.dt == pytest.approx(0.02)
    assert np.array_equal(rec.outputs.numpy()[:, 0], full.y[::20, 0])
    assert rec.inputs.shape == (rec.outputs.shape[0], 0)
    segment = full.segment[::20]
    assert list(rec.breaks) == (np.flatnonzero(np.diff(segment)) + 1).tolist()
    assert len(rec.breaks) >= 2  # re-excitations every 2.5-5 s
    windows = make_windows(rec.inputs, rec.outputs, 20, 5, rec.breaks)
    for start in windows.start.tolist():
        assert len(set(segment[start:start + 21].tolist())) == 1
    assert source.truth == {"c": system.damping}


def test_the_problem_is_told_the_streams_noise_and_describes_itself_in_json():
    import json

    from mhe.problems.pendulum import pendulum_problem

    problem = pendulum_problem(SinglePendulum(), "A", 0.01, 1, duration=8.0, measured=(0, 1))
    sigma = simulate(SinglePendulum(), 8.0, fs=1000.0, noise=0.01, seed=1).sigma
    assert problem.mhe.measurement_std == pytest.approx(tuple(sigma))
    assert problem.physics.params.free_names == ("c",) and problem.truth == {"c": 0.4}
    described = json.loads(json.dumps(problem.describe()))
    assert described["recording"]["class"] == "PendulumStream" and "_cache" not in described["recording"]
    assert pendulum_problem(SinglePendulum(), "A", 0.0, 1, duration=8.0).mhe.measurement_std == (1e-4,)

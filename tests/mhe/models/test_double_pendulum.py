"""The DFKI double pendulum as a PEM–MHE model on recorded logs (mhe.models.double_pendulum,
configs/mhe_dfki_double_pendulum.yaml)."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from mhe import PEMIdentifier, SolverSettings, StateSpaceModel
from mhe.models.casadi_model import CasadiDynamics
from mhe.models.double_pendulum import MODEL_3_0_FRICTION, DoublePendulumPhysics
from mhe.problems.torque_pendulum import LogsRecording
from mhe.training.config import load_experiment

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "configs" / "mhe_dfki_double_pendulum.yaml"
DFKI = ROOT.parent / "shared" / "data" / "dfki_double_pendulum"


def test_torch_field_equals_the_torch_ude_model_and_casadi_step_equals_torch_step(tmp_path):
    physics = DoublePendulumPhysics({"b1": 0.02, "cf2": 0.05}, identify=("Ir", "b1", "b2", "cf1", "cf2"))
    x, u = torch.randn(32, 4, dtype=torch.float64), torch.randn(32, 2, dtype=torch.float64)
    with torch.no_grad():
        assert torch.allclose(physics(x, u), physics.torch_model()(x, u), rtol=1e-12, atol=1e-12)
    smooth = DoublePendulumPhysics(coulomb_slope=10.0)
    model = StateSpaceModel(smooth, dt=0.01, measured=(0, 1))
    dyn = CasadiDynamics(model, tmp_path)
    x1 = torch.tensor([[0.7, -1.3, 2.0, -0.4]], dtype=torch.float64)
    u1 = torch.tensor([[0.4, -0.2]], dtype=torch.float64)
    expected = model.step(x1, u1, x1.new_zeros(1, 4))
    got = dyn.step(x1.numpy().T, u1.numpy().T, np.zeros((4, 1)), CasadiDynamics.parameter_values(model))
    assert np.abs(np.asarray(got).T - expected.detach().numpy()).max() < 1e-12


def test_start_values_are_model_3_0_and_bad_settings_are_errors():
    values = {k: float(v.detach()) for k, v in DoublePendulumPhysics(identify=("Ir", "cf1")).params().items()}
    assert values == pytest.approx(MODEL_3_0_FRICTION, rel=1e-9)
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['m1'\]"):
        DoublePendulumPhysics({"m1": 0.6})
    with pytest.raises(ValueError, match=r"unknown link constant\(s\) \['Ir'\]"):
        DoublePendulumPhysics(links={"Ir": 0.0})
    with pytest.raises(ValueError, match="strictly inside its bounds"):
        DoublePendulumPhysics({"cf1": 0.0}, identify=("cf1",))
    with pytest.raises(ValueError, match="coulomb_slope"):
        DoublePendulumPhysics(coulomb_slope=0.0)


def test_config_parses_and_builds_the_problem():
    experiment = load_experiment(CONFIG, ["--model.solver.build_dir", "/nonexistent/not_built"])
    problem = experiment.problem
    assert isinstance(problem.physics, DoublePendulumPhysics) and problem.physics.coulomb_slope == 10.0
    assert problem.physics.params.free_names == ("Ir", "b1", "b2", "cf1", "cf2")
    assert problem.measured == (0, 1) and problem.mhe.horizon == 50 and problem.stride == 25
    assert isinstance(problem.source, LogsRecording) and problem.source.rate == 100.0


@pytest.mark.skipif(not DFKI.is_dir(), reason=f"the DFKI double-pendulum logs are not at {DFKI} (see "
                                               f"../shared/data/README.md)")
def test_a_short_fit_on_the_first_windows_lowers_its_loss(tmp_path):
    # started with five times the lab's viscous friction and half its Coulomb friction
    start = {"Ir": 9.937281205437459e-05, "b1": 0.005, "b2": 0.005, "cf1": 0.045, "cf2": 0.04}
    experiment = load_experiment(CONFIG, [
        "--data.problem.windows", "8", "--data.problem.physics.init_args.values", json.dumps(start),
        "--data.problem.recording.init_args.files", json.dumps([str(DFKI / "trajectory_00.csv")])])
    with PEMIdentifier(experiment.problem, 3, experiment.outer, SolverSettings(build_dir=str(tmp_path / "b"))) as pem:
        result = pem.fit()
    first = pem.loop.history[0].loss
    assert np.isfinite(result.loss) and result.loss < first, (first, result.loss)

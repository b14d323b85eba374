"""The EMPS axis as a PEM–MHE model from its position alone (mhe.problems.emps, configs/mhe_emps.yaml)."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from mhe import PEMIdentifier, SolverSettings, StateSpaceModel
from mhe.models.casadi_model import CasadiDynamics
from mhe.problems.emps import EMPS_IDIM_LS, EMPSAxisPhysics, PositionLogsRecording
from mhe.training import IdentificationData, PEMModule
from mhe.training.config import load_experiment
from torch_ude.position_only import VelocityFromPosition
from torch_ude.systems.linear_axis import LinearAxisModel

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "configs" / "mhe_emps.yaml"
EMPS = ROOT.parent / "shared" / "data" / "emps"


def _write_axis_log(path: Path, duration: float = 3.0, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A 1 kHz CSV ``t, qm, vir`` of a smooth position and a noisy voltage; returns (qm, vir)."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(duration * 1000) + 1) / 1000.0
    qm = 0.1 + 0.05 * np.sin(2 * np.pi * 0.7 * t)
    vir = np.sin(2 * np.pi * 1.3 * t) + 0.1 * rng.standard_normal(t.size)
    np.savetxt(path, np.column_stack((t, qm, vir)), delimiter=",", header="t,qm,vir", comments="")
    return qm, vir


def test_torch_field_equals_the_linear_axis_model_and_casadi_step_equals_torch_step(tmp_path):
    physics = EMPSAxisPhysics({"Fc": 25.0, "offset": -2.0}, identify=("M", "Fv", "Fc", "offset"))
    x = torch.randn(32, 2, dtype=torch.float64) * torch.tensor([0.1, 0.05], dtype=torch.float64)
    u = torch.randn(32, 1, dtype=torch.float64)
    with torch.no_grad():
        ours, theirs = physics(x, u), physics.torch_model()(x, u)
    assert isinstance(physics.torch_model(), LinearAxisModel)
    assert torch.allclose(ours, theirs, rtol=1e-12, atol=1e-12)
    model = StateSpaceModel(physics, dt=0.005, measured=(0,))
    dyn = CasadiDynamics(model, tmp_path)
    x1, u1 = torch.tensor([[0.12, -0.03]], dtype=torch.float64), torch.tensor([[1.7]], dtype=torch.float64)
    expected = model.step(x1, u1, x1.new_zeros(1, 2))
    got = dyn.step(x1.numpy().T, u1.numpy().T, np.zeros((2, 1)), CasadiDynamics.parameter_values(model))
    assert np.abs(np.asarray(got).T - expected.detach().numpy()).max() < 1e-13


def test_start_values_are_idim_ls_and_bad_settings_are_errors():
    values = {k: float(v.detach()) for k, v in EMPSAxisPhysics(identify=("M", "Fc")).params().items()}
    assert values == pytest.approx(EMPS_IDIM_LS, rel=1e-9)
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['mass'\]"):
        EMPSAxisPhysics({"mass": 90.0})
    with pytest.raises(ValueError, match="strictly inside its bounds"):
        EMPSAxisPhysics({"M": 300.0}, identify=("M",))
    with pytest.raises(ValueError, match="coulomb_velocity"):
        EMPSAxisPhysics(coulomb_velocity=0.0)
    with pytest.raises(ValueError, match="read_rate / rate must be a positive integer"):
        PositionLogsRecording(["x.csv"], "t", ["qm"], ["vir"], rate=300.0, read_rate=1000.0)


def test_position_logs_recording_derives_the_velocity_and_holds_each_steps_mean_input(tmp_path):
    qm, vir = _write_axis_log(tmp_path / "a.csv")
    rec = PositionLogsRecording([tmp_path / "a.csv"], "t", ["qm"], ["vir"], rate=200.0, read_rate=1000.0,
                                velocity_from_position={"half_width": 5, "order": 2})
    out = rec.record()
    m, k = 5, 5
    steps = (qm.size - 2 * m) // k
    assert out.states.shape == (steps, 2) and out.inputs.shape == (steps, 1) and out.outputs.shape == (steps, 1)
    assert out.dt == pytest.approx(0.005) and out.breaks == ()
    # the grid's samples are the 1 kHz samples m, m + k, ...; the input is the mean over each step's k samples
    assert np.allclose(out.outputs[:, 0].numpy(), qm[m:m + steps * k:k], atol=1e-12)
    assert np.allclose(out.inputs[:, 0].numpy(), vir[m:m + steps * k].reshape(steps, k).mean(1), atol=1e-12)
    row = VelocityFromPosition(5, 2).row() * 1000.0
    assert out.states[3, 1].item() == pytest.approx(float(row @ qm[3 * k:3 * k + 2 * m + 1]), rel=1e-10)
    true_v = 0.05 * 2 * np.pi * 0.7 * np.cos(2 * np.pi * 0.7 * (np.arange(steps) * k + m) / 1000.0)
    # off the true velocity by the window's bias alone, q''' (3 M^2 + 3 M - 1) / (30 fs^2) (torch_ude.position_only)
    bias = 0.05 * (2 * np.pi * 0.7) ** 3 * (3 * m * m + 3 * m - 1) / (30 * 1000.0 ** 2)
    assert np.abs(out.states[:, 1].numpy() - true_v).max() == pytest.approx(bias, rel=0.01)


def test_config_parses_and_builds_the_problem():
    experiment = load_experiment(CONFIG, ["--model.solver.build_dir", "/nonexistent/not_built"])
    problem = experiment.problem
    assert isinstance(problem.physics, EMPSAxisPhysics) and problem.physics.params.free_names == (
        "M", "Fv", "Fc", "offset")
    assert problem.measured == (0,) and problem.mhe.horizon == 100 and problem.stride == 50
    assert isinstance(problem.source, PositionLogsRecording) and problem.source.factor == 5
    assert experiment.outer.optimizer == "gauss_newton" and experiment.max_steps == 30
    assert IdentificationData(problem).problem is problem and PEMModule is not None


@pytest.mark.skipif(not EMPS.is_dir(), reason=f"the EMPS records are not at {EMPS} (see ../shared/data/README.md)")
def test_a_short_fit_on_the_first_windows_of_data_emps_lowers_its_loss(tmp_path):
    # started off the IDIM-LS values (M 20 % high, Fv 30 % low) so that the loss has somewhere to go
    experiment = load_experiment(CONFIG, [
        "--data.problem.windows", "8", "--model.solver.build_dir", str(tmp_path / "build"),
        "--data.problem.physics.init_args.values", json.dumps({"M": 115.0, "Fv": 140.0, "Fc": 20.0, "offset": -3.0}),
        "--data.problem.recording.init_args.files", json.dumps([str(EMPS / "DATA_EMPS.mat")])])
    assert len(experiment.problem.windows) == 8
    with PEMIdentifier(experiment.problem, 3, experiment.outer, SolverSettings(build_dir=str(tmp_path / "b"))) as pem:
        result = pem.fit()
    first = pem.loop.history[0].loss
    assert result.counters.failed == 0 and np.isfinite(result.loss)
    assert result.loss < 0.5 * first, (first, result.loss)

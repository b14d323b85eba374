"""The motor-driven pendulum as a PEM–MHE model on recorded logs (mhe.problems.torque_pendulum)."""
import numpy as np
import pytest
import torch

from mhe import OuterSettings, PEMIdentifier, SolverSettings, StateSpaceModel
from mhe.models.casadi_model import CasadiDynamics
from mhe.problems.torque_pendulum import (IDENTIFIED_FRICTION_START, LogsRecording, TorquePendulumPhysics, torque_pendulum_problem)
from torch_ude.prediction import rk4_input_rollout
from torch_ude.systems.controlled import TorquePendulumModel

TRUTH = {"J": 0.0626, "m_cx": 0.1022, "Fv": 0.05, "Fc": 0.04, "offset": -0.03}


def _write_log(path, duration: float, seed: int, noise: float = 1e-4, t0: float = 0.0) -> None:
    """A 100 Hz CSV of the true model driven by a sum of sines held at 50 Hz (simulated at 1 kHz, angle noise
    ``noise`` rad)."""
    model = TorquePendulumModel(inertia=TRUTH["J"], mass_com=TRUTH["m_cx"], viscous=TRUTH["Fv"],
                                coulomb=TRUTH["Fc"], offset=TRUTH["offset"]).to(torch.float64)
    rng = np.random.default_rng(seed)
    t = np.arange(int(duration * 1000) + 1) / 1000.0
    freq, phase = rng.uniform(0.2, 1.5, 4), rng.uniform(0, 2 * np.pi, 4)
    held = np.floor(t * 50.0 + 1e-9) / 50.0  # a 50 Hz controller: the torque held over each 20 ms
    tau = 0.4 * np.sin(2 * np.pi * freq[:, None] * held + phase[:, None]).sum(axis=0)
    u = torch.as_tensor(tau, dtype=torch.float64).reshape(-1, 1, 1)
    with torch.no_grad():
        x = rk4_input_rollout(lambda x, u: model(x, u), torch.tensor([[0.3, 0.0]], dtype=torch.float64), u,
                              1e-3)[:, 0].numpy()
    keep = slice(None, None, 10)
    q = x[keep, 0] + noise * rng.standard_normal(x[keep].shape[0])
    np.savetxt(path, np.column_stack((t0 + t[keep], q, x[keep, 1], tau[keep])), delimiter=",",
               header="time,position,velocity,torque", comments="")


def test_torch_field_equals_the_torch_ude_model_and_casadi_step_equals_torch_step(tmp_path):
    physics = TorquePendulumPhysics(TRUTH, identify=("Fv", "Fc", "offset"))
    x, u = torch.randn(32, 2, dtype=torch.float64), torch.randn(32, 1, dtype=torch.float64)
    with torch.no_grad():
        assert torch.allclose(physics(x, u), physics.torch_model()(x, u), rtol=0, atol=1e-13)
    model = StateSpaceModel(physics, dt=0.02, measured=(0,))
    dyn = CasadiDynamics(model, tmp_path)
    x1, u1 = torch.tensor([[0.7, -1.3]], dtype=torch.float64), torch.tensor([[0.4]], dtype=torch.float64)
    expected = model.step(x1, u1, x1.new_zeros(1, 2))
    got = dyn.step(x1.numpy().T, u1.numpy().T, np.zeros((2, 1)), CasadiDynamics.parameter_values(model))
    assert np.abs(np.asarray(got).T - expected.detach().numpy()).max() < 1e-13


def test_identified_friction_starts_inside_its_bound_and_bad_names_are_errors():
    physics = TorquePendulumPhysics(identify=("Fv", "Fc"))
    values = {k: float(v.detach()) for k, v in physics.params().items()}
    assert values["Fv"] == pytest.approx(IDENTIFIED_FRICTION_START) and values["Fc"] == pytest.approx(0.01)
    assert values["J"] == 6.259e-2 and values["offset"] == 0.0
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['mass'\]"):
        TorquePendulumPhysics({"mass": 1.0})
    with pytest.raises(ValueError, match="strictly inside its bounds"):
        TorquePendulumPhysics({"Fc": 0.0}, identify=("Fc",))


def test_logs_recording_joins_files_with_a_break_and_estimates_the_angle_noise(tmp_path):
    _write_log(tmp_path / "a.csv", 12.0, 0, noise=2e-3)
    _write_log(tmp_path / "b.csv", 8.0, 1, noise=2e-3)
    rec = LogsRecording([tmp_path / "a.csv", tmp_path / "b.csv"], "time", ("position", "velocity"), ("torque",),
                        measured=(0,), rate=50.0)
    out = rec.record()
    assert out.states.shape == (601 + 401, 2) and out.inputs.shape == (1002, 1)
    assert out.breaks == (601,) and out.dt == pytest.approx(0.02)
    assert torch.equal(out.outputs[:, 0], out.states[:, 0])
    assert rec.noise_std() == (pytest.approx(2e-3, rel=0.3),)
    with pytest.raises(ValueError, match="measured must list distinct indices"):
        LogsRecording([tmp_path / "a.csv"], "time", ("position", "velocity"), ("torque",), measured=(2,))


def test_the_problem_takes_the_torques_hold(tmp_path):
    _write_log(tmp_path / "log.csv", 2.0, 3)
    problem = torque_pendulum_problem([tmp_path / "log.csv"], ("Fv",), hold="foh")
    assert problem.estimator().model.hold.name == "foh" and problem.windows.u.shape[-1] == 2
    assert torque_pendulum_problem([tmp_path / "log.csv"], ("Fv",)).windows.u.shape[-1] == 1
    with pytest.raises(ValueError, match="hold must be one of"):
        torque_pendulum_problem([tmp_path / "log.csv"], ("Fv",), hold="linear")


def test_pem_mhe_from_the_angle_alone_recovers_friction_and_offset(tmp_path):
    _write_log(tmp_path / "log.csv", 20.0, 3)
    problem = torque_pendulum_problem([tmp_path / "log.csv"], ("Fv", "Fc", "offset"), measured=(0,),
                                      values={"J": TRUTH["J"], "m_cx": TRUTH["m_cx"]})
    with PEMIdentifier(problem, 12, OuterSettings(optimizer="gauss_newton"),
                       SolverSettings(build_dir=str(tmp_path / "build"))) as pem:
        result = pem.fit()
        got = {k: float(v.detach()) for k, v in pem.estimator.model.physics.params().items()}
    assert result.counters.failed == 0
    # the torque is held over each 20 ms step as the MHE assumes; what is left is the angle noise
    # (and, measured with a smoothly varying torque instead, the hold costs 7 % in Fv and 4 mN m in offset)
    assert got["Fv"] == pytest.approx(TRUTH["Fv"], rel=0.03) and got["Fc"] == pytest.approx(TRUTH["Fc"], rel=0.05)
    assert got["offset"] == pytest.approx(TRUTH["offset"], abs=3e-3)

"""The force-driven linear axis (EMPS): hand-written Jacobians against torch.func and complex step, bad constants,
IDIM-LS and the pulses in the validation record's voltage."""
from pathlib import Path

import pytest
import torch
import yaml
from torch.func import jacrev

from torch_ude.systems import LinearAxisModel
from torch_ude.systems.linear_axis import EMPS_IDIM_LS, idim_ls, idim_ls_model, pulse_steps

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT.parent / "shared" / "data" / "emps"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"the EMPS records are not at {DATA} "
                                                          f"(see ../shared/data/README.md)")

IDIM = {"mass": 95.1089, "gain": 35.15, "viscous": 203.5034, "coulomb": 20.3935, "offset": -3.1648}


def _models() -> dict[str, LinearAxisModel]:
    return {"known": LinearAxisModel(), "idim": LinearAxisModel(**IDIM),
            "steep": LinearAxisModel(mass=2.0, gain=1.5, viscous=0.3, coulomb=4.0, coulomb_velocity=0.05, offset=0.2)}


def _states(batch: int = 9) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(5)
    # velocities around the Coulomb smoothing (mm/s) and beyond
    x = torch.stack((0.2 * torch.rand(batch, generator=gen), 0.05 * torch.randn(batch, generator=gen)), dim=1)
    return x, 3.0 * torch.randn(batch, 1, generator=gen)


@pytest.mark.parametrize("name", ["known", "idim", "steep"])
def test_jacobians_match_jacrev(name):
    model = _models()[name]
    x, u = _states()
    jx = torch.stack([jacrev(model, argnums=0)(x[b:b + 1], u[b:b + 1])[0, :, 0, :] for b in range(x.shape[0])])
    ju = torch.stack([jacrev(model, argnums=1)(x[b:b + 1], u[b:b + 1])[0, :, 0, :] for b in range(x.shape[0])])
    assert torch.allclose(model.jacobian(x, u), jx, rtol=1e-12, atol=1e-12)
    assert torch.allclose(model.input_jacobian(x, u), ju, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["known", "idim", "steep"])
def test_jacobians_match_complex_step(name):
    model, step = _models()[name], 1e-30
    x, u = _states()
    xc, uc = x.to(torch.complex128), u.to(torch.complex128)
    for j in range(2):
        probe = xc.clone()
        probe[:, j] += 1j * step
        assert torch.allclose(model(probe, uc).imag / step, model.jacobian(x, u)[:, :, j], rtol=1e-12, atol=1e-12)
    probe = uc + 1j * step
    assert torch.allclose(model(xc, probe).imag / step, model.input_jacobian(x, u)[:, :, 0], rtol=1e-12, atol=1e-12)


def test_the_field_is_the_benchmark_model():
    model = LinearAxisModel(**IDIM, coulomb_velocity=1e-3)
    x, u = torch.tensor([[0.1, 0.05], [0.1, -0.05]]), torch.tensor([[2.0], [2.0]])
    friction = torch.tensor([203.5034 * 0.05 + 20.3935 * torch.tanh(torch.tensor(50.0)),
                             -203.5034 * 0.05 - 20.3935 * torch.tanh(torch.tensor(50.0))])
    expected = torch.stack((x[:, 1], (35.15 * 2.0 - friction + 3.1648) / 95.1089), dim=1)
    assert torch.allclose(model(x, u), expected, rtol=1e-14)
    # the known model: M q'' = gtau vir, nothing else
    assert torch.allclose(LinearAxisModel(mass=95.1)(x, u), torch.tensor([[0.05, 35.15 * 2 / 95.1]] * 2)
                          * torch.tensor([[1.0, 1.0], [-1.0, 1.0]]))
    assert model.spec()["class_path"] == "torch_ude.systems.linear_axis.LinearAxisModel"
    assert LinearAxisModel(**model.init_args()).init_args() == model.init_args()


@pytest.mark.parametrize("kwargs, match", [
    ({"mass": 0.0}, r"mass \(M in kg\) must be positive; got 0.0"),
    ({"mass": -1}, r"mass \(M in kg\) must be positive; got -1"),
    ({"coulomb_velocity": 0.0}, r"coulomb_velocity \(v_c in m/s\) must be positive"),
    ({"viscous": float("nan")}, r"viscous must be a finite number; got nan"),
    ({"gain": float("inf")}, r"gain must be a finite number; got inf"),
    ({"offset": "1"}, r"offset must be a finite number; got '1'"),
    ({"coulomb": True}, r"coulomb must be a finite number; got True"),
])
def test_bad_constants_are_clear_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LinearAxisModel(**kwargs)


@needs_data
def test_idim_ls_recomputes_the_benchmarks_values():
    fit = idim_ls(DATA / "DATA_EMPS.mat")
    # the benchmark's script values (Simulation_EMPS_Validation.m) within one of our standard deviations
    for key in ("M", "Fv", "Fc", "offset"):
        assert abs(fit[key] - EMPS_IDIM_LS[key]) < fit["std"][key], key
    assert fit["M"] == pytest.approx(95.10, abs=0.01) and 3.5 < fit["relative_error_percent"] < 5.0
    # the config's known model carries that mass
    known = yaml.safe_load((ROOT / "configs" / "emps.yaml").read_text())["data"]["init_args"]["known"]["init_args"]
    assert known["mass"] == pytest.approx(fit["M"], rel=1e-4) and known["gain"] == pytest.approx(fit["gtau"])


def test_an_idim_ls_fit_is_the_whole_model():
    model = idim_ls_model(EMPS_IDIM_LS, gain=35.15)
    assert model.init_args() == {**IDIM, "coulomb_velocity": 1e-3}
    assert idim_ls_model(EMPS_IDIM_LS, gain=35.15, coulomb_velocity=0.05).coulomb_velocity == 0.05


@needs_data
def test_the_validation_voltage_already_holds_the_force_pulses():
    steps = pulse_steps(DATA / "DATA_EMPS_PULSES.mat")
    # pulses of 5 (pulses_N) show as steps of about 5 V in vir, i.e. 5 gtau = 176 N, not 5 N
    assert steps["onset"]["count"] == 25 and steps["onset"]["mean_V"] == pytest.approx(5.07, abs=0.01)
    assert steps["end"]["mean_V"] == pytest.approx(-5.06, abs=0.01) and steps["onset"]["std_V"] < 0.05

"""PEM-MHE run files: a residual's trust envelope is exported with the model (field.pt fades, field.json records it)
and `torch_ude.export.LoadedField` reads it (issue 33, item 5); a run whose residual check rejects the residual
exports its physics alone."""
import json

import lightning as L
import torch

from mhe import OuterSettings, SolverSettings
from mhe.models.envelope import record_envelope
from mhe.training import IdentificationData, PEMModule
from mhe.training.outputs import _export_model
from torch_ude.export import load_field
from tests.mhe.helpers import estimator, leak_problem


def test_the_envelope_travels_in_field_pt_and_field_json(tmp_path):
    est = estimator("gray", 5)
    net = est.model.residual
    gen = torch.Generator().manual_seed(0)
    x = torch.tensor([1.5, 0.0, 0.0]) + 0.3 * torch.randn(40, 3, generator=gen, dtype=torch.float64)
    u = 0.3 * torch.randn(40, 2, generator=gen, dtype=torch.float64)
    record = record_envelope(net, x, u, 0.5, (["vx", "vy", "omega"], ["delta", "pedal"]))
    _export_model(tmp_path, est, {"trainer": "pem_mhe"}, {**record, "windows": 3})
    sidecar = json.loads((tmp_path / "field.json").read_text())
    assert sidecar["envelope"] == json.loads(json.dumps(record))  # the run's record, less the window count
    field = load_field(tmp_path)
    far_x, far_u = torch.cat([x, 3 * x]), torch.cat([u, 6 * u])
    zero = torch.zeros_like(far_x)
    assert torch.allclose(field(far_x, far_u), est.model.field(far_x, far_u, zero).detach(), rtol=1e-12, atol=1e-12)
    assert torch.equal(field.outside(far_x, far_u), net.outside(far_x, far_u))
    assert not bool(field.outside(x, u).any()) and bool(field.outside(far_x, far_u).any())
    assert all(torch.equal(a, b) for a, b in zip(field.envelope, net.envelope))


def test_a_model_without_an_envelope_exports_none(tmp_path):
    _export_model(tmp_path, estimator("gray", 5), {"trainer": "pem_mhe"})
    assert "envelope" not in json.loads((tmp_path / "field.json").read_text())
    assert load_field(tmp_path).envelope is None


def test_a_run_whose_residual_check_rejects_the_residual_exports_the_physics_alone(tmp_path):
    root = tmp_path / "run"
    trainer = L.Trainer(max_steps=2, max_epochs=-1, accelerator="cpu", devices=1, default_root_dir=str(root),
                        enable_checkpointing=False, logger=False, enable_progress_bar=False, enable_model_summary=False)
    module = PEMModule(OuterSettings(lr=0.05, lr_min=0.005), SolverSettings(build_dir=str(root / "build")))
    trainer.fit(module, datamodule=IdentificationData(leak_problem(inflow=0.0, noise=0.0, a=0.5)))  # exact physics
    metrics = json.loads((root / "metrics.json").read_text())
    check = metrics["residual_check"]
    assert metrics["status"] == "residual rejected" and check["rejected"] and not check["kept"]
    assert check["metric"] == "one_step_mse" and check["hybrid"] > check["physics"] and check["windows"] == 5
    assert "last 20 % of the training recording (5 windows)" in check["on"]
    sidecar = json.loads((root / "field.json").read_text())
    assert sidecar["residual_sizes"] is None and "envelope" not in sidecar and sidecar["input_names"] == ["u"]
    assert sidecar["extra"]["status"] == "residual rejected" and sidecar["num_parameters"] == 3  # a and the arrival
    a = sidecar["parameters"]["a"]
    assert a == metrics["parameters"]["a"] == float(module.estimator.model.physics.params()["a"])
    x, u = torch.linspace(0.0, 3.0, 7)[:, None], torch.linspace(-1.0, 2.0, 7)[:, None]
    assert torch.allclose(torch.jit.load(str(root / "field.pt"))(x, u), -a * x + u, rtol=1e-12, atol=1e-12)

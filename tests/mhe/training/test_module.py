"""PEMModule: one-process run with TensorBoard and run files; the in-process identifier, the module on 1 process
and the module on 2 DDP processes (gloo) take the same iterates."""
import json
from pathlib import Path

import lightning as L
import pytest
import torch
from lightning.pytorch.loggers import TensorBoardLogger
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch.nn.utils import parameters_to_vector

from mhe import NoiseFitSettings, OuterSettings, PEMIdentifier, ResidualSettings, SolverSettings
from mhe.training import IdentificationData, PEMModule
from tests.mhe.helpers import racing_problem


class _Iterates(L.Callback):
    """Writes ``alpha`` after every step to ``iterates.pt`` in the run folder (rank 0; survives ddp_spawn)."""

    def __init__(self) -> None:
        self.alphas: list[torch.Tensor] = []

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        self.alphas.append(parameters_to_vector(module.estimator.parameters()).detach().clone())

    def on_train_end(self, trainer, module) -> None:
        if trainer.global_rank == 0:
            torch.save(torch.stack(self.alphas), Path(trainer.default_root_dir) / "iterates.pt")


def _fit(tmp_path, name, outer, problem=None, max_steps=3, **trainer):
    root = tmp_path / name
    t = L.Trainer(max_steps=max_steps, max_epochs=-1, accelerator="cpu", default_root_dir=str(root),
                  enable_checkpointing=False, logger=TensorBoardLogger(str(root), name="tb"), log_every_n_steps=1,
                  enable_progress_bar=False, enable_model_summary=False, callbacks=[_Iterates()], **trainer)
    module = PEMModule(outer, SolverSettings(build_dir=str(root / "build")))
    t.fit(module, datamodule=IdentificationData(problem or racing_problem()))  # 5 windows: the DDP sampler pads
    return root, json.loads((root / "metrics.json").read_text())


def test_one_process_run_logs_to_tensorboard_and_writes_run_files(tmp_path):
    root, metrics = _fit(tmp_path, "one", OuterSettings(lr=0.02, lr_min=0.002), devices=1)
    assert metrics["updates"] == metrics["steps"] == 3 and metrics["failed_windows_total"] == 0
    assert metrics["e_field"] is None and metrics["failed_trial_windows_total"] == 0
    assert set(metrics["rel_errors"]) == set(racing_problem().physics.params.free_names)
    events = next(root.glob("tb/version_0/events.*"))
    acc = EventAccumulator(str(events))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert {"train/J", "train/lr", "param/Bf", "param/mean_rel_error", "solver/ipopt_iterations",
            "train/n_failed"} <= set(tags)
    field = torch.jit.load(str(root / "field.pt"))
    out = field(torch.tensor([[1.5, 0.0, 0.5]], dtype=torch.float64), torch.tensor([[0.1, 0.4]], dtype=torch.float64))
    assert out.shape == (1, 3) and bool(torch.isfinite(out).all())
    sidecar = json.loads((root / "field.json").read_text())
    assert sidecar["format"] == "torch-ude-mhe-model" and sidecar["extra"]["config"]["outer"]["lr"] == 0.02
    assert sidecar["extra"]["config"]["problem"]["mhe"]["horizon"] == 6


def test_a_gray_box_run_logs_its_two_stage_start_once(tmp_path):
    problem = racing_problem(residual=ResidualSettings(4, (2.0, 0.3, 3.0, 0.3, 1.0), (1.0, 1.0, 20.0)))
    outer = OuterSettings(lr=0.01, lr_min=0.001, noise_fit=NoiseFitSettings(steps=30, lr=0.01, held_out=0.0))
    root, metrics = _fit(tmp_path, "gray", outer, problem, devices=1, max_steps=2)
    assert metrics["steps"] == 2
    acc = EventAccumulator(str(next(root.glob("tb/version_0/events.*"))))
    acc.Reload()
    before, after = (acc.Scalars(f"noise_fit/{k}") for k in ("fit_before", "fit_after"))
    assert len(before) == len(after) == 1 and after[0].value < before[0].value
    assert acc.Scalars("noise_fit/windows")[0].value == 5 and acc.Scalars("noise_fit/best_step")[0].value == 30


@pytest.mark.parametrize("optimizer", ["adam", "lbfgs", "gauss_newton"])
def test_identifier_and_module_on_one_and_two_processes_take_the_same_iterates(optimizer, tmp_path):
    outer = OuterSettings(optimizer=optimizer, lr=0.02, lr_min=0.002)
    alphas = []
    with PEMIdentifier(racing_problem(), 3, outer, SolverSettings(build_dir=str(tmp_path / "build"))) as pem:
        pem.fit(lambda i, step: alphas.append(parameters_to_vector(pem.estimator.parameters()).detach().clone()))
    reference = torch.stack(alphas)
    one, m1 = _fit(tmp_path, "one", outer, devices=1)
    two, m2 = _fit(tmp_path, "two", outer, devices=2, strategy="ddp_spawn")
    assert m1["updates"] == m2["updates"] == 3 and m1["failed_trial_windows_total"] == m2["failed_trial_windows_total"]
    assert torch.equal(torch.load(one / "iterates.pt"), reference)  # one process: the same code, the same numbers
    scale = (reference - reference[:1]).abs().amax(0) + reference.abs().amax(0) * 1e-3
    assert float(((torch.load(two / "iterates.pt") - reference).abs() / scale).max()) <= 1e-9  # sums across ranks
    assert abs(m2["J_final"] - m1["J_final"]) <= 1e-9 * abs(m1["J_final"])

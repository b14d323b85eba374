"""Algorithm 1 run by the C trainer from ``torch-ude fit``: the C library as a fast backend.

``torch-ude fit --config configs/pendulum_case_a_c.yaml`` trains with `CJetMatchingModule`:
the same arguments, data module (plant, noise, seed: the same stream), outputs
(``field.pt``, ``field.json``, ``metrics.json`` with ``static_bytes`` added) and TensorBoard
scalars as `torch_ude.training.JetMatchingModule`, whose loop, metrics and failure checks it
inherits; only the engine differs. Its settings are generated into the C headers, the library
is built on the host (`microcontroller.ctrainer.CTrainer`, cached), and every chunk of the
stream and every update goes through it, in float32 and static memory.
"""
from __future__ import annotations

import json
import time

import torch

from torch_ude.calibration import Calibration
from torch_ude.field import HybridField
from torch_ude.jet import JetResult
from torch_ude.training.module import JetMatchingModule, StreamStatus
from torch_ude.training.resume import check_extends

from .ctrainer import COUNTERS, CTrainer, load_weights, physical_parameters
from .generate import spec_from_settings, stream_data
from .headers import REFIT_EVALUATIONS

__all__ = ["CJetMatchingModule"]


class CJetMatchingModule(JetMatchingModule):
    """Streaming jet matching with the C trainer (``microcontroller/``) as the engine.

    Takes `torch_ude.training.JetMatchingModule`'s arguments; they, the data module's
    plant, case, rate and seed, and ``trainer.max_steps`` (the cosine schedule is compiled in)
    are the generator's settings. Lightning counts the updates of a manually optimized
    module by its optimizer steps (``trainer.global_step``); the C trainer's updates are added
    to that count directly (`_count_updates`), so ``trainer.max_steps``, checkpoints and
    callbacks see them. A checkpoint holds the C instance's bytes and resumes it exactly. The C
    trainer computes its cosine rate in closed form from its update count, so resuming with a
    larger ``trainer.max_steps`` (a build for the new horizon) follows the longer schedule from
    the checkpoint's update on, as the Python module does; any other change of settings is an
    error.
    """

    trainer_name = "jet_matching_c"

    def setup(self, stage: str) -> None:
        """Generate and build the C trainer for this run (cached) and the field that receives its weights."""
        if self.num_threads is not None:
            torch.set_num_threads(self.num_threads)
        if self.field is not None:
            return
        dm = self.trainer.datamodule
        self._check_stream_length(dm.duration)
        self.field = self.initial_field(dm.system, dm.system.known_field(dm.case), dm.seed)
        # the data module's chunks hold every state (a position-only log's velocities derived on the host), so the
        # engine derives none
        data = {**stream_data(dm), "velocity_from_position": None}
        spec = spec_from_settings(dm.system, dm.case, self.field, False, dict(self.hparams), data,
                                  self.trainer.max_steps, dm.seed, f"torch-ude fit ({type(self).__name__})")
        self.engine = CTrainer(spec, seed=dm.seed)
        self._train_every = dm.chunk

    def configure_optimizers(self) -> None:
        """None: the C trainer optimizes (Lightning then warns once that it has no optimizer)."""
        return None

    # ----- the engine -------------------------------------------------------------------------
    def _push(self, batch: dict) -> int:
        return self.engine.push_chunk(batch["y"].numpy(), batch["ticks"].numpy(), batch["segment"].numpy())

    def _make_updates(self, count: int) -> None:
        t0 = time.perf_counter()
        before = self.stats["updates"]
        made = self.engine.steps(count)
        self.stats["updates"] = before + made
        self.stats["update_s"] += time.perf_counter() - t0
        self._count_updates(made)
        if made and self.stats["updates"] // self.log_every > before // self.log_every:
            report = self.engine.report()
            loss = JetResult(loss=torch.tensor(report["loss"]), loss_r1=torch.tensor(report["loss_r1"]),
                             loss_r2=torch.tensor(report["loss_r2"]), grads=[])
            self._log_training(loss, report["grad_norm"], report["lr"])

    def stream_status(self) -> StreamStatus:
        """Calibration, counters and reservoir fill of the C trainer."""
        report = self.engine.report()
        cal = report["calibration"]
        calibration = None if cal is None else Calibration(
            x_rms=torch.tensor(cal["x_rms"], dtype=torch.float64), s1=torch.tensor(cal["s1"], dtype=torch.float64),
            s2=torch.tensor(cal["s2"], dtype=torch.float64), sigma=torch.tensor(cal["sigma"], dtype=torch.float64),
            sigma_rel=cal["sigma_rel"], omega_c=cal["omega_c"], m=cal["m"], dt_eff=cal["dt_eff"], snr2=cal["snr2"],
            lambda2=cal["lambda2"])
        counters = {k: v for k, v in report["counters"].items() if k in COUNTERS}
        return StreamStatus(calibration, counters, report["fill"], self.stream_settings.capacity, report["seen"])

    def weight_decay_in_use(self) -> float:
        """The AdamW decay the C trainer set at calibration (its configured value before)."""
        cal = self.engine.report()["calibration"]
        return self.weight_decay if cal is None else float(cal["weight_decay"])

    def averaged_field(self) -> HybridField:
        """The field with the C trainer's EMA weights and scales (float64 for evaluation and export)."""
        report = self.engine.report()
        return load_weights(self.field, self.engine.weights(ema=True), report["in_scale"], report["out_scale"])

    def training_span(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The C trainer's span of the jets it offered to its reservoir (`CTrainer.span`, float64 of its
        float32 values), states then inputs, (n + n_u,) each, or None before calibration or for a build
        without an envelope (`torch_ude.training.JetMatchingModule.install_envelope` then refuses)."""
        span = self.engine.span()
        if span is None or self.engine.report()["calibration"] is None:
            return None
        return torch.from_numpy(span[0]).double(), torch.from_numpy(span[1]).double()

    def physical_parameters(self, field: HybridField) -> dict | None:
        """The physical parameters ``field`` carries (the C trainer's EMA of theta, refitted where the run exports its
        physics alone: `refit_physics`) with the C trainer's float32 standard errors on its reservoir
        (`microcontroller.ctrainer.physical_parameters`); None when nothing is trained."""
        return physical_parameters(field, self.engine.standard_errors())

    def refit_physics(self, field: HybridField) -> tuple[HybridField, dict | None]:
        """The end-of-run refit of a physics-alone run (``physics_first`` 1; a rejected residual's refit is refused
        by the generator) on the C trainer's reservoir (`CTrainer.refit`, ``tu_trainer_refit``): ``(the exported
        field with the refitted theta, report)`` as `torch_ude.training.JetMatchingModule.refit_physics` returns
        them; ``(field, None)`` when the refit is off or nothing is trained."""
        if not self.physics_refit or not field.physical:
            return field, None
        report = {**self.engine.refit(REFIT_EVALUATIONS), "values_before": field.known.values()}
        refit = self.averaged_field()
        report.update(self.held_out_change(field, refit))
        return refit, report

    def state_bytes(self) -> int:
        """``sizeof(tu_trainer)``: all the C trainer's state."""
        return self.engine.static_bytes

    def run_metrics(self) -> dict:
        """The jet-matching metrics plus ``static_bytes`` (the C trainer's static memory); the
        skipped-update count is the C trainer's own."""
        self.stats["skipped_updates"] = self.engine.report()["counters"]["skipped_updates"]
        return {**super().run_metrics(), "static_bytes": self.engine.static_bytes}

    # ----- checkpoints ------------------------------------------------------------------------
    def _build_settings(self) -> str:
        """The settings of this build apart from the schedule's length (a checkpoint must match them)."""
        settings = self.engine.spec.settings()
        settings.pop("max_steps")
        return json.dumps(settings, sort_keys=True, default=str)

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        """Add the C instance's bytes, the settings it was built with and the run counters."""
        checkpoint["c_trainer"] = torch.frombuffer(bytearray(self.engine.state_bytes()), dtype=torch.uint8)
        checkpoint["c_settings"] = self._build_settings()
        checkpoint["jet_stats"] = dict(self.stats)

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        """Restore the C instance exactly (`trainer.max_steps` may grow; see the class doc).

        Raises:
            ValueError: if the checkpoint's C trainer was built with other settings, or
                ``trainer.max_steps`` does not exceed its update count.
        """
        if checkpoint.get("c_settings") != self._build_settings():
            raise ValueError("the checkpoint's C trainer was built with other settings than this run's (plant, "
                             "network, stream or optimizer); resume with the settings of the run that wrote it.")
        self.engine.load_state_bytes(checkpoint["c_trainer"].numpy().tobytes())
        self.stats = dict(checkpoint["jet_stats"])
        check_extends(int(checkpoint["global_step"]), self.engine.spec.max_steps)


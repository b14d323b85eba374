"""Realistic sensor dropouts end to end: the streaming trainer learns through them."""
import lightning as L
import pytest
import torch

from torch_ude.stream import StreamSettings
from torch_ude.systems import SensorFaults, SinglePendulum
from torch_ude.training import JetMatchingModule, StreamDataModule


def _train(tmp_path, faults):
    dm = StreamDataModule(SinglePendulum(), duration=10.0, noise=0.01, seed=1, faults=faults)
    model = JetMatchingModule(stream=StreamSettings(capacity=256, calibration_s=1.0), ema_decay=0.99)
    trainer = L.Trainer(max_steps=600, logger=False, enable_progress_bar=False, enable_checkpointing=False,
                        default_root_dir=tmp_path, num_sanity_val_steps=0, limit_val_batches=0)
    trainer.fit(model, dm)
    assert all(torch.isfinite(p).all() for p in model.field.parameters())
    return model.stream.counters, model.evaluate()


@pytest.mark.parametrize("faults, long_gaps", [
    (SensorFaults(drop_rate=0.01, seed=2), False),
    (SensorFaults(drop_rate=0.05, seed=2), False),
    (SensorFaults(dropout_rate=5e-4, dropout_length=200, seed=2), True),  # 200 ms dropouts every ~2 s
])
def test_training_survives_dropped_samples(tmp_path, faults, long_gaps):
    counters, out = _train(tmp_path, faults)
    assert counters["gaps"] > 0 and (counters["long_gaps"] > 0) == long_gaps
    assert counters["bridged"] > 0 or long_gaps
    # most windows survive (at 1 % independent drops the old stream lost every one of them)
    assert counters["accepted"] > 0.8 * counters["windows"]
    assert out["e_field_visited"] < 0.06  # the known model alone: about 0.12

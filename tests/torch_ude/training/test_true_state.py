"""The errors-in-variables oracle: the true-state run shares the noisy calibration and reads the clean states."""
import pytest

from torch_ude.cli import fit_config

CONFIG = "configs/pendulum_case_a.yaml"
SHORT = ["--data.noise", "0.05", "--data.duration", "8", "--trainer.max_steps", "60"]
TRUE_STATE = ["--model.class_path", "torch_ude.training.TrueStateModule",
              "--data.class_path", "torch_ude.training.TrueStateDataModule"]


def test_true_state_runs_share_the_noisy_calibration_and_read_the_clean_states(tmp_path):
    ref = fit_config(CONFIG, tmp_path / "reference", 0, SHORT)
    true_x = fit_config(CONFIG, tmp_path / "true_x", 0, [*SHORT, *TRUE_STATE])
    assert true_x["updates"] == ref["updates"] == 60
    # the clean channels ride after the noisy ones and leave m, lambda2 and the noisy sigma as they were
    sigma = true_x["calibration"]["sigma"]
    assert len(sigma) == 4 and max(sigma[2:]) < 1e-6 < min(sigma[:2])
    assert sigma[:2] == pytest.approx(ref["calibration"]["sigma"], rel=1e-12)
    assert (true_x["m"], true_x["lambda2"]) == (ref["m"], ref["lambda2"])
    assert true_x["counters"]["accepted"] == ref["counters"]["accepted"]

"""The host speed-up of the C trainer (microcontroller.host_speed): the Python trainer's config derived from the C
trainer's, both engines run on short settings, the medians and the split of the C run."""
import math
from pathlib import Path

import pytest
import yaml

from microcontroller.host_speed import host_speedup, python_config

CONFIG = "configs/pendulum_case_a_c.yaml"
SHORT = ["--data.duration", "6", "--model.stream.capacity", "256", "--model.stream.calibration_s", "1.0",
         "--trainer.max_steps", "120", "--trainer.callbacks.init_args.every_n_updates", "100"]


def test_the_python_config_is_the_c_config_with_the_python_trainer(tmp_path):
    written = python_config(CONFIG, tmp_path / "sub" / "python.yaml")
    assert written == tmp_path / "sub" / "python.yaml"
    c, python = (yaml.safe_load(Path(p).read_text()) for p in (CONFIG, written))
    assert python["model"].pop("class_path") == "torch_ude.training.JetMatchingModule"
    assert c["model"].pop("class_path") == "microcontroller.training.CJetMatchingModule"
    assert python == c  # every setting the config's, B = 2048 and point taps included
    with pytest.raises(ValueError, match="does not name the C trainer"):
        python_config("configs/pendulum_case_a.yaml", tmp_path / "no.yaml")


def test_both_engines_run_and_the_speedup_is_the_ratio_of_the_medians(tmp_path):
    with pytest.raises(ValueError, match="repeats must be at least 1; got 0"):
        host_speedup(CONFIG, 0, tmp_path)
    out = host_speedup(CONFIG, 1, tmp_path, SHORT)
    assert (tmp_path / "python.yaml").is_file() and (tmp_path / "c-0" / "metrics.json").is_file()
    assert out["median_wall_s"] == {e: out["wall_s"][e][0] for e in ("c", "python")}
    assert out["speedup"] == pytest.approx(out["median_wall_s"]["python"] / out["median_wall_s"]["c"])
    c = out["runs"]["c"][0]
    assert out["c_updates_s_median"] == pytest.approx(c["update_ms"] * 120 / 1e3)
    assert 0 < out["plant_s_median"] < math.inf  # measured alone: no order against the C run's wall time (load)
    assert abs(c["c_hat"] - out["runs"]["python"][0]["c_hat"]) < 0.05  # one plant, one stream, two engines

"""The RK4 baseline matched to a jet-matching config: which baseline config a jet config has."""
from pathlib import Path

import pytest

from baselines.matched import baseline_config

ROOT = Path(__file__).resolve().parents[2]


def test_a_variants_baseline_is_its_data_sets_and_a_missing_one_is_named(tmp_path):
    configs = ROOT / "configs"
    for name, data_set in (("dfki_pendulum_extrapolate", "dfki_pendulum"), ("emps_affine", "emps"),
                           ("dfki_double_pendulum_linear", "dfki_double_pendulum"), ("emps", "emps")):
        assert baseline_config(configs / f"{name}.yaml") == configs / f"baseline_{data_set}.yaml"
    with pytest.raises(FileNotFoundError, match=r"no RK4 baseline config for .*mine_affine.yaml: looked for "
                                                  r".*baseline_mine_affine.yaml and .*baseline_mine.yaml"):
        baseline_config(tmp_path / "mine_affine.yaml")

"""A peer's stream is the jet-matching run's, and a run in a child process names what failed."""
import numpy as np
import pytest
import torch

from baselines.peers import config_stream, run_measured
from torch_ude import FrictionPendulum
from tests.baselines.peers.helpers import CASE_A, FRICTION


def test_the_config_stream_is_the_jet_matching_stream():
    dm, rec = config_stream(FRICTION, 0.02, 3, duration=2.0)
    assert isinstance(dm.system, FrictionPendulum) and dm.case == "A" and dm.seed == 3 and dm.noise == 0.02
    chunks = []
    while dm.live:
        chunks.append(dm.next_chunk())
    assert np.array_equal(torch.cat([c["y"] for c in chunks]).numpy(), rec.y)
    assert np.array_equal(torch.cat([c["segment"] for c in chunks]).numpy(), rec.segment)


def test_a_failed_run_names_the_run_and_the_error():
    stream = config_stream(CASE_A, 0.01, 0, duration=2.0)
    with pytest.raises(RuntimeError, match=r"the torchdiffeq run .*'plant': 'SinglePendulum', 'noise': 0.01, "
                                           r"'seed': 0.* failed: ValueError: mode must be one of"):
        run_measured("torchdiffeq", stream=stream, options={"mode": "continuous", "iterations": 1})

"""Shared test settings: float64 by default and fixed seeds."""
import numpy as np
import pytest
import torch


@pytest.fixture(autouse=True)
def _float64_and_seeds():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    torch.manual_seed(0)
    np.random.seed(0)
    yield
    torch.set_default_dtype(old)

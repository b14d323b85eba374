"""Shared test settings: float64 by default, fixed seeds, one intra-op thread.

The tensors in these tests are tiny: one thread is faster than two and does not stall
when the other core is busy. Under pytest-xdist (``-n 2`` in pyproject.toml) each worker
has one core, so the processes a test starts (``torch-ude fit``, notebook kernels, solver
workers) get one OpenMP thread as well.
"""
import os

import numpy as np
import pytest
import torch

torch.set_num_threads(1)
if "PYTEST_XDIST_WORKER" in os.environ:
    for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_name, "1")


@pytest.fixture(autouse=True)
def _float64_and_seeds():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    torch.manual_seed(0)
    np.random.seed(0)
    yield
    torch.set_default_dtype(old)


#: The files that take minutes (on the 2-core CI machine), longest first. They run first, so
#: that the two pytest-xdist workers share them and the short files fill in behind them,
#: rather than one worker running a long file alone at the end (pyproject.toml keeps this
#: order with --no-loadscope-reorder).
LONG_FILES = ("tests/notebooks/test_notebooks.py", "tests/torch_ude/training/test_run_folder.py",
              "tests/benchmarks/real/test_emps.py", "tests/microcontroller/test_firmware.py",
              "tests/microcontroller/test_c_trainer.py", "tests/torch_ude/training/test_trust.py",
              "tests/torch_ude/training/test_module.py", "tests/benchmarks/real/test_dfki_pem.py")


def pytest_collection_modifyitems(config, items):
    """Move the tests of `LONG_FILES` to the front, in that order (the rest keep theirs)."""
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(LONG_FILES)))

"""Fixtures of the mhe tests: one L4CasADi compilation per session, in a temporary build dir."""
import pytest
import torch

from mhe import WindowSolver
from tests.mhe.helpers import estimator, vehicle_windows


@pytest.fixture(scope="session")
def gray_solver(tmp_path_factory):
    """A gray-box estimator (vehicle physics + tiny residual), its in-process solver and 2 windows."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    est = estimator("gray", 6)
    solver = WindowSolver(est, tmp_path_factory.mktemp("l4casadi"), name="gray")
    yield est, solver, vehicle_windows(6, 2)
    solver.close()
    torch.set_default_dtype(old)

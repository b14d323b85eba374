"""The CasADi side of a model with a neural residual does not depend on torch's default dtype (issue 35, item 1).

L4CasADi traces the network with example inputs in the default dtype: float32 in the CLI (``torch-ude
validate``) and in a window solver's worker processes, float64 where a benchmark sets it. Traced in float32,
the derivatives IPOPT sees were rounded to float32, and on the same weights the CLI and ``benchmarks.mhe.iac``
scored the gray-box IAC model differently (one of 151 validation windows in another local minimum).
"""
import casadi as cs
import numpy as np
import pytest
import torch

from mhe.models.casadi_model import CasadiDynamics
from tests.mhe.helpers import estimator, residual


def _derivatives(dyn: CasadiDynamics, model, points: np.ndarray) -> np.ndarray:
    """The Jacobian of ``f_c`` in (x, u) and the Hessian of a fixed combination of it (the network called at the top
    level, where L4CasADi gives second derivatives), at each point (x, u)."""
    x, u, w = cs.MX.sym("x", 3), cs.MX.sym("u", 2), cs.MX.zeros(3)
    p = cs.DM(CasadiDynamics.parameter_values(model))
    xu = cs.vertcat(x, u)
    field = dyn.field(x, u, w, p)
    jac = cs.jacobian(field, xu)
    hess = cs.jacobian(cs.jacobian(cs.dot(cs.DM([0.3, -1.1, 0.7]), field), xu).T, xu)
    f = cs.Function("d", [x, u], [cs.vertcat(cs.vec(jac), cs.vec(hess))])
    return np.stack([np.array(f(v[:3], v[3:])).ravel() for v in points])


def _build(tmp_path, name: str, dtype: torch.dtype, model) -> CasadiDynamics:
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        return CasadiDynamics(model, tmp_path / name, name=name)
    finally:
        torch.set_default_dtype(old)


def test_the_residual_derivatives_do_not_depend_on_the_default_dtype(tmp_path):
    model = estimator("gray", 3).model
    gen = torch.Generator().manual_seed(0)
    points = (torch.tensor([15.0, 0.0, 0.05, 0.01, 0.2])
              + torch.tensor([3.0, 0.2, 0.05, 0.01, 0.2]) * torch.randn(8, 5, generator=gen, dtype=torch.float64))
    points = points.numpy()
    ref = _derivatives(_build(tmp_path, "f64", torch.float64, model), model, points)
    dyn = _build(tmp_path, "f32", torch.float32, model)  # as in torch-ude and in the solver's workers
    assert np.array_equal(_derivatives(dyn, model, points), ref)
    # new weights pushed without recompiling (L4CasADi's update traces again): the same as a new build
    new = residual(seed=5)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        dyn.load_residual(new.state_dict(), version=1)
    finally:
        torch.set_default_dtype(old)
    model.residual.load_state_dict(new.state_dict())
    ref_new = _derivatives(_build(tmp_path, "f64_new", torch.float64, model), model, points)
    assert not np.array_equal(ref_new, ref)
    assert np.array_equal(_derivatives(dyn, model, points), ref_new)


def test_float64_default_restores_the_callers_dtype():
    from mhe.models.model import float64_default

    torch.set_default_dtype(torch.float32)
    with pytest.raises(RuntimeError), float64_default():
        assert torch.get_default_dtype() == torch.float64
        raise RuntimeError("inside")
    assert torch.get_default_dtype() == torch.float32

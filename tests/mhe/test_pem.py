"""Outer PEM loop: Adam steps lower J; a non-finite hypergradient is never applied."""
from collections.abc import Mapping, Sequence
from types import SimpleNamespace

import torch

from mhe import (BoundedParameters, MHESettings, MovingHorizonEstimator, PEMIdentifier, PhysicsField,
                 StateSpaceModel, WindowSolver, make_windows)
from tests.mhe.helpers import estimator, vehicle_windows


class _SqrtDecay(PhysicsField):
    """x' = -sqrt(a) x + u: at a = 0 the field is fine but d/da is infinite."""

    state_names = ("x",)
    input_names = ("u",)

    def __init__(self, a: float) -> None:
        super().__init__(BoundedParameters({"a": a}))

    def vector_field(self, x: Sequence, u: Sequence, p: Mapping[str, object], ops: SimpleNamespace) -> list:
        return [-ops.sqrt(p["a"]) * x[0] + u[0]]


def test_pem_steps_lower_the_prediction_error(tmp_path):
    est, windows = estimator("physics", 8, perturb=1.15), vehicle_windows(8, 6)
    pem = PEMIdentifier(est, windows, WindowSolver(est, tmp_path), lr=0.02)
    hist = pem.fit(6)
    assert all(h.applied and h.n_failed == 0 for h in hist)
    assert hist[-1].loss < 0.5 * hist[0].loss


def test_a_non_finite_hypergradient_is_never_applied(tmp_path, caplog):
    model = StateSpaceModel(_SqrtDecay(0.0), dt=0.1, measured=(0,))
    t = torch.arange(30, dtype=torch.float64)
    windows = make_windows(torch.sin(0.3 * t)[:, None], torch.cos(0.2 * t)[:, None], horizon=5, stride=5)
    est = MovingHorizonEstimator(model, MHESettings(5, (0.1,), (0.1,)), (0.0,), (1.0,))
    before = {n: p.detach().clone() for n, p in est.named_parameters()}
    pem = PEMIdentifier(est, windows, WindowSolver(est, tmp_path), lr=0.1)
    step = pem.step()
    assert step.n_failed == 0 and not step.applied and pem.skipped == 1
    assert "Non-finite hypergradient" in caplog.text
    assert all(torch.equal(p.detach(), before[n]) for n, p in est.named_parameters())

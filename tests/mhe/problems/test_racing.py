"""The neural-only racing problem of the hypergradient timings (mhe.problems.racing): every weight has a gradient."""
import torch

from mhe import hypergradient_adjoint
from mhe.problems.racing import RacingSimulation, neural_racing_estimator, neural_racing_problem
from tests.mhe.helpers import torch_kkt_point


def test_the_neural_problem_has_no_physics_and_its_seeded_last_layer_gives_every_weight_a_gradient():
    problem = neural_racing_problem(4, RacingSimulation(steps=120).record(), horizon=6, windows=2)
    est = neural_racing_estimator(problem)
    assert est.model.physics is None and est.model.n_x == 3 and len(problem.windows) == 2
    last = est.model.residual.mlp.ordered_parameters()[-2]
    assert bool((last != 0).all()) and torch.equal(last, neural_racing_estimator(problem).model.residual.mlp
                                                   .ordered_parameters()[-2])
    assert not torch.equal(last, neural_racing_estimator(problem, seed=2).model.residual.mlp.ordered_parameters()[-2])
    windows = problem.windows
    grads = hypergradient_adjoint(est, torch_kkt_point(est, windows), windows).grads
    weights = {n: g for n, g in grads.items() if "residual" in n}
    assert weights and all(bool((g != 0).any()) for g in weights.values())

"""Each condition of a compound settings check fails with its own message (issue 34, item 4)."""
import pytest

from mhe.estimator.arrival import arrival_bounds
from mhe.estimator.estimator import MHESettings
from mhe.estimator.solver import SolverSettings
from mhe.models.checks import require
from mhe.models.model import StateSpaceModel
from mhe.models.output import SensorOutput
from mhe.outer.gauss_newton import GaussNewtonStopping
from mhe.outer.noise_fit import NoiseFitSettings
from mhe.outer.outer import OuterSettings
from tests.mhe.helpers import estimator, vehicle_windows


def test_require_raises_the_first_failed_message_only():
    require([(True, "never"), (1, "never")])
    with pytest.raises(ValueError, match=r"^second$"):
        require([(True, "first"), (False, "second"), (False, "third")])


@pytest.mark.parametrize("make, setting", [
    (lambda: GaussNewtonStopping(ftol=-1.0), "outer.stopping.ftol"),
    (lambda: GaussNewtonStopping(patience=0), "outer.stopping.patience"),
    (lambda: GaussNewtonStopping(xtol=-1.0), "outer.stopping.xtol"),
    (lambda: GaussNewtonStopping(max_damping=-1.0), "outer.stopping.max_damping"),
    (lambda: NoiseFitSettings(steps=-1), "outer.noise_fit.steps"),
    (lambda: NoiseFitSettings(check_every=0), "outer.noise_fit.check_every"),
    (lambda: NoiseFitSettings(lr=0.0), "outer.noise_fit.lr "),
    (lambda: NoiseFitSettings(lr=1e-3, lr_min=1e-2), "outer.noise_fit.lr_min"),
    (lambda: NoiseFitSettings(weight_decay=-1.0), "outer.noise_fit.weight_decay"),
    (lambda: OuterSettings(lr=0.0), "outer.lr "),
    (lambda: OuterSettings(lr=1e-3, lr_min=1.0), "outer.lr_min"),
    (lambda: OuterSettings(damping=0.0), "outer.damping"),
    (lambda: OuterSettings(max_trials=0), "outer.max_trials"),
    (lambda: OuterSettings(verify_starts=-1), "outer.verify_starts"),
    (lambda: OuterSettings(cold_every=-1), "outer.cold_every"),
    (lambda: MHESettings(4, (1.0,), (0.0,)), "mhe.measurement_std"),
    (lambda: NoiseFitSettings(held_out=1.0), "outer.noise_fit.held_out"),
    (lambda: SolverSettings(workers=0), "solver.workers"),
    (lambda: SolverSettings(batch=0), "solver.batch"),
    (lambda: SolverSettings(num_threads=0), "solver.num_threads"),
    (lambda: SensorOutput((0, 1), offset=[0.0]), "offset needs one entry per output"),
    (lambda: SensorOutput((0, 1), gain=[1.0, 0.0]), "every output gain must be nonzero"),
    (lambda: MHESettings(4, (-1.0,), (1.0,)), "mhe.process_std"),
    (lambda: MHESettings(4, (1.0,), (1.0,), tol=0.0), "mhe.tol"),
    (lambda: MHESettings(4, (1.0,), (1.0,), max_iter=0), "mhe.max_iter"),
    (lambda: MHESettings(4, (1.0,), (1.0,), refine_steps=-1), "mhe.refine_steps"),
    (lambda: MHESettings(4, (1.0,), (1.0,), kkt_tol=0.0), "mhe.kkt_tol"),
])
def test_each_failed_condition_is_named(make, setting):
    with pytest.raises(ValueError, match=f"^{setting}"):
        make()


def test_the_arrival_boxes_name_margin_and_std_range_apart():
    est, windows = estimator("physics", 6), vehicle_windows(6, 2)
    with pytest.raises(ValueError, match="margin must be >= 0; got -0.1"):
        arrival_bounds(windows, est.model, {1: (-1.0, 1.0)}, margin=-0.1, std_range=(1.0, 0.5))
    with pytest.raises(ValueError, match="std_range must be"):
        arrival_bounds(windows, est.model, {1: (-1.0, 1.0)}, std_range=(1.0, 0.5))


def test_a_shape_check_after_a_failed_rank_check_is_not_reached():
    """The rank is checked on its own first: a scalar is a ValueError, not an IndexError from the next check."""
    import numpy as np
    import torch
    from mhe.peers.cramer_rao import one_step_fisher
    from mhe.peers.state_pem import fit_on_states
    from mhe.models.vehicle import SingleTrackVehicle
    model = StateSpaceModel(SingleTrackVehicle(), measured=(0, 2))
    with pytest.raises(ValueError, match=r"states must have shape \(T, 3\)"):
        fit_on_states(model, np.float64(1.0), np.zeros((3, 2)), (0.1, 0.1, 0.1))
    with pytest.raises(ValueError, match=r"states must have shape \(T, 3\)"):
        one_step_fisher(model, torch.tensor(1.0), torch.zeros(3, 2), (0.1, 0.1))

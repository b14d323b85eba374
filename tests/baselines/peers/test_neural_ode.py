"""torchdiffeq's gradient of the baseline's objective against the hand-written discrete adjoint."""
import pytest

from baselines import ShootingObjective, initial_field, observe, shooting_windows, stream_calibration
from baselines.peers import TorchdiffeqObjective, config_stream
from torch_ude import SinglePendulum
from tests.baselines.peers.helpers import CASE_A


@pytest.mark.parametrize("mode", ["backprop", "adjoint"])
def test_torchdiffeq_gradient_matches_the_hand_written_discrete_adjoint(mode):
    _, rec = config_stream(CASE_A, 0.01, 0, duration=4.0)
    cal = stream_calibration(rec)
    field = initial_field(SinglePendulum(), "A", rec, 0, cal=cal)
    windows = shooting_windows(observe(rec, 50.0), 6, 5)
    ours = ShootingObjective(field, windows, cal.x_rms).gradient()
    theirs = TorchdiffeqObjective(field, windows, cal.x_rms, mode).gradient()
    # torchdiffeq's "rk4" is Kutta's 3/8 rule, ours the classical one: equal to O(h^5) per step
    assert float(theirs.loss) == pytest.approx(float(ours.loss), rel=1e-6)
    for a, b in zip(theirs.grads, ours.grads):
        assert float((a - b).norm()) <= 1e-5 * float(b.norm()) + 1e-12
    assert float((theirs.state_grad - ours.state_grad).norm()) <= 1e-5 * float(ours.state_grad.norm())
    with pytest.raises(ValueError, match=r"mode must be one of \['backprop', 'adjoint'\]"):
        TorchdiffeqObjective(field, windows, cal.x_rms, "continuous")

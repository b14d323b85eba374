"""torch_ude.jet_regression: the lab's model form recovered exactly from the jets of a simulated log, clear errors."""
import numpy as np
import pytest
import torch

from torch_ude.jet_regression import fit_lab_form, jet_targets
from torch_ude.prediction import rk4_input_rollout
from torch_ude.recorded import RecordedLog
from torch_ude.systems.controlled import TorquePendulumModel

TRUE = {"inertia": 0.14, "mass_com": 0.32, "viscous": 0.05, "coulomb": 0.02, "offset": -0.07}


def _simulated_log(fs: float = 100.0, seconds: float = 40.0) -> RecordedLog:
    """A noise-free log of TRUE driven by a smooth multisine torque, integrated at 10 fs and decimated."""
    model = TorquePendulumModel(gravity=9.81, **TRUE)
    t = np.arange(0.0, seconds, 0.1 / fs)
    tau = 1.2 * np.sin(2.1 * t) + 0.8 * np.sin(5.3 * t + 1.0) + 0.4 * np.sin(0.7 * t)
    u = torch.as_tensor(tau, dtype=torch.float64).reshape(-1, 1, 1)
    x = rk4_input_rollout(model, torch.tensor([[0.1, 0.0]], dtype=torch.float64), u, 0.1 / fs)[:, 0].numpy()
    seg = np.concatenate([x, tau[:, None]], axis=1)[::10]
    return RecordedLog(fs=fs, names=("position", "velocity", "torque"), n_states=2, segments=[seg], starts=[0.0])


def test_the_lab_form_is_recovered_from_noise_free_jets():
    centre, accel = jet_targets([_simulated_log()], spacing=1)
    assert centre.shape == (accel.shape[0], 3) and accel.shape[0] == 4000 - 10
    fitted = fit_lab_form(centre, accel, 9.81).init_args()
    for name in ("inertia", "mass_com", "offset"):
        assert fitted[name] == pytest.approx(TRUE[name], rel=1e-3), name
    # the stiff atan(100 q') against a window-smoothed q': viscous and Coulomb trade a little (2 % and 9 %)
    assert fitted["viscous"] == pytest.approx(TRUE["viscous"], rel=0.05)
    assert fitted["coulomb"] == pytest.approx(TRUE["coulomb"], rel=0.15)


def test_bad_input_gives_clear_errors():
    log = _simulated_log(seconds=1.0)
    with pytest.raises(ValueError, match="spacing must be an integer >= 1"):
        jet_targets([log], spacing=0)
    with pytest.raises(ValueError, match="no window of 11 taps at spacing 20"):
        jet_targets([log], spacing=20)
    two_inputs = RecordedLog(fs=100.0, names=("q", "v", "a", "b"), n_states=2, segments=[np.zeros((50, 4))])
    with pytest.raises(ValueError, match=r"needs logs of \(q, q', tau\)"):
        jet_targets([two_inputs], spacing=1)
    centre, accel = jet_targets([log], spacing=1)
    with pytest.raises(ValueError, match="torque gain .* is not positive"):
        fit_lab_form(centre, -accel, 9.81)

"""Input history: earlier inputs as extra columns, padded at each stretch's start; a gray-box model that reads them."""
import json

import numpy as np
import pytest
import torch

from mhe import (MHESettings, MovingHorizonEstimator, NeuralResidual, Recording, ResidualSettings, SingleTrackVehicle,
                 StateSpaceModel)
from mhe.data.input_history import history_names, with_input_history
from mhe.models.casadi_model import CasadiDynamics
from mhe.training.outputs import _export_model
from tests.mhe.helpers import IN_SCALE, OUT_SCALE, racing_problem


def _recording(t: int = 7, breaks: tuple[int, ...] = ()) -> Recording:
    u = torch.stack([torch.arange(t, dtype=torch.float64), 100.0 + torch.arange(t, dtype=torch.float64)], dim=1)
    return Recording(torch.zeros(t, 3), u, torch.zeros(t, 2), 0.04, breaks)


def test_the_columns_hold_the_earlier_inputs_and_repeat_each_stretchs_first_input():
    rec = _recording(7, breaks=(4,))
    out = with_input_history(rec, 2)
    assert out.inputs.shape == (7, 6) and out.breaks == (4,) and out.dt == rec.dt and out.outputs is rec.outputs
    k = out.inputs[:, 0].tolist()
    assert k == [0, 1, 2, 3, 4, 5, 6]
    assert out.inputs[:, 2].tolist() == [0, 0, 1, 2, 4, 4, 5]  # u_{k-1}: no input before rows 0 and 4
    assert out.inputs[:, 4].tolist() == [0, 0, 0, 1, 4, 4, 4]  # u_{k-2}
    assert torch.equal(out.inputs[:, 5], 100.0 + out.inputs[:, 4])
    assert with_input_history(rec, 0) is rec
    assert history_names(("delta", "gamma"), 2) == ["delta", "gamma", "delta[k-1]", "gamma[k-1]", "delta[k-2]",
                                                     "gamma[k-2]"]


@pytest.mark.parametrize("lags", [-1, 1.5, True])
def test_bad_history_lengths_are_rejected(lags):
    with pytest.raises(ValueError, match="must be an integer >= 0"):
        with_input_history(_recording(), lags)
    with pytest.raises(ValueError, match="input_lags .* must be an integer >= 0"):
        ResidualSettings(4, input_lags=lags)


def test_a_history_needs_inputs_and_a_seeded_residual():
    rec = Recording(torch.zeros(5, 1), torch.zeros(5, 0), torch.zeros(5, 1), 0.1)
    with pytest.raises(ValueError, match="needs a recording with inputs"):
        with_input_history(rec, 1)
    with pytest.raises(ValueError, match="leave in_scale, out_scale, seed and input_lags unset"):
        ResidualSettings(4, start="runs/any", input_lags=1)


def test_a_gray_box_problem_with_history_feeds_the_network_all_columns_and_the_physics_the_current_ones():
    plain = racing_problem(residual=ResidualSettings(4, in_scale=IN_SCALE, seed=3))
    plain.windows
    lagged = plain.replace(residual=ResidualSettings(4, in_scale=IN_SCALE, seed=3, input_lags=2))
    assert lagged.logged is plain.logged  # one recording, two views
    assert lagged.recording.inputs.shape == (120, 6) and plain.recording.inputs.shape == (120, 2)
    assert torch.equal(lagged.windows.u[..., :2], plain.windows.u) and lagged.windows.u.shape[-1] == 6
    model = lagged.model()
    assert model.residual.mlp.sizes == (9, 4, 4, 3) and model.n_u == 6 and model.physics.n_u == 2
    assert model.residual.in_scale.tolist() == list(IN_SCALE) + list(IN_SCALE[3:]) * 2
    with torch.no_grad():
        model.residual.mlp.weight2.normal_()
        x, u = lagged.recording.states[:8], lagged.recording.inputs[:8]
        w = torch.zeros_like(x)
        physics_only = StateSpaceModel(model.physics, dt=model.dt, measured=model.measured)
        assert torch.allclose(model.field(x, u, w) - model.residual(x, u), physics_only.field(x, u[:, :2], w),
                              rtol=0, atol=1e-12)
        moved = u.clone()
        moved[:, 2:] += 1.0  # only the earlier inputs change: only the network's part changes
        assert not torch.allclose(model.field(x, moved, w), model.field(x, u, w))
    assert lagged.describe()["residual"]["input_lags"] == 2


def test_models_whose_physics_reads_more_inputs_than_the_model_holds_are_rejected():
    with pytest.raises(ValueError, match="only a residual may read more"):
        StateSpaceModel(SingleTrackVehicle(), n_u=4)
    with pytest.raises(ValueError, match="The residual's \\(n_x, n_u\\) \\(3, 4\\) differ"):
        StateSpaceModel(SingleTrackVehicle(), NeuralResidual(3, 4), n_u=6)
    with pytest.raises(ValueError, match="only a residual may read more"):
        StateSpaceModel(SingleTrackVehicle(), NeuralResidual(3, 1))


def test_casadi_and_the_export_read_the_history_like_torch(tmp_path):
    lagged = NeuralResidual(3, 6, width=4, in_scale=IN_SCALE + IN_SCALE[3:] * 2, out_scale=OUT_SCALE, seed=3)
    with torch.no_grad():
        for p in lagged.mlp.parameters():  # every weight non-zero, so every input column matters
            p.normal_(std=0.3, generator=torch.Generator().manual_seed(p.numel()))
    model = StateSpaceModel(SingleTrackVehicle(), lagged, dt=0.02, measured=(0, 2))
    dyn = CasadiDynamics(model, tmp_path, name="history")
    gen = torch.Generator().manual_seed(0)
    x = torch.stack([1.0 + torch.rand(5, generator=gen), 0.1 * torch.randn(5, generator=gen),
                     torch.randn(5, generator=gen)], dim=1)
    u, w = 0.3 * torch.randn(5, 6, generator=gen), 0.1 * torch.randn(5, 3, generator=gen)
    p = CasadiDynamics.parameter_values(model)
    ours = np.stack([np.asarray(dyn.step(x[i].numpy(), u[i].numpy(), w[i].numpy(), p)).ravel() for i in range(5)])
    with torch.no_grad():
        ref = model.step(x, u, w).numpy()
    assert np.allclose(ours, ref, rtol=1e-6, atol=1e-6)  # L4CasADi evaluates the network in float32
    est = MovingHorizonEstimator(model, MHESettings(4, (1.0, 1.0, 1.0), (1.0, 1.0)), (1.5, 0, 0), (1, 1, 1))
    _, sidecar = _export_model(tmp_path, est, {})
    meta = json.loads(sidecar.read_text())
    assert meta["input_names"] == history_names(("delta", "gamma"), 2) and meta["input"]["shape"][1] == ["B", 6]

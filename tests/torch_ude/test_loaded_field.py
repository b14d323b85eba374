"""`torch_ude.load_field`: an exported field as a user object (issue 35, item 4)."""
import json

import numpy as np
import pytest
import torch

from torch_ude import LoadedField, export_field, load_field
from torch_ude.prediction import prediction_errors, rk4_input_rollout
from torch_ude.recorded import read_log
from torch_ude.training.recorded import RecordedPlant
from tests.torch_ude.helpers import forced_pendulum_log, set_test_envelope, variant_field, write_csv

COLS = dict(time="time", states=["position", "velocity"], inputs=["torque"])


@pytest.fixture
def exported(tmp_path):
    """A random torque-pendulum field reading the angle as (sin, cos), with an envelope, exported."""
    field = variant_field("torque", 3, periodic=(0,), linear=True)
    gen = torch.Generator().manual_seed(1)
    x, u = torch.randn(60, 2, generator=gen, dtype=torch.float64), torch.randn(60, 1, generator=gen, dtype=torch.float64)
    set_test_envelope(field, x, u)
    plant = RecordedPlant(field.known, COLS["states"], COLS["inputs"], periodic=["position"])
    export_field(field, tmp_path / "run", plant, "RECORDED")
    return field, tmp_path / "run", x, u


def test_the_loaded_field_evaluates_f_on_separate_states_and_inputs(exported):
    field, folder, x, u = exported
    loaded = load_field(folder)
    assert isinstance(loaded, LoadedField) and (loaded.n_states, loaded.n_inputs) == (2, 1)
    assert torch.allclose(loaded.evaluate(x, u), field.evaluate(x, u), rtol=1e-13, atol=1e-13)
    assert torch.allclose(loaded(x, u), field(x, u), rtol=1e-13, atol=1e-13)
    assert torch.equal(loaded.outside(x, u), field.outside(x, u)) and 0 < int(field.outside(x, u).sum()) < 60
    # the file itself names the folder too, and the object unpacks as the (program, sidecar) pair it replaces
    program, sidecar = load_field(folder / "field.pt")
    assert sidecar == json.loads((folder / "field.json").read_text())
    assert torch.allclose(program(torch.cat((x, u), 1)), field.evaluate(x, u), rtol=1e-13, atol=1e-13)


def test_the_loaded_field_rejects_inputs_of_the_wrong_shape_in_one_line(exported):
    _, folder, x, u = exported
    loaded = load_field(folder)
    with pytest.raises(ValueError, match=r"reads 1 recorded input\(s\) \['torque'\]: pass u of shape \(N, 1\)"):
        loaded.evaluate(x)
    with pytest.raises(ValueError, match="u must have one row per state"):
        loaded.evaluate(x, u[:5])
    with pytest.raises(ValueError, match=r"inputs must have shape \(K \+ 1, 1\)"):
        loaded.rollout(x[0], u[:, 0], 0.01)


def test_a_rollout_from_a_state_with_a_recorded_input_is_the_fields_rk4_rollout(exported):
    field, folder, x, u = exported
    loaded = load_field(folder)
    one = loaded.rollout(x[0], u[:25], 0.01)
    assert one.shape == (25, 2)
    reference = rk4_input_rollout(field.evaluate_unchecked, x[:1], u[:25].unsqueeze(1), 0.01)[:, 0]
    assert torch.allclose(one, reference, rtol=1e-12, atol=1e-12)
    batch = loaded.rollout(x[:4], u[:25].unsqueeze(1).expand(25, 4, 1).contiguous(), 0.01)
    assert batch.shape == (25, 4, 2) and torch.allclose(batch[:, 0], reference, rtol=1e-12, atol=1e-12)


def test_prediction_errors_accept_the_loaded_field_and_equal_the_fields(exported, tmp_path):
    field, folder, _, _ = exported
    write_csv(tmp_path / "log.csv", forced_pendulum_log(duration=4.0, fs=200.0, seed=2))
    log = read_log(tmp_path / "log.csv", fs=100.0, **COLS)
    loaded, direct = prediction_errors(load_field(folder), [log], (0.5,)), prediction_errors(field, [log], (0.5,))
    for key in ("one_step_nrmse", "open_loop_0.5s_nrmse", "outside_envelope"):
        assert np.isclose(loaded[key], direct[key], rtol=1e-10), key
    assert loaded["open_loop_windows_0.5s"] == direct["open_loop_windows_0.5s"] > 0


@pytest.mark.parametrize("status, said", [("failed", r"has no trained model: its metrics.json says \"failed\" \(no "
                                                     r"jets\)"),
                                          ("running", r"has no trained model yet: its metrics.json says \"running\"")])
def test_a_run_folder_without_a_trained_model_says_why(tmp_path, status, said):
    (tmp_path / "metrics.json").write_text(json.dumps({"status": status, "reason": "no jets"}))
    with pytest.raises(FileNotFoundError, match=said):
        load_field(tmp_path)

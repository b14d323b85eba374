"""One-step PEM on given states: exact Jacobian, recovery from true states, seeded starts, bad input; a residual's
form fitted to the physics' one-step residuals and scored on held-out rows."""
from pathlib import Path

import numpy as np
import pytest
import torch

from mhe import SingleTrackVehicle, StateSpaceModel
from mhe.data.logs import BayesRaceRecording
from mhe.models.vehicle import BAYESRACE_BOUNDS, BAYESRACE_TRUTH, IDENTIFIED
from mhe.peers.state_pem import (fit_on_states, fit_residual_on_states, jittered_starts, residual_scales,
                                 state_residuals)
from mhe.problems.racing import MEASURED, RacingSimulation, start_values
from mhe.training import load_experiment
from tests.mhe.datasets import bayesrace_file, data_file

ROOT = Path(__file__).resolve().parents[3]
IAC_DATA, IAC_GRAY = "iac/LVMS_23_01_04_B.csv", "configs/mhe_iac_gray.yaml"
IAC_TINY = ["--data.problem.recording.init_args.part", "[0.0, 0.05]", "--trainer.logger", "false"]
BAYESRACE_16 = ("Bf", "Cf", "Df", "Ef", "Shf", "Svf", "Br", "Cr", "Dr", "Er", "Shr", "Svr", "Cm1", "Cm2", "Cr0", "Cr2")


def rel_errors(values):
    return np.array([abs(v - BAYESRACE_TRUTH[n]) / abs(BAYESRACE_TRUTH[n]) for n, v in values.items()])


def test_recovers_parameters_from_true_states_of_a_simulation():
    rec = RacingSimulation(steps=800, process_std=(1e-12, 1e-12, 1e-12), measurement_std=(1e-3, 1e-3), seed=2).record()
    start = start_values(0.3, seed=1)
    model = StateSpaceModel(SingleTrackVehicle(start), measured=MEASURED)
    assert rel_errors({n: start[n] for n in IDENTIFIED}).mean() == pytest.approx(0.3)
    fit = fit_on_states(model, rec.states.numpy(), rec.inputs.numpy(), (0.01, 0.01, 0.1))
    assert set(fit.values) == set(IDENTIFIED) and fit.transitions == 799
    assert rel_errors(fit.values).max() < 1e-4
    assert fit.at_bounds == ()


def test_recovers_bayesrace_parameters_from_its_euler_states_from_67_percent_off():
    rec = BayesRaceRecording(str(bayesrace_file("DYN-PP-ETHZ"))).record()
    start = start_values(0.6795, seed=0, identify=BAYESRACE_16)
    model = StateSpaceModel(SingleTrackVehicle(start, identify=BAYESRACE_16, abs_vx=True), measured=MEASURED,
                            discretization="euler")
    fit = fit_on_states(model, rec.states.numpy(), rec.inputs.numpy(), (0.01, 0.01, 0.1))
    assert rel_errors(fit.values).max() < 1e-8


def test_breaks_remove_transitions_and_the_best_start_is_kept():
    a, b = (RacingSimulation(steps=100, process_std=(1e-12,) * 3, seed=s).record() for s in (2, 5))
    states = np.concatenate([a.states.numpy(), b.states.numpy()])  # two recordings: a jump at row 100
    inputs = np.concatenate([a.inputs.numpy(), b.inputs.numpy()])
    model = StateSpaceModel(SingleTrackVehicle(), measured=MEASURED)
    starts = jittered_starts(BAYESRACE_TRUTH, IDENTIFIED, 3, 0.05, seed=0, bounds=BAYESRACE_BOUNDS)
    fit = fit_on_states(model, states, inputs, (0.01, 0.01, 0.1), starts, breaks=(100,))
    assert fit.transitions == 198 and len(fit.starts) == 3
    assert fit.cost == min(s["cost"] for s in fit.starts) and rel_errors(fit.values).max() < 1e-4


def test_jittered_starts_stay_within_the_spread_and_bounds():
    starts = jittered_starts(BAYESRACE_TRUTH, IDENTIFIED, 10, 0.05, seed=4, bounds=BAYESRACE_BOUNDS)
    assert len(starts) == 10 and starts[0] != starts[1]
    for s in starts:
        assert rel_errors({n: s[n] for n in IDENTIFIED}).max() <= 0.05
        assert all(BAYESRACE_BOUNDS[n].contains(s[n]) for n in IDENTIFIED)
        assert s["m"] == BAYESRACE_TRUTH["m"]
    assert jittered_starts(BAYESRACE_TRUTH, IDENTIFIED, 10, 0.05, seed=4, bounds=BAYESRACE_BOUNDS) == starts


def test_bad_input_is_an_error():
    model = StateSpaceModel(SingleTrackVehicle(), measured=MEASURED)
    x, u = np.zeros((10, 3)), np.zeros((10, 2))
    with pytest.raises(ValueError, match=r"step inputs must have shape \(T, 2\)"):
        fit_on_states(model, x, u[:9], (0.01, 0.01, 0.1))
    with pytest.raises(ValueError, match="on or outside their bounds"):
        fit_on_states(model, x + 1.0, u, (0.01, 0.01, 0.1), [{"Bf": 100.0}])
    with pytest.raises(ValueError, match="count must be >= 1"):
        jittered_starts(BAYESRACE_TRUTH, IDENTIFIED, 0, 0.05, seed=0)


def test_state_residuals_are_zero_for_the_true_model_and_skip_the_gaps():
    truth = StateSpaceModel(SingleTrackVehicle(), dt=0.02, measured=MEASURED)
    rec = RacingSimulation(steps=60, measurement_std=(0.0, 0.0), process_std=(0.0, 0.0, 0.0)).record()
    assert np.abs(state_residuals(truth, rec)).max() < 1e-12
    gapped = type(rec)(rec.states, rec.inputs, rec.outputs, rec.dt, breaks=(20, 40))
    res = state_residuals(truth, gapped)
    assert res.shape == (len(rec.outputs) - 1 - 2, 3)
    off = StateSpaceModel(SingleTrackVehicle({**BAYESRACE_TRUTH, "Df": 1.1 * BAYESRACE_TRUTH["Df"]}), dt=0.02,
                          measured=MEASURED)
    assert np.abs(state_residuals(off, rec)).max() > 1e-6


def test_the_fit_explains_the_training_rows_and_scores_the_held_out_ones(monkeypatch):
    data_file(IAC_DATA)
    monkeypatch.chdir(ROOT)
    problem = load_experiment(IAC_GRAY, [*IAC_TINY, "--data.problem.residual.outputs", "[0, 1]",
                                         "--data.problem.residual.width", "8"]).problem
    untrained = fit_residual_on_states(problem, seed=0, steps=0)
    fitted = fit_residual_on_states(problem, seed=0, steps=300)
    rows = len(problem.recording.states) - 1
    assert fitted["channels"] == [0, 1] and fitted["fit_rows"] == int(0.7 * rows)
    assert fitted["fit_rows"] + fitted["held_out_rows"] == rows
    # a zero network explains nothing (R^2 <= 0); 300 Adam steps explain part of the training rows
    assert all(r <= 0 for r in untrained["train_r2"])
    assert all(f > max(u, 0.05) for f, u in zip(fitted["train_r2"], untrained["train_r2"]))
    assert fitted != fit_residual_on_states(problem, seed=1, steps=300)  # the seed is the network's


def test_problems_the_residual_fit_cannot_use_are_rejected(monkeypatch):
    data_file(IAC_DATA)
    monkeypatch.chdir(ROOT)
    gray = load_experiment(IAC_GRAY, IAC_TINY).problem
    with pytest.raises(ValueError, match="needs a gray-box problem"):
        fit_residual_on_states(gray.replace(residual=None), seed=0)
    with pytest.raises(ValueError, match=r"fraction \(the rows that fit\) must lie in \(0, 1\)"):
        fit_residual_on_states(gray, seed=0, fraction=1.0)


def test_residual_scales_are_the_rms_of_the_rows_and_pool_the_stretches_of_a_gapped_recording():
    truth = StateSpaceModel(SingleTrackVehicle(), dt=0.02, measured=MEASURED)
    rec = RacingSimulation(steps=60, measurement_std=(0.0, 0.0), process_std=(0.01, 0.01, 0.1)).record()
    made = residual_scales(truth, rec)
    z = torch.cat([rec.states, rec.inputs], dim=-1)
    assert made["in_scale"] == pytest.approx(z.pow(2).mean(0).sqrt().tolist(), rel=1e-12)
    rms = np.sqrt((state_residuals(truth, rec) ** 2).mean(axis=0)) / rec.dt
    assert made["out_scale"] == pytest.approx(rms.tolist(), rel=1e-12) and min(made["out_scale"]) > 0
    # two blocks read alone pool, weighted by their transitions, into the scale of the gapped recording
    gapped = type(rec)(rec.states, rec.inputs, rec.outputs, rec.dt, breaks=(25,))
    parts = [type(rec)(rec.states[a:b], rec.inputs[a:b], rec.outputs[a:b], rec.dt) for a, b in ((0, 25), (25, 61))]
    alone = [residual_scales(truth, p)["out_scale"] for p in parts]
    n = [len(p.outputs) - 1 for p in parts]
    pooled = [((n[0] * a ** 2 + n[1] * b ** 2) / sum(n)) ** 0.5 for a, b in zip(*alone)]
    assert residual_scales(truth, gapped)["out_scale"] == pytest.approx(pooled, rel=1e-12)

"""The identification problem: lazy data, windows from the MHE horizon, fresh estimators, bounds, truth, bad input,
starts from a run."""
import json
from dataclasses import replace

import pytest
import torch

from mhe import (ArrivalCost, IdentificationProblem, MHESettings, Recording, RecordingSource, ResidualSettings,
                 SingleTrackVehicle, make_windows)
from mhe.estimator.arrival import arrival_bounds
from mhe.identification import start_from_estimator
from mhe.models.vehicle import BAYESRACE_BOUNDS, BAYESRACE_TRUTH
from mhe.problems.racing import MEASURED, RacingSimulation, start_values
from tests.mhe.helpers import leak_problem, physics_run, racing_problem


class _Counting(RacingSimulation):
    calls = 0

    def record(self) -> Recording:
        _Counting.calls += 1
        return super().record()


def test_data_are_produced_once_on_first_use_and_cut_with_the_mhe_horizon():
    _Counting.calls = 0
    problem = racing_problem(recording=_Counting(steps=120))
    assert _Counting.calls == 0
    rec = problem.recording
    expected = make_windows(rec.inputs, rec.outputs, 6, 10)[:5]
    assert torch.equal(problem.windows.y, expected.y) and torch.equal(problem.windows.u, expected.u)
    assert problem.windows.horizon == problem.mhe.horizon and _Counting.calls == 1
    problem.estimator(), problem.windows
    assert _Counting.calls == 1 and problem.estimator().model.dt == rec.dt == 0.02


def test_each_estimator_starts_at_the_problem_start_with_its_own_parameters():
    problem = racing_problem()
    a, b = problem.estimator(), problem.estimator()
    with torch.no_grad():
        a.model.physics.params.raw.add_(1.0)
    assert b.parameter_values() == problem.estimator().parameter_values() != a.parameter_values()
    assert problem.physics.params.raw.data_ptr() not in {p.data_ptr() for p in a.parameters()}


def test_the_arrival_box_comes_from_the_windows_and_the_hidden_box():
    problem = racing_problem(arrival=ArrivalCost((1.0, 0.0, 0.0), (1.0, 0.3, 3.0), ((0.5, 2.0), (-1.0, 1.0), None)))
    est = problem.estimator()
    mean_b, std_b = arrival_bounds(problem.windows, est.model, {0: (0.5, 2.0), 1: (-1.0, 1.0)})
    assert est.arrival_mean_bounds == mean_b and est.arrival_std_bounds == std_b
    assert racing_problem().estimator().arrival_mean_bounds[1].lower is None


def test_a_start_outside_the_data_box_is_refused_unless_clipped_for_scoring():
    # vy's hidden box is (-1, 1) widened by 10 %: a start of 5 m/s lies outside it
    problem = racing_problem(arrival=ArrivalCost((1.0, 5.0, 0.0), (1.0, 0.3, 3.0), (None, (-1.0, 1.0), None)))
    with pytest.raises(ValueError, match="arrival_mean start values \\[5.0\\] lie on or outside"):
        problem.estimator()
    est = problem.estimator(clip_start=True)
    bound = est.arrival_mean_bounds[1]
    assert bound.contains(float(est.arrival_mean[1])) and float(est.arrival_mean[1]) == pytest.approx(bound.clip(5.0))
    assert float(est.arrival_mean[0]) == pytest.approx(1.0) and float(est.arrival_mean[2]) == pytest.approx(0.0)


def test_relative_errors_use_the_sources_truth():
    problem = racing_problem()
    errors = problem.relative_errors(problem.estimator())
    assert set(errors) == set(problem.physics.params.free_names) and all(0 < e < 0.11 for e in errors.values())
    given = racing_problem(recording=problem.recording)
    assert given.truth is None and given.relative_errors(given.estimator()) == {}


def test_gray_box_problem_builds_the_residual_from_its_settings():
    problem = racing_problem(residual=ResidualSettings(4, seed=3))
    model = problem.estimator().model
    assert model.residual.mlp.sizes == (5, 4, 4, 3) and model.physics is not None
    assert problem.describe()["residual"]["width"] == 4 and problem.describe()["recording"]["steps"] == 120


def test_bad_problems_are_rejected():
    rec = RacingSimulation(steps=120)
    settings = MHESettings(6, (0.005, 0.005, 0.1), (0.0005, 0.002))
    arrival = ArrivalCost((1.5, 0.0, 0.0), (1.0, 0.3, 3.0))
    with pytest.raises(ValueError, match="needs physics, a residual or both"):
        IdentificationProblem(rec, settings, arrival, MEASURED)
    with pytest.raises(ValueError, match="needs n_x"):
        IdentificationProblem(rec, settings, arrival, MEASURED, residual=ResidualSettings(4))
    with pytest.raises(ValueError, match="one entry \\(\\[lo, hi\\] or null\\) per state, 3"):
        IdentificationProblem(rec, settings, ArrivalCost((1.5, 0, 0), (1, 1, 1), ((-1.0, 1.0),)), MEASURED,
                              SingleTrackVehicle())
    with pytest.raises(ValueError, match="2 output columns but measured lists 1 states"):
        IdentificationProblem(rec, settings, arrival, (0,), SingleTrackVehicle()).windows
    assert isinstance(rec, RecordingSource)


def test_replace_changes_settings_and_shares_the_recording():
    problem = racing_problem(recording=_Counting(steps=120))
    _Counting.calls = 0
    problem.windows
    box = ArrivalCost((1.2, 0.0, 0.0), (1.0, 0.3, 3.0), (None, (-1.0, 1.0), None))
    wider = problem.replace(windows=None, arrival=box)
    assert len(wider.windows) > len(problem.windows) == 5 and _Counting.calls == 1
    assert wider.estimator().arrival_mean_bounds[1].upper == pytest.approx(1.2) and wider.mhe is problem.mhe
    with pytest.raises(ValueError, match="unknown \\['horizon'\\]"):
        problem.replace(horizon=8)


def test_seeded_start_has_the_requested_mean_error_inside_the_bounds():
    names = ("Bf", "Cf", "Df", "Ef", "Shf", "Svf", "Br", "Cr", "Dr", "Er", "Shr", "Svr", "Cm1", "Cm2", "Cr0", "Cr2")
    start = start_values(0.6795, seed=0, identify=names)
    errors = [abs(start[n] - BAYESRACE_TRUTH[n]) / abs(BAYESRACE_TRUTH[n]) for n in names]
    assert abs(sum(errors) / len(errors) - 0.6795) < 1e-12
    assert all(BAYESRACE_BOUNDS[n].contains(start[n]) for n in names) and start["Iz"] == BAYESRACE_TRUTH["Iz"]
    assert start == start_values(0.6795, seed=0, identify=names) != start_values(0.6795, seed=1, identify=names)
    with pytest.raises(ValueError, match="does not fit inside the bounds"):
        start_values(5.0, identify=("Cf", "Df"))


def test_a_gray_box_problem_holds_the_tail_of_its_recording_back_for_the_residual_check():
    problem = leak_problem(inflow=0.0, noise=0.0, a=0.5)  # 100 samples, N = 6, stride 3, check_share 0.2
    rec, fit, held = problem.recording, problem.windows, problem.held_out_windows
    assert problem.checks_residual and len(fit) == 25 and len(held) == 5
    assert int(fit.start.max()) + 6 < 80 <= int(held.start.min())  # no PEM window reads a sample of the tail
    assert held.start.tolist() == [80, 83, 86, 89, 92]
    whole = make_windows(rec.inputs, rec.outputs, 6, 3)
    tail = make_windows(rec.inputs[80:], rec.outputs[80:], 6, 3)
    assert torch.equal(fit.y, whole.y[:25]) and torch.equal(held.y, tail.y)
    assert torch.equal(held.u_end, rec.inputs[held.start + 6])
    first = problem.replace(windows=2)  # a limit takes the first windows of each part
    assert first.windows.start.tolist() == [0, 3] and first.held_out_windows.start.tolist() == [80, 83]
    off = problem.replace(residual=replace(problem.residual, check=False))
    assert not off.checks_residual and off.held_out_windows is None and torch.equal(off.windows.y, whole.y)
    physics = problem.replace(residual=None)
    assert not physics.checks_residual and physics.held_out_windows is None and len(physics.windows) == 32
    neural = problem.replace(physics=None, n_x=1)
    assert not neural.checks_residual and len(neural.windows) == 32  # no physics to fall back to
    tail = problem.held_out_recording  # the same samples as a recording, for the check's free run
    assert torch.equal(tail.outputs, rec.outputs[80:]) and torch.equal(tail.inputs, rec.inputs[80:])
    assert torch.equal(tail.states, problem.logged.states[80:]) and tail.dt == rec.dt and tail.breaks == ()
    assert off.held_out_recording is None and physics.held_out_recording is None


@pytest.mark.parametrize("settings, message", [
    (dict(check_share=0.0), "residual.check_share .* must be a number in \\(0, 1\\); got 0.0"),
    (dict(check_share=1.0), "must be a number in \\(0, 1\\); got 1.0"),
    (dict(check_share=-0.2), "must be a number in \\(0, 1\\); got -0.2"),
    (dict(check_share=True), "must be a number in \\(0, 1\\); got True"),
    (dict(check="yes"), "residual.check must be true or false; got 'yes'"),
    (dict(keep_rejected=1), "residual.keep_rejected must be true or false; got 1"),
    (dict(check_free_run="no"), "residual.check_free_run must be true or false; got 'no'"),
])
def test_bad_residual_check_settings_are_one_line_errors(settings, message):
    with pytest.raises(ValueError, match=message) as err:
        ResidualSettings(4, **settings)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("share, part", [(0.05, "held back for the residual check"), (0.95, "left for PEM")])
def test_a_part_too_short_for_one_window_is_a_one_line_error(share, part):
    problem = leak_problem(inflow=0.0, noise=0.0, a=0.5, check_share=share)  # 100 samples, N + 1 = 7
    with pytest.raises(ValueError, match=f"leaves 5 of the recording's 100 samples {part}, fewer than one window's "
                                         f"N \\+ 1 = 7; choose a check_share") as err:
        problem.windows
    assert "\n" not in str(err.value) and "residual.check: false" in str(err.value)


def test_a_gray_box_starts_where_a_physics_only_run_ended(tmp_path):
    run, result, est = physics_run(tmp_path)
    assert result.parameters["a"] != pytest.approx(0.6)  # the run moved its physics
    gray = leak_problem(inflow=0.0, noise=0.01, a=0.9, start=str(run))
    started = gray.estimator()
    assert float(started.model.physics.params()["a"]) == pytest.approx(result.parameters["a"], rel=1e-12)
    assert started.arrival_mean.tolist() == pytest.approx(est.arrival_mean.tolist(), rel=1e-12)
    assert started.arrival_std().tolist() == pytest.approx(est.arrival_std().tolist(), rel=1e-12)
    assert started.model.residual is not None and gray.describe()["start"] == str(run)
    copy = gray.replace(stride=4)
    assert copy.start == str(run) and float(copy.physics.params()["a"]) == pytest.approx(result.parameters["a"])
    plain = leak_problem(inflow=0.0, noise=0.01, a=0.9)
    assert float(plain.physics.params()["a"]) == pytest.approx(0.9)  # the config's start where none is given


def test_a_start_from_the_estimator_in_memory_is_the_start_from_its_run_folder(tmp_path):
    run, _, est = physics_run(tmp_path)
    gray = leak_problem(inflow=0.0, noise=0.01, a=0.9, check=False)
    from_memory = start_from_estimator(gray, est).estimator()
    from_folder = leak_problem(inflow=0.0, noise=0.01, a=0.9, check=False, start=str(run)).estimator()
    assert float(from_memory.model.physics.params()["a"]) == pytest.approx(
        float(from_folder.model.physics.params()["a"]), rel=1e-12)
    assert from_memory.arrival_mean.tolist() == pytest.approx(from_folder.arrival_mean.tolist(), rel=1e-12)
    assert from_memory.arrival_std().tolist() == pytest.approx(from_folder.arrival_std().tolist(), rel=1e-12)
    assert from_memory.model.residual is not None and float(gray.physics.params()["a"]) == pytest.approx(0.9)


def test_a_start_sets_the_identified_output_map_too(tmp_path):
    from mhe.models.output import SensorOutput

    def sensor():
        return SensorOutput((0,), offset=[0.2], identify=("offset_0",))

    run, result, _ = physics_run(tmp_path, output=sensor())
    recorded = json.loads((run / "field.json").read_text())["output_map"]
    assert recorded["class"] == "SensorOutput" and recorded["identified"] == ["offset_0"]
    assert recorded["parameters"]["offset_0"] == result.parameters["offset_0"] != pytest.approx(0.2)
    gray = leak_problem(inflow=0.0, noise=0.01, a=0.9).replace(output=sensor(), start=str(run))
    assert float(gray.output.params()["offset_0"]) == pytest.approx(result.parameters["offset_0"], rel=1e-12)
    del recorded["parameters"]["offset_0"]
    sidecar = json.loads((run / "field.json").read_text())
    sidecar["output_map"] = recorded
    (run / "field.json").write_text(json.dumps(sidecar))
    with pytest.raises(ValueError, match="no value for the identified parameter 'offset_0' \\(of SensorOutput\\)"):
        leak_problem(inflow=0.0, noise=0.01, a=0.9).replace(output=sensor(), start=str(run))


@pytest.mark.parametrize("edit, error, message", [
    (lambda d: d.update(residual_sizes=[3, 4, 1]), ValueError, "is a gray-box run"),
    (lambda d: d.update(physics="TwoTanks"), ValueError, "a run of the physics 'TwoTanks'"),
    (lambda d: d.update(format="torch-ude-field"), ValueError, "holds no PEM-MHE model"),
    (lambda d: d["parameters"].pop("a"), ValueError, "no value for the identified parameter 'a'"),
    (lambda d: d["parameters"].update(a=-1.0), ValueError, "a=-1.0 lies outside its bounds"),
    (lambda d: d["arrival"].update(mean=[1.0, 2.0]), ValueError, "an arrival cost of 2 states"),
])
def test_a_start_that_is_not_a_physics_only_run_of_this_physics_is_refused(tmp_path, edit, error, message):
    run, _, _ = physics_run(tmp_path)
    sidecar = json.loads((run / "field.json").read_text())
    edit(sidecar)
    (run / "field.json").write_text(json.dumps(sidecar))
    with pytest.raises(error, match=message):
        leak_problem(inflow=0.0, noise=0.01, a=0.9, start=str(run))


def test_a_start_folder_without_a_model_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError):
        leak_problem(inflow=0.0, noise=0.01, a=0.9, start=str(tmp_path / "nothing"))

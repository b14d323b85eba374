"""Equations from a learned residual: exact recovery, uncertainties, estimators, the CLI and bad input."""
import json

import numpy as np
import pytest
import torch
from sklearn.linear_model import Lasso, LinearRegression

from torch_ude import DoublePendulum, FrictionPendulum, HybridField, SinglePendulum, export_field
from torch_ude.sparse import Library, OutsideVisitedRegionWarning, bootstrap_fit, fit_logs, fit_residual, fit_run, main


def test_case_a_damping_is_recovered_exactly_from_the_true_field():
    p = SinglePendulum()
    eq = fit_residual(p.true_field(), p, "A", ["omega", "theta", "sin(theta)", "omega**3"], bootstrap=10)
    c, std = eq.coefficient("omega", "omega")
    assert c == pytest.approx(-0.40, abs=1e-12) and std < 1e-12
    assert [t["term"] for t in eq.selected()] == ["omega"] and eq.selected()[0]["inclusion"] == 1.0
    assert eq.coefficients[0] == [0.0] * 4 and eq.r2[0] is None  # theta' = omega is known: nothing to find
    assert eq.equations()[1].startswith("omega' residual = -0.4000(+-0.0000) omega")
    assert eq.n_outside == 0 and eq.n_states == int(p.visited_region(p.evaluation_grid()).sum())
    truth = eq.compare([("omega", "omega", -0.40), ("omega", "sin(theta)", 0.0)])
    assert truth["omega: omega"]["true"] == -0.40
    assert truth["omega: omega"]["relative_error"] == pytest.approx(0.0, abs=1e-9)
    assert truth["omega: sin(theta)"] == {"true": 0.0, "found": 0.0, "std": 0.0, "relative_error": None}


def test_friction_terms_are_recovered_with_a_library_that_holds_them():
    p = FrictionPendulum()
    library = ["omega", "tanh(omega/0.02)", "exp(-(omega/0.1)**2)*tanh(omega/0.02)", "omega**3", "sin(theta)"]
    eq = fit_residual(p.true_field(), p, "A", library, channels=["omega"], threshold=0.01, bootstrap=10)
    assert eq.channels == ["omega"]
    for term, value in zip(library[:3], (p.damping, p.coulomb, p.static - p.coulomb)):
        assert eq.coefficient("omega", term)[0] == pytest.approx(-value, rel=1e-9)
    assert eq.coefficient("omega", "omega**3")[0] == 0.0 and eq.r2[0] == pytest.approx(1.0)


def test_the_bootstrap_spread_grows_with_what_the_library_cannot_explain():
    p = SinglePendulum()
    true = p.true_field()

    def field(x):
        return true(x) + torch.stack([torch.zeros_like(x[:, 0]), 0.05 * torch.sin(7 * x[:, 0])], dim=1)

    eq = fit_residual(field, p, "A", ["omega", "theta"], channels=["omega"], bootstrap=50)
    c, std = eq.coefficient("omega", "omega")
    assert 1e-5 < std < 0.01 and abs(c + 0.4) < 5 * std + 1e-3
    assert eq.misfit_rms[0] > 0.01 and eq.r2[0] < 1.0


def test_a_scikit_learn_estimator_can_replace_stlsq():
    p = SinglePendulum()
    eq = fit_residual(p.true_field(), p, "A", ["omega", "sin(theta)"], channels=["omega"],
                      optimizer=Lasso(alpha=1e-6, fit_intercept=False), bootstrap=5)
    assert eq.coefficient("omega", "omega")[0] == pytest.approx(-0.4, abs=1e-4)


def test_states_outside_the_visited_region_give_a_stated_warning():
    p = SinglePendulum()
    grid = p.evaluation_grid()
    outside = int((~p.visited_region(grid)).sum())
    assert 0 < outside < 1681
    with pytest.warns(OutsideVisitedRegionWarning, match=rf"{outside} of the 1681 states lie outside the region the "
                                                         r"stream visited.*extrapolation"):
        eq = fit_residual(p.true_field(), p, "A", ["omega"], states=grid, bootstrap=3)
    assert eq.n_outside == outside


@pytest.mark.parametrize("library, message", [
    (["omega", "omega2"], r"uses omega2, which is not among the 2 state variables \['theta', 'omega'\]"),
    (["foo(omega)"], r"uses foo, which is not among the 2 state variables"),
    (["omega +"], r"the library term 'omega \+' is not an expression"),
    (["omega", "2*omega/2"], r"repeats an earlier term"),
    ([], r"must be a non-empty list of expressions"),
    ("omega", r"must be a non-empty list of expressions"),
])
def test_bad_libraries_are_clear_errors(library, message):
    with pytest.raises(ValueError, match=message):
        fit_residual(SinglePendulum().true_field(), SinglePendulum(), "A", library)


def test_a_library_for_another_state_dimension_is_an_error():
    double = Library(["omega1", "sin(theta1 - theta2)"], DoublePendulum.state_names)
    with pytest.raises(ValueError, match=r"built for 4 state variables .* but SinglePendulum has 2: "
                                         r"\['theta', 'omega'\]"):
        fit_residual(SinglePendulum().true_field(), SinglePendulum(), "A", double)


def test_bad_channels_bootstrap_and_states_are_errors():
    p = SinglePendulum()
    with pytest.raises(ValueError, match=r"channels must name residual channels among the states"):
        fit_residual(p.true_field(), p, "A", ["omega"], channels=["omega1"])
    with pytest.raises(ValueError, match="bootstrap must be an integer >= 2"):
        fit_residual(p.true_field(), p, "A", ["omega"], bootstrap=1)
    with pytest.raises(ValueError, match=r"states must have shape \(N, 2\)"):
        fit_residual(p.true_field(), p, "A", ["omega"], states=torch.zeros(5, 4))


def test_cli_writes_the_equations_of_a_run_folder(tmp_path, capsys):
    p = FrictionPendulum()
    field = HybridField.from_seed(p.known_field("A"), 0)
    export_field(field, tmp_path, p, "A")
    result = main([str(tmp_path), "--library", "omega", "tanh(omega/0.02)", "--channels", "omega",
                   "--bootstrap", "5", "--threshold", "0.0"])
    saved = json.loads((tmp_path / "equations.json").read_text())
    assert saved["uncertainty"] == "bootstrap over the states" and saved["library"] == ["omega", "tanh(omega/0.02)"]
    assert saved["equations"] == result.equations() and capsys.readouterr().out.startswith("omega' residual = ")
    direct = fit_residual(field, p, "A", ["omega", "tanh(omega/0.02)"], channels=["omega"], bootstrap=5, threshold=0.0)
    assert result.coefficients[0] == pytest.approx(direct.coefficients[0], rel=1e-9, abs=1e-12)  # field.pt = field
    assert result.std[0] == pytest.approx(direct.std[0], rel=1e-6, abs=1e-12)


@pytest.mark.parametrize("args, message", [
    (["--library", "omega"], "field.pt does not exist"),
    (["--library", "omega3"], "uses omega3, which is not among the 2 state variables"),
])
def test_cli_errors_are_one_line_with_status_2(tmp_path, capsys, args, message):
    folder = tmp_path / "run"
    if "omega3" in args:
        export_field(HybridField.from_seed(SinglePendulum().known_field("A"), 0), folder, SinglePendulum(), "A")
    with pytest.raises(SystemExit) as done:
        main([str(folder), *args])
    err = capsys.readouterr().err
    assert done.value.code == 2 and message in err and err.count("\n") == 1


LAB = {"viscous": 0.047, "coulomb": 0.184, "offset": -0.076}  # a friction law in the lab's form
LAB_LIBRARY = ["velocity", "atan(100*velocity)", "1", "torque", "sin(position)"]


def _recorded_run(tmp_path):
    """A run folder "trained" on a recorded log: the field is the known model plus the lab's friction."""
    from torch_ude.systems.controlled import TorquePendulumModel
    from torch_ude.training.recorded import RecordedPlant

    t = np.arange(0.0, 3.0, 0.01)
    q, qd, tau = np.sin(1.3 * t), 1.3 * np.cos(1.3 * t), 0.5 * np.sin(2.9 * t + 0.3)
    log = tmp_path / "log.csv"
    np.savetxt(log, np.stack([t, q, qd, tau], 1), delimiter=",", header="time,position,velocity,torque", comments="")
    field = HybridField.from_seed(TorquePendulumModel(**LAB), 0, last_layer_gain=0.0)
    field.set_scales(torch.ones(2, dtype=torch.float64), torch.ones(2, dtype=torch.float64),
                     torch.ones(1, dtype=torch.float64))
    plant = RecordedPlant(TorquePendulumModel(), ["position", "velocity"], ["torque"])
    data = {"files": [str(log)], "time": "time", "states": ["position", "velocity"], "inputs": ["torque"],
            "fs": 100.0, "max_gap": None}
    export_field(field, tmp_path / "run", plant, "RECORDED", extra={"config": {"data": data}})
    return tmp_path / "run", plant, field, torch.as_tensor(np.stack([q, qd], 1)), torch.as_tensor(tau[:, None])


def test_a_recorded_run_s_residual_with_inputs_is_regressed_on_its_training_log(tmp_path):
    run, plant, field, states, inputs = _recorded_run(tmp_path)
    eq = fit_run(run, LAB_LIBRARY, channels=["velocity"], threshold=0.01, bootstrap=5)
    j = 6.259e-2
    assert eq.n_states == 300 and eq.channels == ["velocity"] and eq.r2[0] == pytest.approx(1.0)
    for term, value in zip(LAB_LIBRARY[:3], (LAB["viscous"], LAB["coulomb"], LAB["offset"])):
        assert eq.coefficient("velocity", term)[0] == pytest.approx(-value / j, rel=1e-9)
    assert eq.coefficient("velocity", "torque")[0] == 0.0 and eq.coefficient("velocity", "sin(position)")[0] == 0.0
    direct = fit_residual(field, plant, "RECORDED", LAB_LIBRARY, states=states, inputs=inputs,
                          channels=["velocity"], threshold=0.01, bootstrap=5)
    assert direct.coefficients[0] == pytest.approx(eq.coefficients[0], rel=1e-9)
    with pytest.raises(ValueError, match="no evaluation grid"):
        fit_run(run, LAB_LIBRARY, states="grid")


def test_inputs_that_are_missing_extra_or_misshapen_are_errors(tmp_path):
    _, plant, field, states, inputs = _recorded_run(tmp_path)
    with pytest.raises(ValueError, match=r"has the inputs \['torque'\]: pass the samples"):
        fit_residual(field, plant, "RECORDED", LAB_LIBRARY, states=states)
    with pytest.raises(ValueError, match=r"one row per state; got 299 rows of inputs for 300 states"):
        fit_residual(field, plant, "RECORDED", LAB_LIBRARY, states=states, inputs=inputs[1:])
    with pytest.raises(ValueError, match=r"inputs must have shape \(N, 1\)"):
        fit_residual(field, plant, "RECORDED", LAB_LIBRARY, states=states, inputs=torch.zeros(300, 2))
    with pytest.raises(ValueError, match=r"not among the 2 state variables \['position', 'velocity'\] or the inputs "
                                         r"\['torque'\]"):
        fit_residual(field, plant, "RECORDED", ["current"], states=states, inputs=inputs)
    with pytest.raises(ValueError, match=r"built for 2 state variables \['position', 'velocity'\] but RecordedPlant "
                                         r"has 2: .* and the inputs \['torque'\]"):
        fit_residual(field, plant, "RECORDED", Library(["velocity"], ["position", "velocity"]), states=states,
                     inputs=inputs)
    p = SinglePendulum()
    with pytest.raises(ValueError, match=r"SinglePendulum has no inputs; got inputs of shape \(5, 1\)"):
        fit_residual(p.true_field(), p, "A", ["omega"], inputs=torch.zeros(5, 1))


def test_bootstrap_fit_of_an_exact_linear_law_gives_it_in_every_refit():
    theta = np.random.default_rng(0).standard_normal((40, 3))
    y = theta @ np.array([[1.0, 0.0, -2.0], [0.5, 3.0, 0.0]]).T
    coef, draws = bootstrap_fit(theta, y, LinearRegression(fit_intercept=False), bootstrap=5, seed=1)
    assert coef.shape == (2, 3) and draws.shape == (5, 2, 3)
    assert np.allclose(coef, [[1.0, 0.0, -2.0], [0.5, 3.0, 0.0]]) and np.allclose(draws, coef)


def test_fit_logs_reads_a_friction_law_from_a_log_without_a_network(tmp_path):
    import yaml
    from scipy.integrate import solve_ivp

    j, mcx, g, fv, off = 6.259e-2, 1.022e-1, 9.81, 0.02, -0.05  # viscous friction and an offset, no Coulomb
    t = np.arange(0.0, 20.0, 0.01)

    def tau(s):
        return 0.4 * np.sin(2.1 * s) + 0.3 * np.sin(5.3 * s + 1.0)

    def rhs(s, x):
        return [x[1], (tau(s) - mcx * g * np.sin(x[0]) - fv * x[1] - off) / j]

    sol = solve_ivp(rhs, (0.0, t[-1]), [0.3, 0.0], t_eval=t, rtol=1e-10, atol=1e-10)
    np.savetxt(tmp_path / "log.csv", np.column_stack([t, sol.y.T, tau(t)]), delimiter=",",
               header="time,position,velocity,torque", comments="")
    known = {"class_path": "torch_ude.systems.TorquePendulumModel",
             "init_args": {"inertia": j, "mass_com": mcx, "gravity": g}}
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"data": {"init_args": {
        "known": known, "files": [str(tmp_path / "log.csv")], "time": "time", "states": ["position", "velocity"],
        "inputs": ["torque"], "fs": 100.0}}}))
    library = ["velocity", "atan(100*velocity)", "1", "torque", "sin(position)"]
    out = fit_logs(config, library, "velocity", threshold=0.05, bootstrap=5)
    coef = dict(zip(out["terms"], out["coefficients"]))
    assert coef["velocity"] == pytest.approx(-fv / j, rel=0.02) and coef["1"] == pytest.approx(-off / j, rel=0.02)
    assert coef["atan(100*velocity)"] == coef["torque"] == coef["sin(position)"] == 0.0
    assert out["r2"] > 0.99 and out["samples"] == 2000
    assert out["acceleration"] == "Savitzky-Golay derivative of the velocity, window 33 samples, order 3"
    with pytest.raises(ValueError, match="channel must be one of the config's states"):
        fit_logs(config, library, "torque")

"""The plant's known field as generated C (issue 32, item 1): traced from the Python definition,
differentiated by CasADi, written as float C. A user's plant outside the project goes to C with one
command; its generated f, J_x and J_u agree with torch (``torch.func.jacrev``) in float64 (the
CasADi form) and float32 (the C, compiled with the project's warning flags and sanitizers); plants
without a CasADi form, of the wrong shape or with a mismatched input count are one-line errors."""
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from microcontroller.build import ROOT, SANITIZERS, WARNINGS, build
from microcontroller.generate import main, spec_from_settings
from microcontroller.plant_code import plant_code, plant_source
from tests.microcontroller.helpers import recorded_config
from torch_ude import HybridField
from torch_ude.export import export_field
from torch_ude.systems import System, VectorField
from torch_ude.systems.controlled import ControlledField

REPO = ROOT.parent
PROBE = ROOT / "tests" / "plant_probe.c"

# A user's own package, outside the project: a Duffing oscillator with a smooth Coulomb term.
USER_PLANT = '''
import numpy as np
import torch
from torch_ude.systems import System, VectorField


class DuffingField(VectorField):
    """x' = v, v' = -delta v - alpha x - beta x^3 - mu tanh(20 v)."""

    n_states = 2

    def __init__(self, alpha, beta, delta, mu):
        super().__init__()
        self.alpha, self.beta, self.delta, self.mu = alpha, beta, delta, mu

    def forward(self, x):
        pos, vel = x.unbind(1)
        acc = -self.delta * vel - self.alpha * pos - self.beta * pos ** 3 - self.mu * torch.tanh(20.0 * vel)
        return torch.stack((vel, acc), dim=1)

    def jacobian(self, x):
        jac = x.new_zeros(x.shape[0], 2, 2)
        jac[:, 0, 1] = 1.0
        jac[:, 1, 0] = -self.alpha - 3.0 * self.beta * x[:, 0] ** 2
        jac[:, 1, 1] = -self.delta - 20.0 * self.mu / torch.cosh(20.0 * x[:, 1]) ** 2
        return jac


class UserDuffing(System):
    state_names = ("x", "v")
    cases = ("A",)
    reexcite_interval = (2.0, 4.0)

    def __init__(self, alpha: float = 4.0, beta: float = 1.5, delta: float = 0.1, mu: float = 0.05):
        self.alpha, self.beta, self.delta, self.mu = alpha, beta, delta, mu

    def true_field(self):
        return DuffingField(self.alpha, self.beta, self.delta, self.mu)

    def build_known_field(self, case):
        return DuffingField(self.alpha, self.beta, 0.0, self.mu)

    def initial_state(self):
        return np.array([1.0, 0.0])

    def reexcite(self, rng):
        return np.array([rng.uniform(-1.2, 1.2), rng.uniform(-1.0, 1.0)])

    def damping_terms(self, case):
        return ((1, 1, self.delta),)

    def init_args(self):
        return {"alpha": self.alpha, "beta": self.beta, "delta": self.delta, "mu": self.mu}
'''


def _config(tmp_path: Path, class_path: str) -> Path:
    """The paper's device config (point taps, no periodic inputs) with another plant."""
    text = (REPO / "configs" / "pendulum_case_a_c.yaml").read_text()
    cfg = tmp_path / "plant.yaml"
    cfg.write_text(text.replace("class_path: torch_ude.systems.SinglePendulum", f"class_path: {class_path}"))
    return cfg


def _torch_reference(known, x: np.ndarray, u: np.ndarray | None, dtype: torch.dtype):
    """f, J_x and J_u of ``known`` at each row, by torch and torch.func.jacrev, in ``dtype``."""
    known = known.to(dtype)
    out = []
    for k in range(len(x)):
        xk = torch.as_tensor(x[k], dtype=dtype)
        if u is None:
            f = known(xk[None])[0]
            jx = torch.func.jacrev(lambda s: known(s[None])[0])(xk)
            ju = torch.zeros(len(xk), 0, dtype=dtype)
        else:
            uk = torch.as_tensor(u[k], dtype=dtype)
            f = known(xk[None], uk[None])[0]
            jx, ju = torch.func.jacrev(lambda s, v: known(s[None], v[None])[0], argnums=(0, 1))(xk, uk)
        out.append(np.concatenate([f.detach().numpy(), jx.detach().numpy().ravel(), ju.detach().numpy().ravel()]))
    return np.array(out)


def _casadi_values(code, x: np.ndarray, u: np.ndarray | None) -> np.ndarray:
    """f, J_x (row-major) and J_u of the CasADi form in float64, per row."""
    rows = []
    for k in range(len(x)):
        f, jx, ju = code.jacobians(x[k], np.zeros(0) if u is None else u[k])
        rows.append(np.concatenate([f.full().ravel(), jx.full().ravel(), ju.full().ravel()]))
    return np.array(rows)


def _probe(exe: Path, x: np.ndarray, u: np.ndarray | None) -> np.ndarray:
    rows = x if u is None else np.hstack([x, u])
    text = "\n".join(" ".join(f"{v:.9g}" for v in np.float32(r)) for r in rows) + "\n"
    proc = subprocess.run([str(exe)], input=text, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return np.array([[float(v) for v in line.split()] for line in proc.stdout.splitlines()])


def _check(c_out: np.ndarray, known, x, u, n: int) -> None:
    """The C (float32) against torch in float32: f and Jacobians within float32 rounding, and
    tu_plant_field equal to tu_plant_jacobians' f."""
    want = _torch_reference(known, x, u, torch.float32)
    got, again = c_out[:, : want.shape[1]], c_out[:, want.shape[1]:]
    scale = np.abs(want).max(axis=1, keepdims=True) + 1.0
    assert np.all(np.abs(got - want) <= 1e-5 * scale), np.abs(got - want).max()
    assert np.array_equal(again, got[:, :n])


@pytest.fixture()
def user_package(tmp_path, monkeypatch):
    pkg = tmp_path / "userplants"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "duffing.py").write_text(USER_PLANT)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path



def _build_probe(tmp_path: Path, code, n_u: int) -> Path:
    """The generated plant C of ``code`` (2 states, ``n_u`` inputs) and the probe program, built with the house
    flags and sanitizers; returns the executable."""
    gen = tmp_path / "gen"
    gen.mkdir()
    (gen / "tu_config.h").write_text(f"#define TU_N 2\n#define TU_N_MAX 2\n#define TU_NU {n_u}\n#define TU_SIM_PENDULUM 0\n")
    (gen / "tu_plant_code.h").write_text(plant_source(code, "/* test */\n"))
    exe = tmp_path / "probe"
    proc = subprocess.run(["gcc", *WARNINGS, "-O2", *SANITIZERS, "-I", str(ROOT / "include"), "-I", str(gen),
                           str(PROBE), "-o", str(exe), "-lm"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return exe

def test_a_users_plant_goes_to_c_with_one_command(user_package, tmp_path):
    cfg = _config(tmp_path, "userplants.duffing.UserDuffing")
    env = {"PYTHONPATH": f"{user_package}:{REPO}", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-m", "microcontroller.generate", "--config", str(cfg), "--out",
                           str(tmp_path / "gen")], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    code_text = (tmp_path / "gen" / "tu_plant_code.h").read_text()
    assert "UserDuffing case A: f_known = userplants.duffing.DuffingField" in code_text
    assert "tanhf(" in code_text and "tu_plant_truth" not in code_text  # no simulation of this plant
    # the whole library builds against it with the house flags (-Werror) and sanitizers
    exe = build(tmp_path / "gen", "program", [PROBE], sanitize=True)
    from userplants.duffing import UserDuffing

    system = UserDuffing()
    known = system.known_field("A")
    x = np.random.default_rng(0).uniform(-1.5, 1.5, size=(40, 2))
    # the CasADi form in float64 is torch's field and its jacrev to rounding
    code = plant_code(system, "A", known)
    np.testing.assert_allclose(_casadi_values(code, x, None), _torch_reference(known, x, None, torch.float64),
                               rtol=1e-12, atol=1e-12)
    _check(_probe(exe, x, None), known, x, None, 2)
    # and the hand-written Jacobian of the user's field agrees (the probe tests what the trainer uses)
    jac = known.jacobian(torch.as_tensor(x)).reshape(len(x), -1).numpy()
    np.testing.assert_allclose(_casadi_values(code, x, None)[:, 2:6], jac, rtol=1e-12, atol=1e-12)


class ForcedDuffing(ControlledField):
    """x' = v, v' = (F - k x - b x^3 - c v) / m with a force input F (N)."""

    n_states, n_inputs = 2, 1

    def __init__(self, reads: int = 0) -> None:
        super().__init__()
        self.reads = reads  # the input column forward reads (1: one past the declared input)

    def forward(self, x, u):
        force = u[:, self.reads]
        return torch.stack((x[:, 1], (force * torch.cos(x[:, 0]) - 3.0 * x[:, 0] - 0.5 * x[:, 0] ** 3
                                      - 0.2 * x[:, 1]) / 1.7), dim=1)

    def jacobian(self, x, u):
        raise NotImplementedError  # the generator never calls it: CasADi differentiates forward

    def input_jacobian(self, x, u):
        raise NotImplementedError

    def init_args(self) -> dict:
        return {"reads": self.reads}


class SolveField(VectorField):
    """A mass-matrix solve: no CasADi form for the tracer."""

    n_states = 2

    def forward(self, x):
        mass = torch.eye(2, dtype=x.dtype).expand(x.shape[0], 2, 2)
        return torch.linalg.solve(mass, torch.stack((x[:, 1], -x[:, 0]), dim=1))

    def jacobian(self, x):
        raise NotImplementedError


class NarrowField(VectorField):
    """Returns one channel for a plant of two states."""

    n_states = 2

    def forward(self, x):
        return torch.stack((x[:, 1],), dim=1)

    def jacobian(self, x):
        raise NotImplementedError


class _Plant(System):
    """A test plant around a known field (``known``: the class name in this module)."""

    state_names = ("q", "v")
    cases = ("A",)
    reexcite_interval = (2.0, 4.0)

    def __init__(self, known: str = "SolveField", inputs: list[str] | None = None, reads: int = 0) -> None:
        self.known, self.input_names, self.reads = known, tuple(inputs or ()), reads

    def true_field(self):
        return self.build_known_field("A")

    def build_known_field(self, case):
        cls = globals()[self.known]
        return cls(self.reads) if cls is ForcedDuffing else cls()

    def initial_state(self):
        return np.array([1.0, 0.0])

    def reexcite(self, rng):
        return np.array([rng.uniform(-1.0, 1.0), 0.0])

    def damping_terms(self, case):
        return ()

    def init_args(self):
        return {"known": self.known, "inputs": list(self.input_names), "reads": self.reads}


def test_the_input_jacobian_of_a_forced_plant_matches_torch(tmp_path):
    system = _Plant("ForcedDuffing", ["force"])
    known = system.known_field("A")
    code = plant_code(system, "A", known)
    assert code.n_u == 1
    rng = np.random.default_rng(1)
    x, u = rng.uniform(-2.0, 2.0, size=(30, 2)), rng.uniform(-5.0, 5.0, size=(30, 1))
    np.testing.assert_allclose(_casadi_values(code, x, u), _torch_reference(known, x, u, torch.float64),
                               rtol=1e-12, atol=1e-12)
    # the generated C alone, against a config of 2 states and 1 input, with the house flags
    exe = _build_probe(tmp_path, code, n_u=1)
    _check(_probe(exe, x, u), known, x, u, 2)
    # the trainer takes the plant with its recorded input (item 2; trained in tests/microcontroller/test_c_trainer.py)
    spec = spec_from_settings(system, "A", HybridField.from_seed(known, 0), False,
                              {"stream": {"tap_average": False}}, {"fs": 1000.0, "train_rate": 25.0}, 100, 0, "test")
    assert spec.field.n_inputs == 1


@pytest.mark.parametrize("init_args, message", [
    ({"known": "SolveField"}, "SolveField.forward has no CasADi form for the C generator: it calls torch.linalg_solve"),
    ({"known": "NarrowField"}, "NarrowField.forward has no CasADi form for the C generator: it returns shape (N, 1); "
                               "the plant has 2 states, so f must be (N, 2)"),
    ({"known": "ForcedDuffing", "inputs": ["force", "torque"]},
     "_Plant names 2 input(s) ['force', 'torque'] but its known field ForcedDuffing reads 1 (n_inputs)"),
    ({"known": "ForcedDuffing", "inputs": ["force"], "reads": 1},
     "it reads column 1 of the inputs u (n_inputs = 1) of 1 columns"),
])
def test_plants_without_a_c_form_are_one_line_errors_at_generation_time(init_args, message, tmp_path, capsys):
    cfg = _config(tmp_path, "tests.microcontroller.test_plant_code._Plant")
    cfg.write_text(cfg.read_text().replace("class_path: tests.microcontroller.test_plant_code._Plant",
                                           "class_path: tests.microcontroller.test_plant_code._Plant\n"
                                           f"      init_args: {json.dumps(init_args)}"))
    assert main(["--config", str(cfg), "--out", str(tmp_path / "gen")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("microcontroller.generate: error:") and err.count("\n") == 1, err
    assert message in err, err
    assert not (tmp_path / "gen").exists()


def test_every_casadi_operation_of_the_supported_torch_functions_is_written(tmp_path):
    # each torch function the tracer accepts becomes C the compiler takes with the house flags
    class Many(VectorField):
        n_states = 2

        def forward(self, x):
            a, b = x[:, 0], x[:, 1]
            terms = [torch.sin(a), torch.cos(b), torch.tan(a), torch.asin(a / 4), torch.acos(b / 4), torch.atan(a),
                     torch.sinh(a), torch.cosh(b), torch.tanh(a), torch.exp(a), torch.log(b * b + 1),
                     torch.log1p(b * b),
                     torch.expm1(a), torch.sqrt(b * b + 1), torch.abs(a), torch.square(b), torch.sign(a), torch.erf(b),
                     torch.sigmoid(a), torch.atan2(a, b + 3), torch.maximum(a, b), torch.minimum(a, b),
                     torch.hypot(a, b), torch.where(a > b, a, b), torch.clamp(a, -0.5, 0.5),
                     torch.pow(b * b + 1, 1.5), (a * a + 1) ** 3, 1.0 / (b * b + 2)]
            total = terms[0]
            for t in terms[1:]:
                total = total + t
            return torch.stack((total, a * b), dim=1)

        def jacobian(self, x):
            raise NotImplementedError

    system = _Plant()
    known = Many()
    code = plant_code(system, "A", known)
    x = np.random.default_rng(2).uniform(-1.0, 1.0, size=(25, 2))
    np.testing.assert_allclose(_casadi_values(code, x, None)[:, :2],
                               _torch_reference(known, x, None, torch.float64)[:, :2], rtol=1e-12, atol=1e-12)
    exe = _build_probe(tmp_path, code, n_u=0)
    got = _probe(exe, x, None)[:, :2]
    want = _torch_reference(known, x, None, torch.float32)[:, :2]
    assert np.all(np.abs(got - want) <= 1e-5 * (np.abs(want) + 1.0)), np.abs(got - want).max()


@pytest.mark.parametrize("inputs, message", [
    (["torque"], None),
    (["torque", "extra"], "the known model TorquePendulumModel has 2 states and 1 inputs; the config names 2 state "
                        "columns ['position', 'velocity'] and 2 input columns ['torque', 'extra']"),
])
def test_a_recorded_log_with_inputs_generates_and_a_mismatched_one_is_a_one_line_error(inputs, message, tmp_path,
                                                                                      capsys):
    # the log's known field traces (TorquePendulumModel, one input) and the trainer reads the torque beside
    # the states (issue 32, item 2); a log whose input columns do not match the known model is refused by name
    t = np.arange(0.0, 30.0, 0.01)
    cfg = recorded_config(tmp_path, {"time": t, "position": np.sin(2 * t), "velocity": 2 * np.cos(2 * t),
                                     "torque": 0.3 * np.sin(1.3 * t), "extra": np.cos(t)}, inputs, 100.0,
                          "configs/pendulum_case_a_c.yaml")
    if message is None:
        assert main(["--config", str(cfg), "--out", str(tmp_path / "gen"), "--model.stream.calibration_s", "5.0"]) == 0
        config = (tmp_path / "gen" / "tu_config.h").read_text()
        assert re.search(r"#define TU_NU +1 ", config) and re.search(r"#define TU_CH +3 ", config), config
        assert "ju[1 * 1 + 0]" in (tmp_path / "gen" / "tu_plant_code.h").read_text()  # d(q'')/d(tau) = 1/J
        return
    assert main(["--config", str(cfg), "--out", str(tmp_path / "gen")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("microcontroller.generate: error:") and err.count("\n") == 1, err
    assert message in err, err


def test_a_run_of_a_users_plant_is_fine_tuned_and_an_unknown_plant_is_one_line(user_package, tmp_path, capsys):
    from userplants.duffing import UserDuffing

    system = UserDuffing(beta=2.5)
    extra = {"seed": 3, "config": {"model": {"stream": {"capacity": 512, "tap_average": False}, "batch_size": 32},
                                   "data": {"fs": 1000.0, "train_rate": 25.0}, "max_steps": 500}}
    export_field(HybridField.from_seed(system.known_field("A"), 3), tmp_path / "run", system, "A", extra=extra)
    assert main(["--run", str(tmp_path / "run"), "--out", str(tmp_path / "gen")]) == 0
    code_text = (tmp_path / "gen" / "tu_plant_code.h").read_text()
    assert "UserDuffing case A" in code_text and "(2.5f * " in code_text  # the run's own beta
    capsys.readouterr()
    sidecar = tmp_path / "run" / "field.json"
    spec = json.loads(sidecar.read_text())
    sidecar.write_text(json.dumps({**spec, "plant": {**spec["plant"], "class_path": "userplants.gone.Duffing"}}))
    assert main(["--run", str(tmp_path / "run"), "--out", str(tmp_path / "gen2")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the plant 'userplants.gone.Duffing' cannot be rebuilt" in err, err

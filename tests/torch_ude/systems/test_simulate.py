"""Simulator: RK4 accuracy, reproducibility, chunking, noise scale, segments, bad input, the compiled step."""
import importlib
import re

import numpy as np
import pytest
import torch

from torch_ude import DoublePendulum, SinglePendulum
from torch_ude.rk4 import RK4Step
from tests.baselines.helpers import Explosive
from torch_ude.systems import FrictionPendulum, PendulumField, Simulator, simulate
from torch_ude.systems.simulate import check_simulator_settings


def test_reproducible_from_a_seed_and_seed_dependent():
    p = SinglePendulum()
    a, b, c = simulate(p, 5.0, seed=3), simulate(p, 5.0, seed=3), simulate(p, 5.0, seed=4)
    assert np.array_equal(a.y, b.y) and np.array_equal(a.x, b.x)
    assert not np.array_equal(a.y, c.y)


def test_chunked_reads_equal_one_read():
    p = SinglePendulum(reexcite_interval=(0.5, 1.0))
    whole = Simulator(p, noise=0.02, seed=1, rms_horizon=3.0).read(7000)
    sim = Simulator(p, noise=0.02, seed=1, rms_horizon=3.0)
    parts = [sim.read(k) for k in (1, 39, 40, 2920, 4000)]
    assert np.array_equal(np.concatenate([r.y for r in parts]), whole.y)
    assert np.array_equal(np.concatenate([r.segment for r in parts]), whole.segment)
    assert np.allclose(np.concatenate([r.t for r in parts]), whole.t)


def test_noise_is_relative_to_channel_rms():
    p = SinglePendulum()
    rec = simulate(p, 30.0, noise=0.05, seed=2)
    rms = np.sqrt(np.mean(rec.x**2, axis=0))
    assert np.allclose(rec.sigma, 0.05 * rms)
    measured = np.std(rec.y - rec.x, axis=0)
    assert np.allclose(measured, rec.sigma, rtol=0.02)
    assert np.array_equal(simulate(p, 2.0, noise=0.0).y, simulate(p, 2.0, noise=0.0).x)


def test_segments_follow_the_true_field_and_start_at_x0():
    p = SinglePendulum()
    rec = simulate(p, 20.0, noise=0.0, seed=0)
    assert np.allclose(rec.x[0], [1.2, 0.0])
    assert rec.segment[0] == 0 and rec.segment[-1] >= 2  # intervals of 4-8 s
    # inside one segment the samples obey the ODE: central differences match f*(x)
    f = p.true_field()
    seg = rec.segment == 1
    x = rec.x[seg]
    fd = (x[2:] - x[:-2]) * (rec.fs / 2)
    model = f(torch.as_tensor(x[1:-1])).numpy()
    assert np.max(np.abs(fd - model)) < 1e-4
    # the energy never exceeds that of x0
    assert float((p.energy(torch.as_tensor(rec.x)) / p.energy0).max()) <= 1.0 + 1e-6


def test_rk4_step_converges_at_fourth_order():
    p = SinglePendulum(reexcite_interval=(100.0, 100.0))
    ref = Simulator(p, fs=1000.0, noise=0.0, substeps=8, rms_horizon=1.0).read(1001).x[-1]
    err = []
    for fs in (50.0, 100.0):
        x = Simulator(p, fs=fs, noise=0.0, rms_horizon=1.0).read(int(fs) + 1).x[-1]
        err.append(np.linalg.norm(x - ref))
    assert 12.0 < err[0] / err[1] < 20.0


def test_double_pendulum_stream_runs():
    rec = simulate(DoublePendulum(), 1.0, noise=0.01, seed=0)
    assert rec.y.shape == (1000, 4) and np.all(np.isfinite(rec.y))


@pytest.mark.parametrize("kwargs,match", [
    ({"fs": 0.0}, "fs"), ({"fs": -5.0}, "fs"), ({"noise": -0.1}, "noise"), ({"substeps": 0}, "substeps"),
])
def test_bad_simulator_settings_are_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Simulator(SinglePendulum(), **kwargs)


def test_bad_durations_are_errors():
    with pytest.raises(ValueError, match="duration must be positive"):
        simulate(SinglePendulum(), 0.0)
    with pytest.raises(ValueError, match="n_ticks"):
        Simulator(SinglePendulum(), rms_horizon=0.1).read(-1)


def test_state_dict_continues_the_stream_exactly():
    p = SinglePendulum(reexcite_interval=(0.5, 1.0))
    ref = Simulator(p, noise=0.01, seed=5, rms_horizon=2.0)
    whole = ref.read(5000)
    a = Simulator(p, noise=0.01, seed=5, rms_horizon=2.0)
    first = a.read(2345)
    b = Simulator(p, noise=0.01, seed=99, rms_horizon=2.0)
    b.load_state_dict(a.state_dict())
    rest = b.read(5000 - 2345)
    assert np.array_equal(np.concatenate([first.y, rest.y]), whole.y)
    assert np.array_equal(np.concatenate([first.t, rest.t]), whole.t)


class Exploding(SinglePendulum):
    """A plant whose true field blows up: ``x' = 0.5 x^2`` from ``x0 = (1.2, 0)``, at t = 1/0.6 s."""

    def true_field(self):
        return Explosive(gain=0.5)


def test_a_diverging_plant_names_the_time_the_state_and_both_causes():
    with pytest.raises(FloatingPointError) as err:
        Simulator(Exploding(reexcite_interval=(100.0, 100.0)), noise=0.0, rms_horizon=1.0).read(3000)
    message = str(err.value)
    assert re.search(r"Exploding became non-finite at t = 1\.66\d* s, after the state \[[-+0-9.e]+, 0\.0\] at "
                     r"t = 1\.66\d* s", message), message
    assert "the plant's true field diverges there" in message
    assert "RK4 step 1/(fs*substeps) = 0.001 s is too large" in message and "raise substeps (now 1)" in message


@pytest.mark.parametrize("kwargs,error,match", [
    ({"substeps": 1.5}, ValueError, r"substeps \(RK4 steps per sample\) must be an integer >= 1; got 1\.5"),
    ({"fs": "fast"}, TypeError, "fs must be a number"),
    ({"noise": float("nan")}, ValueError, "noise"),
])
def test_simulator_settings_are_checked_before_simulating(kwargs, error, match):
    with pytest.raises(error, match=match):
        check_simulator_settings(**{"fs": 1000.0, "noise": 0.01, "substeps": 1, **kwargs})


@pytest.mark.parametrize("system", [SinglePendulum(reexcite_interval=(0.5, 1.0)), DoublePendulum(), FrictionPendulum()],
                         ids=["pendulum", "double_pendulum", "friction"])
def test_the_compiled_plant_step_gives_the_eager_stream_bit_for_bit(system, monkeypatch):
    compiled = Simulator(system, noise=0.01, seed=2, rms_horizon=1.5)
    assert isinstance(compiled._step, torch.jit.ScriptModule), "the plant's field no longer compiles"
    # the package exports the function simulate under the module's name
    monkeypatch.setattr(importlib.import_module("torch_ude.systems.simulate"), "_plant_step", RK4Step)
    eager = Simulator(system, noise=0.01, seed=2, rms_horizon=1.5)
    assert not isinstance(eager._step, torch.jit.ScriptModule)
    a, b = compiled.read(4000), eager.read(4000)
    assert np.array_equal(a.x, b.x) and np.array_equal(a.y, b.y)


class NumpyField(PendulumField):
    """The pendulum's field through numpy: TorchScript cannot compile it."""

    def forward(self, x):
        return torch.from_numpy(np.asarray(super().forward(x)))


class NumpyPendulum(SinglePendulum):
    def true_field(self):
        return NumpyField(self.gravity, self.length, self.damping)


def test_a_field_torchscript_cannot_compile_runs_eagerly_with_the_same_stream():
    system = NumpyPendulum(reexcite_interval=(0.5, 1.0))
    sim = Simulator(system, noise=0.01, seed=2, rms_horizon=1.5)
    assert type(sim._step) is RK4Step
    reference = Simulator(SinglePendulum(reexcite_interval=(0.5, 1.0)), noise=0.01, seed=2, rms_horizon=1.5)
    assert np.array_equal(sim.read(3000).y, reference.read(3000).y)

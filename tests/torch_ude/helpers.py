"""Builders shared by the torch_ude tests."""
import math

import numpy as np
import scipy.interpolate
import torch

from torch_ude import DoublePendulum, HybridField, SinglePendulum
from torch_ude.recorded import write_csv_table as write_csv  # noqa: F401 (the tests' name for the log writer)
from torch_ude.systems.linear_axis import LinearAxisModel
from torch_ude.systems.pendulum import TrainablePendulumField
from torch_ude.systems.controlled import ControlledField, TorquePendulumModel
from torch_ude.systems.dfki_double_pendulum import TorqueDoublePendulumModel

PLANTS = {"single": SinglePendulum, "double": DoublePendulum}


def _randomize(field: HybridField, gen: torch.Generator) -> None:
    """Random biases (and a random linear term, if the field has one) in place."""
    with torch.no_grad():
        for _, b in field.mlp.layers:
            b.uniform_(-0.5, 0.5, generator=gen)
        if field.linear:
            field.parameters_list()[-1].uniform_(-0.5, 0.5, generator=gen)


def random_field(plant: str, case: str, seed: int, linear: bool = False) -> HybridField:
    """A hybrid field with non-trivial random weights and scales, float64 (``linear``: with a
    random linear term)."""
    system = PLANTS[plant]()
    gen = torch.Generator().manual_seed(seed)
    field = HybridField(system.known_field(case), generator=gen, last_layer_gain=1.0, linear=linear)
    n = system.n_states
    field.set_scales(0.5 + torch.rand(n, generator=gen), 0.5 + torch.rand(n, generator=gen))
    _randomize(field, gen)
    return field


def random_batch(n: int, batch: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random states and derivative targets, each (batch, n)."""
    gen = torch.Generator().manual_seed(100 + seed)
    return tuple(torch.randn(batch, n, generator=gen) for _ in range(3))


class CoupledInputs(ControlledField):
    """A test model with two states and two inputs entering nonlinearly:
    ``f = (x1 + u0 x0, -sin(x0) + u1 cos(x1) + u0^2)``."""

    n_states = 2
    n_inputs = 2

    def init_args(self) -> dict:
        """No arguments."""
        return {}

    def forward(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """The field, (N, 2), (N, 2) -> (N, 2)."""
        return torch.stack((x[:, 1] + u[:, 0] * x[:, 0],
                            -torch.sin(x[:, 0]) + u[:, 1] * torch.cos(x[:, 1]) + u[:, 0] ** 2), dim=1)

    def jacobian(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """df/dx, (N, 2, 2)."""
        jac = x.new_zeros(x.shape[0], 2, 2)
        jac[:, 0, 0], jac[:, 0, 1] = u[:, 0], 1.0
        jac[:, 1, 0], jac[:, 1, 1] = -torch.cos(x[:, 0]), -u[:, 1] * torch.sin(x[:, 1])
        return jac

    def input_jacobian(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """df/du, (N, 2, 2)."""
        jac = x.new_zeros(x.shape[0], 2, 2)
        jac[:, 0, 0] = x[:, 0]
        jac[:, 1, 0], jac[:, 1, 1] = 2.0 * u[:, 0], torch.cos(x[:, 1])
        return jac


def _lab_pendulum() -> TorquePendulumModel:
    """The DFKI lab's whole model, friction and offset included."""
    return TorquePendulumModel(viscous=4.707e-2, coulomb=1.839e-1, offset=-7.586e-2)


INPUT_MODELS = {"torque": TorquePendulumModel, "coupled": CoupledInputs, "lab": _lab_pendulum}


def random_input_field(model: str, seed: int, linear: bool | str = False) -> HybridField:
    """A hybrid field on a known model with inputs, random weights, biases and scales, float64
    (``linear``: True with a random linear term; ``"affine"`` with it and ``input_affine``, the
    tanh layers reading the states only)."""
    known = INPUT_MODELS[model]()
    gen = torch.Generator().manual_seed(seed)
    field = HybridField(known, generator=gen, last_layer_gain=1.0, linear=bool(linear),
                        input_affine=linear == "affine")
    n, m = known.n_states, known.n_inputs
    field.set_scales(0.5 + torch.rand(n, generator=gen), 0.5 + torch.rand(n, generator=gen),
                     0.5 + torch.rand(m, generator=gen))
    _randomize(field, gen)
    return field


def trainable_model(known: str, gen: torch.Generator):
    """A known model that trains all its physical parameters, with friction and an offset and a
    random point inside the bounds: ``"torque"`` (`TorquePendulumModel`), ``"axis"`` (`LinearAxisModel`),
    ``"double_torque"`` (`TorqueDoublePendulumModel`, every constant but g) or ``"single"``
    (`TrainablePendulumField`)."""
    if known == "torque":
        model = TorquePendulumModel(viscous=0.05, coulomb=0.1, offset=0.02, trainable={
            "inertia": [0.03, 0.1], "mass_com": [0.05, 0.2], "viscous": [0.0, 0.2], "coulomb": [0.0, 0.4],
            "offset": [-0.2, 0.2]})
    elif known == "axis":
        model = LinearAxisModel(mass=2.0, gain=1.5, viscous=0.3, coulomb=0.2, coulomb_velocity=0.5, offset=0.1,
                                trainable={"mass": [1.0, 4.0], "gain": [1.0, 2.0], "viscous": [0.0, 1.0],
                                           "coulomb": [0.0, 1.0], "offset": [-0.5, 0.5]})
    elif known == "double_torque":
        model = TorqueDoublePendulumModel(Ir=1e-4, b1=0.01, b2=0.02, cf1=0.09, cf2=0.08, trainable={
            "m1": [0.6, 0.7], "m2": [0.54, 0.58], "l1": [0.19, 0.21], "r1": [0.18, 0.22], "r2": [0.31, 0.33],
            "I1": [0.025, 0.03], "I2": [0.053, 0.056], "Ir": [0.0, 2e-4], "gr": [5.0, 7.0], "b1": [0.0, 0.1],
            "b2": [0.0, 0.1], "cf1": [0.0, 0.2], "cf2": [0.0, 0.2]})
    else:
        model = TrainablePendulumField(9.81, 1.0, 0.2, trainable={"gravity": [5.0, 15.0], "length": [0.5, 2.0],
                                                                  "damping": [0.0, 1.0]})
    with torch.no_grad():
        model.theta.uniform_(-0.3, 0.3, generator=gen)
    return model


def variant_field(known: str, seed: int, periodic: tuple[int, ...] = (), linear: bool | str = False,
                  physical: bool = False) -> HybridField:
    """A random float64 field (as `random_field` / `random_input_field`) on ``known`` (``"single"``,
    ``"double"``: the Case C models; ``"torque"``, ``"coupled"``, ``"axis"``: models with inputs), reading the
    ``periodic`` states as (sin, cos); ``physical``: a model that trains its physical parameters
    (`trainable_model`)."""
    gen = torch.Generator().manual_seed(seed)
    if physical:
        model = trainable_model(known, gen)
    else:
        model = PLANTS[known]().known_field("C") if known in PLANTS else INPUT_MODELS[known]()
    field = HybridField(model, generator=gen, last_layer_gain=1.0, linear=bool(linear),
                        input_affine=linear == "affine", periodic=periodic)
    n, m = field.n_states, field.n_inputs
    field.set_scales(0.5 + torch.rand(n, generator=gen), 0.5 + torch.rand(n, generator=gen),
                     (0.5 + torch.rand(m, generator=gen)) if m else None)
    _randomize(field, gen)
    return field


def set_test_envelope(field: HybridField, x: torch.Tensor, u: torch.Tensor | None = None) -> None:
    """A trust envelope on ``field`` around the first third of the rows of ``x`` [and ``u``], with a
    fade band a fifth of the whole batch's spread: the other rows then lie inside, in the band and
    beyond it."""
    z = field.net_input(x, u)
    core = z[: max(1, z.shape[0] // 3)]
    field.set_envelope(core.amin(0), core.amax(0), 0.2 * (z.amax(0) - z.amin(0)) + 1e-3)


def forced_pendulum_log(duration: float = 12.0, fs: float = 500.0, noise: float = 1e-3, jitter: float = 0.0,
                        damping: float = 0.05, seed: int = 0) -> dict[str, np.ndarray]:
    """A simulated log of the DFKI-like pendulum driven by a known torque, with viscous friction
    ``damping`` (N m s) that `TorquePendulumModel` lacks: columns time, position, velocity, torque.

    The true motion is integrated by RK4 at 10 kHz; the log samples it at ``fs`` with time stamps
    jittered uniformly by up to ``jitter`` of a step and Gaussian sensor noise ``noise`` (rad, rad/s).
    """
    model = TorquePendulumModel()
    rng = np.random.default_rng(seed)
    sub = 10
    h = 1.0 / (fs * sub)
    steps = int(round(duration * fs))
    freqs, phases = np.array([0.7, 1.9, 3.1]), rng.uniform(0, 2 * np.pi, 3)

    def torque(t):
        return 0.35 * np.sin(np.multiply.outer(t, freqs) + phases).sum(axis=-1)

    def f(q, qd, t):
        return qd, (torque(t) - model.mass_com * model.gravity * np.sin(q) - damping * qd) / model.inertia

    # integrate on the fine grid, then read each jittered time stamp off a cubic Hermite interpolant
    n_fine = steps * sub + sub
    fine = np.empty((n_fine + 1, 2))
    fine[0] = (0.3, 0.0)
    q, qd = 0.3, 0.0
    for j in range(n_fine):
        t = j * h
        a1, b1 = f(q, qd, t)
        a2, b2 = f(q + 0.5 * h * a1, qd + 0.5 * h * b1, t + 0.5 * h)
        a3, b3 = f(q + 0.5 * h * a2, qd + 0.5 * h * b2, t + 0.5 * h)
        a4, b4 = f(q + h * a3, qd + h * b3, t + h)
        q, qd = q + h / 6 * (a1 + 2 * a2 + 2 * a3 + a4), qd + h / 6 * (b1 + 2 * b2 + 2 * b3 + b4)
        fine[j + 1] = (q, qd)
    times = np.arange(steps) / fs + rng.uniform(-jitter, jitter, steps) / fs
    times[0] = 0.0
    tf = np.arange(n_fine + 1) * h
    slopes = np.stack(f(fine[:, 0], fine[:, 1], tf), axis=1)
    states = scipy.interpolate.CubicHermiteSpline(tf, fine, slopes)(times)
    return {"time": times, "position": states[:, 0] + noise * rng.standard_normal(steps),
            "velocity": states[:, 1] + noise * rng.standard_normal(steps), "torque": torque(times)}


#: The simulated linear axis of the position-only tests: `LinearAxisModel` constants of the truth.
AXIS_TRUTH = {"mass": 2.0, "gain": 1.0, "viscous": 4.0, "coulomb": 1.5, "coulomb_velocity": 0.02, "offset": 0.3}


def forced_axis_log(duration: float = 12.0, fs: float = 1000.0, noise: float = 1e-5,
                    seed: int = 0) -> dict[str, np.ndarray]:
    """A simulated position-only log of a linear axis with friction and an offset (`AXIS_TRUTH`)
    driven by a known force: columns time, position (with Gaussian noise ``noise`` in m), force,
    and the truth (true_position, true_velocity, true_acceleration, true_jerk) for checks.

    The force is ``offset`` plus three sines of random phase, so the axis oscillates without
    drifting; the motion is integrated by RK4 at 10 times ``fs`` and read at every tenth step.
    """
    c = AXIS_TRUTH
    rng = np.random.default_rng(seed)
    freqs, phases = 2 * np.pi * np.array([0.4, 1.1, 2.3]), rng.uniform(0, 2 * np.pi, 3)
    amps = np.array([3.0, 2.0, 1.5])

    def force(t):
        return c["offset"] + (amps * np.sin(np.multiply.outer(t, freqs) + phases)).sum(axis=-1)

    def force_rate(t):
        return (amps * freqs * np.cos(np.multiply.outer(t, freqs) + phases)).sum(axis=-1)

    def accel(v, t):
        return (c["gain"] * force(t) - c["viscous"] * v - c["coulomb"] * math.tanh(v / c["coulomb_velocity"])
                - c["offset"]) / c["mass"]

    sub, steps = 10, int(round(duration * fs))
    h = 1.0 / (fs * sub)
    q, v = 0.0, 0.0
    states = np.empty((steps, 2))
    for j in range(steps * sub):
        if j % sub == 0:
            states[j // sub] = (q, v)
        t = j * h
        a1 = accel(v, t)
        a2 = accel(v + 0.5 * h * a1, t + 0.5 * h)
        a3 = accel(v + 0.5 * h * a2, t + 0.5 * h)
        a4 = accel(v + h * a3, t + h)
        q += h / 6 * (v + 2 * (v + 0.5 * h * a1) + 2 * (v + 0.5 * h * a2) + v + h * a3)
        v += h / 6 * (a1 + 2 * a2 + 2 * a3 + a4)
    times = np.arange(steps) / fs
    a = np.array([accel(vk, tk) for vk, tk in zip(states[:, 1], times)])
    slope = c["viscous"] + c["coulomb"] / c["coulomb_velocity"] / np.cosh(states[:, 1] / c["coulomb_velocity"]) ** 2
    jerk = (c["gain"] * force_rate(times) - slope * a) / c["mass"]
    return {"time": times, "position": states[:, 0] + noise * rng.standard_normal(steps), "force": force(times),
            "true_position": states[:, 0], "true_velocity": states[:, 1], "true_acceleration": a, "true_jerk": jerk}

"""Small vehicle problems, a leaking tank and a physics-only run folder of it shared by the mhe tests (float64, fixed seeds)."""
from __future__ import annotations

from pathlib import Path

import torch

from mhe import (ArrivalCost, IdentificationProblem, MHESettings, MovingHorizonEstimator, NeuralResidual,
                 OuterSettings, PEMIdentifier, PEMResult, Recording, ResidualSettings, SingleTrackVehicle,
                 SolverSettings, StateSpaceModel, WindowSolver, make_windows, simulate_closed_loop, simulate_free_run)
from mhe.models.bounds import Bound, BoundedParameters
from mhe.models.model import PhysicsField
from mhe.models.output import OutputMap
from mhe.data.simulate import vehicle_policy
from mhe.data.windows import Windows
from mhe.estimator.kkt import refine
from mhe.problems.racing import MEASURED, RacingSimulation, perturbed_values
from mhe.training import pem_outputs, write_pem_outputs

PROCESS_STD = (0.05, 0.05, 1.0)
MEASUREMENT_STD = (0.005, 0.02)
ARRIVAL_MEAN = (1.5, 0.0, 0.0)
ARRIVAL_STD = (1.0, 0.3, 3.0)
IN_SCALE = (2.0, 0.3, 3.0, 0.3, 1.0)
OUT_SCALE = (1.0, 1.0, 20.0)


def vehicle_windows(horizon: int, count: int, stride: int = 7, seed: int = 1) -> Windows:
    """``count`` windows of the true racing model with process and measurement noise."""
    truth = StateSpaceModel(SingleTrackVehicle(), dt=0.02, measured=(0, 2))
    steps = stride * count + horizon + 1
    rec = simulate_closed_loop(truth, [1.5, 0.0, 0.0], vehicle_policy(steps, 0.02, seed), steps, PROCESS_STD,
                   MEASUREMENT_STD, seed=seed)
    return make_windows(rec.inputs, rec.outputs, horizon, stride)[:count]


def residual(width: int = 4, seed: int = 3, last_std: float = 0.2) -> NeuralResidual:
    """A small residual with a random (non-zero) last layer, so every weight matters."""
    net = NeuralResidual(3, 2, width=width, in_scale=IN_SCALE, out_scale=OUT_SCALE, seed=seed)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        w_last, b_last = net.mlp.ordered_parameters()[-2:]
        w_last.copy_(last_std * torch.randn(w_last.shape, generator=gen, dtype=torch.float64))
        b_last.copy_(0.1 * last_std * torch.randn(b_last.shape, generator=gen, dtype=torch.float64))
    return net


def estimator(kind: str, horizon: int, perturb: float = 1.1, **settings) -> MovingHorizonEstimator:
    """An MHE for ``kind`` in {"physics", "neural", "gray"}; physics parameters scaled by ``perturb``."""
    physics = None
    if kind in ("physics", "gray"):
        physics = SingleTrackVehicle()
        physics.params.assign({n: perturb * float(v.detach()) for n, v in physics.params().items()
                               if n in physics.params.free_names})
    net = residual() if kind in ("neural", "gray") else None
    model = StateSpaceModel(physics, net, dt=0.02, measured=(0, 2), n_x=3, n_u=2)
    return MovingHorizonEstimator(model, MHESettings(horizon, PROCESS_STD, MEASUREMENT_STD, **settings),
                                  ARRIVAL_MEAN, ARRIVAL_STD)


def torch_kkt_point(est: MovingHorizonEstimator, windows: Windows, steps: int = 10) -> torch.Tensor:
    """A KKT point by undamped Newton's method in torch from the initial guess (no CasADi; neural models)."""
    z, res = refine(est, est.initial_point(windows).stages(), windows, steps)
    assert float(res.max()) < 1e-12, f"torch Newton did not converge: residual {res}"
    return z


def ipopt_kkt_point(est: MovingHorizonEstimator, windows: Windows, build_dir) -> torch.Tensor:
    """A verified KKT point from IPOPT plus refinement (physics-only models need no compilation)."""
    sol = WindowSolver(est, build_dir).solve(windows)
    assert bool(sol.ok.all()), sol.status
    return sol.point.stages()


def kkt_point(kind: str, tmp_path, gray_solver) -> tuple[MovingHorizonEstimator, Windows, torch.Tensor]:
    """An estimator of ``kind`` (``physics``, ``neural``, ``gray``), its windows and their KKT points."""
    if kind == "gray":
        est, solver, windows = gray_solver
        return est, windows, solver.solve(windows).point.stages()
    est, windows = estimator(kind, 6), vehicle_windows(6, 3)
    z = ipopt_kkt_point(est, windows, tmp_path) if kind == "physics" else torch_kkt_point(est, windows)
    return est, windows, z


def racing_problem(**overrides) -> IdentificationProblem:
    """The racing problem of the configs on 5 short windows (N = 6), started 10 % off, arrival cost unbounded."""
    settings = dict(recording=RacingSimulation(steps=120), mhe=MHESettings(6, (0.005, 0.005, 0.1), (0.0005, 0.002)),
                    arrival=ArrivalCost((1.5, 0.0, 0.0), (1.0, 0.3, 3.0)), measured=MEASURED,
                    physics=SingleTrackVehicle(perturbed_values(0.1, seed=2, fixed={"Er": 0.0})), stride=10,
                    windows=5)
    settings.update(overrides)
    return IdentificationProblem(**settings)


class Leak(PhysicsField):
    """A leaking tank ``x' = -a x + u + c`` (one state, measured; ``c`` a constant inflow), for the residual check."""

    state_names = ("x",)
    input_names = ("u",)

    def __init__(self, a: float = 0.5, c: float = 0.0, identify: tuple[str, ...] = ()) -> None:
        super().__init__(BoundedParameters({"a": a, "c": c}, {n: Bound(0.0) for n in identify}, identify))

    def vector_field(self, x, u, p, ops) -> list:
        return [-p["a"] * x[0] + u[0] + p["c"]]


def leak_problem(inflow: float, noise: float, a: float, steps: int = 100, start: str | None = None,
                 **check) -> IdentificationProblem:
    """A gray-box `Leak` problem: the plant has ``c = inflow`` (``a = 0.5``), the physics ``c = 0`` and ``a`` started
    at ``a`` (or where the run folder ``start`` ended), identified; a width-4 residual; a staircase input; ``steps``
    samples at 0.2 s, noise std ``noise``; N = 6, stride 3 (25 PEM and 5 held-out windows with the default check
    share 0.2)."""
    gen = torch.Generator().manual_seed(0)
    u = (2.0 * torch.rand(steps // 5 + 1, 1, generator=gen, dtype=torch.float64)).repeat_interleave(5, 0)[:steps]
    run = simulate_free_run(StateSpaceModel(Leak(0.5, inflow), None, dt=0.2, measured=(0,)), [1.0], u)
    y = run.outputs + noise * torch.randn(steps, 1, generator=gen, dtype=torch.float64)
    return IdentificationProblem(Recording(run.states, u, y, 0.2), MHESettings(6, (0.01,), (0.01,)),
                                 ArrivalCost((1.0,), (1.0,)), (0,), physics=Leak(a, 0.0, identify=("a",)),
                                 residual=ResidualSettings(4, (2.0, 2.0), (0.5,), **check), stride=3, start=start)


def physics_run(tmp_path: Path, a: float = 0.6, output: OutputMap | None = None
                ) -> tuple[Path, PEMResult, MovingHorizonEstimator]:
    """A physics-only PEM-MHE run folder of the leaking tank (2 Gauss-Newton steps from ``a``, with ``output`` as
    its output map), as the CLI writes it."""
    problem = leak_problem(inflow=0.0, noise=0.01, a=a).replace(residual=None, output=output)
    with PEMIdentifier(problem, 2, OuterSettings(optimizer="gauss_newton"),
                       SolverSettings(build_dir=str(tmp_path / "build"))) as pem:
        result = pem.fit()
        outputs = pem_outputs(tmp_path / "run", problem, {})
        outputs.start()
        write_pem_outputs(outputs, pem.estimator, result)
    return tmp_path / "run", result, pem.estimator


"""The fixed-window MHE of Eq. (4) written in torch: settings, arrival cost, Lagrangian (Eq. 6).

`MovingHorizonEstimator` owns every outer parameter ``alpha = (theta, s_bar, Sigma)``
of Eq. (5) as torch parameters: the model's ``theta``, the arrival mean ``s_bar`` and
``Sigma = diag(sigma^2)``, each component of ``s_bar`` and ``sigma`` a `mhe.models.bounds.Bound`
map of an unconstrained ``rho``. By default ``s_bar = rho`` (unbounded) and
``sigma = softplus(rho)``; `mhe.estimator.arrival.arrival_bounds` gives a physical box (``s_bar``
within the range of the states, ``sigma`` within a multiple of that range), which keeps the
outer loop from moving the arrival cost to values at which the window problems change
character (see `mhe.estimator.arrival`). The weights ``Q = diag(q^2)`` and ``R = diag(r^2)`` are
fixed settings. The same Lagrangian, summed
stage by stage, gives the KKT residual, the block-tridiagonal KKT matrix and both
hypergradients in `mhe.estimator.kkt`; `mhe.estimator.problem` builds the CasADi NLP from this object.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..models.bounds import Bound
from ..models.checks import require
from ..models.model import StateSpaceModel
from ..data.windows import Windows
from .point import KKTPoint, StageLayout

__all__ = ["MHESettings", "MovingHorizonEstimator"]


@dataclass(frozen=True)
class MHESettings:
    """Settings of the MHE problems and their solver, validated once.

    Attributes:
        horizon: the window length N >= 2.
        process_std: q, standard deviations of ``w`` (Q = diag(q^2)), n_w numbers.
        measurement_std: r, standard deviations of ``eta`` (R = diag(r^2)), n_eta numbers.
        solver: the NLP solver, ``"ipopt"``.
        tol: IPOPT's convergence tolerance.
        max_iter: IPOPT's iteration limit.
        warm_start: start each solve from the window's previous solution.
        refine_steps: Newton steps on the torch KKT system after each solve (removes the
            float32 rounding of L4CasADi and IPOPT's tolerance; 0 disables).
        kkt_tol: a window whose relative KKT residual after refinement
            (`mhe.estimator.kkt.refine`) exceeds this counts as failed.
    """

    horizon: int
    process_std: tuple[float, ...]
    measurement_std: tuple[float, ...]
    solver: str = "ipopt"
    tol: float = 1e-10
    max_iter: int = 200
    warm_start: bool = True
    refine_steps: int = 2
    kkt_tol: float = 1e-8

    def __post_init__(self) -> None:
        object.__setattr__(self, "process_std", tuple(float(v) for v in self.process_std))
        object.__setattr__(self, "measurement_std", tuple(float(v) for v in self.measurement_std))
        if self.horizon < 2:
            raise ValueError(f"horizon must be >= 2; got {self.horizon}.")
        if self.solver != "ipopt":
            raise ValueError(f"solver must be 'ipopt'; got {self.solver!r}.")
        # NaN passes here: the problem's finiteness check names it (a NaN setting is not a sign error)
        require([(self.process_std and not any(v <= 0 for v in self.process_std),
                  f"mhe.process_std must be positive numbers; got {self.process_std}."),
                 (self.measurement_std and not any(v <= 0 for v in self.measurement_std),
                  f"mhe.measurement_std must be positive numbers; got {self.measurement_std}.")])
        require([(self.tol > 0, f"mhe.tol must be > 0; got {self.tol}."),
                 (self.max_iter >= 1, f"mhe.max_iter must be >= 1; got {self.max_iter}."),
                 (self.refine_steps >= 0, f"mhe.refine_steps must be >= 0; got {self.refine_steps}."),
                 (self.kkt_tol > 0, f"mhe.kkt_tol must be > 0; got {self.kkt_tol}.")])


class MovingHorizonEstimator(nn.Module):
    """The MHE of Eq. (4) for one model: cost, constraints and Lagrangian in torch.

    Args:
        model: the state-space model (its ``theta`` are outer parameters).
        settings: horizon, noise weights and solver settings.
        arrival_mean: initial ``s_bar``, n_x numbers.
        arrival_std: initial ``sigma`` (Sigma = diag(sigma^2)), n_x positive numbers.
        arrival_mean_bounds: per state the `Bound` of ``s_bar`` (None: unbounded).
        arrival_std_bounds: per state the `Bound` of ``sigma``, lower bound >= 0 (None:
            ``sigma = softplus(rho)``, i.e. ``Bound(lower=0)``).

    Raises:
        ValueError: if the settings or arrival cost do not match the model's dimensions, a
            ``sigma`` bound allows non-positive values, or a start value lies outside its bound.
    """

    def __init__(self, model: StateSpaceModel, settings: MHESettings, arrival_mean: Sequence[float],
                 arrival_std: Sequence[float], arrival_mean_bounds: Sequence[Bound] | None = None,
                 arrival_std_bounds: Sequence[Bound] | None = None) -> None:
        super().__init__()
        require([(len(settings.process_std) == model.n_w, f"mhe.process_std needs n_w = {model.n_w} numbers for "
                                                          f"this model; got {len(settings.process_std)}."),
                 (len(settings.measurement_std) == model.n_eta, f"mhe.measurement_std needs n_eta = {model.n_eta} "
                                                                f"numbers for this model; got {len(settings.measurement_std)}."),
                 (len(arrival_mean) == model.n_x, f"arrival_mean needs {model.n_x} numbers; got {list(arrival_mean)}."),
                 (len(arrival_std) == model.n_x and min(arrival_std, default=0.0) > 0,
                  f"arrival_std needs {model.n_x} positive numbers; got {list(arrival_std)}.")])
        mean_bounds = tuple(arrival_mean_bounds) if arrival_mean_bounds is not None else (Bound(),) * model.n_x
        std_bounds = tuple(arrival_std_bounds) if arrival_std_bounds is not None else (Bound(lower=0.0),) * model.n_x
        if len(mean_bounds) != model.n_x or len(std_bounds) != model.n_x:
            raise ValueError(f"arrival_mean_bounds and arrival_std_bounds need {model.n_x} Bounds each; got "
                             f"{len(mean_bounds)} and {len(std_bounds)}.")
        if any(b.lower is None or b.lower < 0 for b in std_bounds):
            raise ValueError(f"Every arrival_std bound needs a lower bound >= 0 (sigma must stay positive); got "
                             f"{list(std_bounds)}.")
        for label, values, bounds in (("arrival_mean", arrival_mean, mean_bounds),
                                      ("arrival_std", arrival_std, std_bounds)):
            outside = [(float(v), b) for v, b in zip(values, bounds) if not b.contains(float(v))]
            if outside:
                raise ValueError(f"{label} start values {[v for v, _ in outside]} lie on or outside their bounds "
                                 f"{[b for _, b in outside]}; move them inside or widen the bounds.")
        self.model, self.settings = model, settings
        self.arrival_mean_bounds, self.arrival_std_bounds = mean_bounds, std_bounds
        raw_mean = [b.to_raw(float(v)) for v, b in zip(arrival_mean, mean_bounds)]
        raw_std = [b.to_raw(float(v)) for v, b in zip(arrival_std, std_bounds)]
        self.arrival_mean_raw = nn.Parameter(torch.tensor(raw_mean, dtype=torch.float64))
        self.arrival_std_raw = nn.Parameter(torch.tensor(raw_std, dtype=torch.float64))
        self.register_buffer("q_inv", torch.tensor(settings.process_std, dtype=torch.float64) ** -2)
        self.register_buffer("r_inv", torch.tensor(settings.measurement_std, dtype=torch.float64) ** -2)
        self.layout = StageLayout(model.n_x, model.n_w, model.n_eta, model.n_y, settings.horizon)

    @property
    def arrival_mean(self) -> Tensor:
        """``s_bar``, shape (n_x,) (differentiable in ``arrival_mean_raw``)."""
        return torch.stack([b.from_raw(r) for b, r in zip(self.arrival_mean_bounds, self.arrival_mean_raw.unbind(0))])

    def arrival_std(self) -> Tensor:
        """``sigma`` with ``Sigma = diag(sigma^2)``, shape (n_x,)."""
        return torch.stack([b.from_raw(r) for b, r in zip(self.arrival_std_bounds, self.arrival_std_raw.unbind(0))])

    def arrival_precision(self) -> Tensor:
        """Diagonal of ``Sigma^{-1}``, shape (n_x,)."""
        return self.arrival_std() ** -2

    def parameter_values(self) -> dict[str, float]:
        """Current values of the identified physical and output-map parameters (by name), ``s_bar_i`` and ``sigma_i``."""
        out = {}
        if self.model.physics is not None:
            values = self.model.physics.params()
            out.update({n: float(values[n].detach()) for n in self.model.physics.params.free_names})
        if self.model.output_map is not None:
            values = self.model.output_map.params()
            out.update({n: float(values[n].detach()) for n in self.model.output_map.params.free_names})
        out.update({f"s_bar_{i}": float(v) for i, v in enumerate(self.arrival_mean.detach())})
        out.update({f"sigma_{i}": float(v) for i, v in enumerate(self.arrival_std().detach())})
        return out

    def stage_lagrangian(self, a: Tensor, b: Tensor, u: Tensor, y: Tensor, first: Tensor,
                         measured: Tensor) -> Tensor:
        """The part ``l_k`` of the Lagrangian (6) owned by stage k, batched over stages.

        ``l_k = [k=0] ||x_0 - s_bar||^2_{Sigma^-1} + ||w_k||^2_{Q^-1}
        + [k>=1] (||eta_k||^2_{R^-1} + mu^eta_k . (y~_k - h(x_k, u~_k) - F eta_k))
        + mu^w_k . (x_{k+1} - f_d(x_k, u~_k, w_k))`` for k = 0..N-1.

        Args:
            a: stage vectors ``z_k``, shape (B, s).
            b: next stage vectors ``z_{k+1}`` (only ``x_{k+1}`` is used), shape (B, s).
            u: step inputs ``u~_k``, shape (B, n_u_step) (`mhe.models.hold`); ``h = C x`` unless the model has an
                output map.
            y: outputs ``y~_k`` (ignored where ``measured`` is 0), shape (B, n_y).
            first: 1.0 at k = 0, else 0.0, shape (B,).
            measured: 1.0 for k >= 1, else 0.0, shape (B,).

        Returns:
            ``l_k``, shape (B,).
        """
        sl, model = self.layout.slices, self.model
        x, w, eta = a[:, sl["x"]], a[:, sl["w"]], a[:, sl["eta"]]
        mu_w, mu_eta = a[:, sl["mu_w"]], a[:, sl["mu_eta"]]
        dx = x - self.arrival_mean
        cost = first * (dx * dx * self.arrival_precision()).sum(-1) + (w * w * self.q_inv).sum(-1)
        meas = (eta * eta * self.r_inv).sum(-1)
        meas = meas + (mu_eta * (y - model.output(x, u) - eta @ model.F.T)).sum(-1)
        dyn = (mu_w * (b[:, sl["x"]] - model.step(x, u, w))).sum(-1)
        return cost + measured * meas + dyn

    def stage_data(self, windows: Windows) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Per-stage data for k = 0..N-1: inputs, outputs, first and measured flags.

        Returns:
            ``u`` (M, N, n_u), ``y`` (M, N, n_y) with ``y[:, k] = y~_k`` (zeros at k = 0),
            ``first`` (M, N) and ``measured`` (M, N).
        """
        m, n = len(windows), windows.horizon
        y = torch.cat([torch.zeros_like(windows.y[:, :1]), windows.y[:, : n - 1]], dim=1)
        k = torch.arange(n)
        first = (k == 0).to(y.dtype).expand(m, n)
        return windows.u, y, first, (k >= 1).to(y.dtype).expand(m, n)

    def forward(self, z: Tensor, windows: Windows) -> Tensor:
        """The Lagrangian (6) of each window, ``sum_k l_k``.

        Args:
            z: padded stage vectors, shape (M, N + 1, s).
            windows: the M windows.

        Returns:
            ``L^(i)``, shape (M,).
        """
        m, t, s = z.shape
        n = t - 1
        u, y, first, measured = self.stage_data(windows)
        flat = [v.reshape(m * n, *v.shape[2:]) for v in (z[:, :-1], z[:, 1:], u, y, first, measured)]
        return self.stage_lagrangian(*flat).reshape(m, n).sum(dim=1)

    def objective(self, z: Tensor, windows: Windows) -> Tensor:
        """The MHE cost (4a) of each window at the stage vectors ``z`` (the Lagrangian without multipliers).

        Args:
            z: padded stage vectors, shape (M, N + 1, s); their multipliers are ignored.
            windows: the M windows.

        Returns:
            ``||x_0 - s_bar||^2_{Sigma^-1} + sum ||w_k||^2_{Q^-1} + sum ||eta_k||^2_{R^-1}``, shape (M,).
        """
        sl = self.layout.slices
        primal = z.clone()
        primal[..., sl["mu_w"]] = 0.0
        primal[..., sl["mu_eta"]] = 0.0
        return self(primal, windows)

    def prediction_error(self, z: Tensor, windows: Windows) -> Tensor:
        """One-step prediction residuals ``r^(i) = h(x^_N, u~_N) - y~_N`` (Eq. 9; ``h = C x`` by default), (M, n_y).

        Raises:
            ValueError: for an output map that reads the input (feedthrough) and windows without ``u_end``.
        """
        out = self.model.output_map
        if out is not None and out.feedthrough and windows.u_end is None:
            raise ValueError("The output map reads the input, so the prediction at x_N needs u~_N: windows made by "
                             "mhe.make_windows carry it (Windows.u_end); these windows do not.")
        return self.model.output(z[:, -1, self.layout.slices["x"]], windows.u_end) - windows.y[:, -1]

    def initial_point(self, windows: Windows) -> KKTPoint:
        """A first guess: measured states from the data (through the output map's `state_guess`), the others
        from ``s_bar``, zero noise and multipliers."""
        m, n, lay, model = len(windows), windows.horizon, self.layout, self.model
        with torch.no_grad():
            x = self.arrival_mean.detach().expand(m, n + 1, lay.n_x).clone()
            y_states = torch.cat([windows.y[:, :1], windows.y], dim=1)
            x[:, :, list(model.measured)] = model.state_guess(y_states)
            zeros = windows.y.new_zeros
        return KKTPoint(x, zeros(m, n, lay.n_w), zeros(m, n - 1, lay.n_eta), zeros(m, n, lay.n_x),
                        zeros(m, n - 1, lay.n_y))

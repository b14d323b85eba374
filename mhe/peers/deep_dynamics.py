"""The Deep Dynamics model (Chrosniak et al., 2024): physical coefficients per sample from a history (EKF->PEM adaptive).

The baseline "EKF->PEM (adaptive)" of the PEM-MHE paper (Sections 4.3-4.4) trains, on state
estimates taken as exact (an EKF's, `mhe.peers.ekf`), a network that maps the last ``h`` rows
``z_j = (x_j, u_j)`` (``j = k - h + 1..k``) to the identified physical coefficients
``theta_k``, and predicts the next state with the known physics at those coefficients:

* a GRU over the standardized rows (``(z - mean) / std``, the training rows' statistics),
  its outputs at all ``h`` steps flattened, then dense layers with Mish activations;
* the physics guard: a linear layer and a sigmoid into each coefficient's bounds
  (`mhe.models.bounds.Bound.from_raw`: ``lo + (hi - lo) sigmoid``, or the same on ``log p`` for a
  ``log`` bound; Deep Dynamics uses the linear form for all), so every coefficient stays
  inside its physical range whatever the input;
* one step of the physics ``x_{k+1} = f_d(x_k, u_k; theta_k)``: the `mhe.models.model.PhysicsField`'s
  own `~mhe.models.model.PhysicsField.vector_field` with the coefficients of each row (the fixed
  parameters at the field's values) under the discretization's Butcher tableau
  (`mhe.models.discretization`), the same equations as every other row of the tables, the input
  ``u_k`` held over the step (a zero-order hold, `mhe.models.hold`, as Deep Dynamics does: its rows
  end at ``u_k``, so no later input is read).

Training (`fit_deep_dynamics`) minimizes the weighted one-step state error
``mean_k sum_i w_i (x^_{k+1,i} - f_d(x^_k, u_k; theta_k)_i)^2`` with Adam; a seeded random
hold-out of the samples picks the epoch whose state is kept (Deep Dynamics' 80/20 split and
best-validation checkpoint). `ekf_deep_dynamics` is the row's two stages as one pipeline (the EKF of
`mhe.peers.ekf_pem.run_ekf`, then the training on its estimates). Its predictions are scored on the state
estimates (`next_state_errors`, the one-step error of Table 1's form, also for a constant-parameter model under
the same estimates) and its coefficients summarized over the samples (`coefficient_summary`).
"""
from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from ..data.recording import Recording
from ..models.checks import require
from ..models.discretization import tableau
from ..models.model import PhysicsField
from ..models.ops import TORCH_OPS

if TYPE_CHECKING:  # the EKF's CasADi is imported by ekf_deep_dynamics, not with the model
    from ..identification import IdentificationProblem
    from .ekf import EKFResult

__all__ = ["DeepDynamicsSettings", "DeepDynamics", "DeepDynamicsFit", "usable_samples", "history_rows",
           "fit_deep_dynamics", "rollout", "EKFDeepDynamics", "ekf_deep_dynamics", "coefficient_summary",
           "next_state_errors"]


@dataclass(frozen=True)
class DeepDynamicsSettings:
    """Network and training settings, validated once (defaults: Deep Dynamics' ``deep_dynamics_iac.yaml``).

    Attributes:
        history: rows ``h`` of (state, input) the network sees (their ``HORIZON``, 15).
        gru_width: hidden size of the GRU (theirs equals ``h``: 15).
        gru_layers: stacked GRU layers (3).
        dense_width: width of the dense layers (188).
        dense_layers: dense layers with Mish after the GRU (2).
        epochs: passes over the training samples (400).
        batch_size: samples per Adam step (128).
        lr: Adam's learning rate (1e-3).
        state_weights: ``w_i`` of the loss, one per state (theirs: 1, 1, 1 on vx, vy, omega).
        holdout: fraction of the samples held out to choose the kept epoch (theirs 0.2).
        seed: seed of the initial weights (drawn in the default dtype), the hold-out draw and the batch order.
    """

    history: int = 15
    gru_width: int = 15
    gru_layers: int = 3
    dense_width: int = 188
    dense_layers: int = 2
    epochs: int = 400
    batch_size: int = 128
    lr: float = 1e-3
    state_weights: tuple[float, ...] = (1.0, 1.0, 1.0)
    holdout: float = 0.2
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "state_weights", tuple(float(w) for w in self.state_weights))
        counts = {n: getattr(self, n) for n in ("history", "gru_width", "gru_layers", "dense_width", "epochs",
                                                  "batch_size")}
        bad = {n: v for n, v in counts.items() if int(v) != v or v < 1}
        require([*((False, f"{n} must be an integer >= 1; got {v}.") for n, v in bad.items()),
                 (self.dense_layers >= 0, f"dense_layers must be >= 0; got {self.dense_layers}."),
                 (self.lr > 0, f"lr must be > 0; got {self.lr}."),
                 (0.0 <= self.holdout < 1.0, f"holdout must lie in [0, 1); got {self.holdout}."),
                 (min(self.state_weights, default=0.0) >= 0 and any(self.state_weights),
                  f"state_weights must be non-negative and not all zero; got {self.state_weights}.")])


class DeepDynamics(nn.Module):
    """History of (state, input) rows -> GRU -> dense -> physics guard -> one physics step.

    Args:
        physics: the known physics (e.g. `mhe.SingleTrackVehicle`); its identified parameters
            (``params.free_names``, each with a two-sided bound) become the guard's outputs,
            the fixed ones keep the field's values.
        dt: sample time in seconds.
        discretization: ``"euler"``, ``"rk4"`` or ``"rkf45"`` (`mhe.models.discretization.TABLEAUS`).
        settings: widths and history length.

    Raises:
        ValueError: for an identified parameter without two finite bounds, a non-positive ``dt``
            or an unknown discretization.
    """

    def __init__(self, physics: PhysicsField, dt: float, discretization: str = "euler",
                 settings: DeepDynamicsSettings | None = None) -> None:
        super().__init__()
        self.settings = settings = settings or DeepDynamicsSettings()
        params = physics.params
        open_ = [n for n in params.free_names if params.bounds[n].lower is None or params.bounds[n].upper is None]
        if open_ or not params.free_names:
            raise ValueError(f"The physics guard needs two bounds on every identified parameter and at least one "
                             f"identified; {open_ or 'none'} are not bounded on both sides. Give bounds.")
        if not dt > 0:
            raise ValueError(f"dt must be positive (seconds); got {dt}.")
        if len(settings.state_weights) != physics.n_x:
            raise ValueError(f"settings.state_weights needs one weight per state, {physics.n_x}; got "
                             f"{settings.state_weights}.")
        self.physics, self.dt, self.tableau = physics, float(dt), tableau(discretization)
        self.names, self.bounds = params.free_names, [params.bounds[n] for n in params.free_names]
        self.n_x, self.n_u = physics.n_x, physics.n_u
        n_in, s = self.n_x + self.n_u, settings
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(s.seed)
            self.gru = nn.GRU(n_in, s.gru_width, s.gru_layers, batch_first=True)
            layers: list[nn.Module] = []
            width = s.history * s.gru_width
            for _ in range(s.dense_layers):
                layers += [nn.Linear(width, s.dense_width), nn.Mish()]
                width = s.dense_width
            self.dense = nn.Sequential(*layers)
            self.guard = nn.Linear(width, len(self.names))
        self.register_buffer("feature_mean", torch.zeros(n_in))
        self.register_buffer("feature_std", torch.ones(n_in))
        self.register_buffer("lower", torch.tensor([b.lower for b in self.bounds]))
        self.register_buffer("upper", torch.tensor([b.upper for b in self.bounds]))

    def network_parameters(self) -> list[nn.Parameter]:
        """The trained weights (GRU, dense layers, guard), not the physics' own parameters."""
        return [*self.gru.parameters(), *self.dense.parameters(), *self.guard.parameters()]

    def set_scale(self, rows: Tensor) -> None:
        """Standardize features with the mean and standard deviation of ``rows`` (B, h, n_x + n_u) (a constant
        feature keeps scale 1)."""
        flat = self._check(rows).reshape(-1, rows.shape[-1])
        std = flat.std(dim=0)
        self.feature_mean.copy_(flat.mean(dim=0))
        self.feature_std.copy_(torch.where(std > 0, std, torch.ones_like(std)))

    def _check(self, rows: Tensor) -> Tensor:
        want = (self.settings.history, self.n_x + self.n_u)
        if not isinstance(rows, Tensor) or rows.ndim != 3 or tuple(rows.shape[1:]) != want:
            got = tuple(rows.shape) if isinstance(rows, Tensor) else type(rows).__name__
            raise ValueError(f"rows must have shape (B, {want[0]}, {want[1]}): the last history={want[0]} rows of "
                             f"(state, input), {self.n_x} states then {self.n_u} inputs; got {got}.")
        return rows

    def coefficients(self, rows: Tensor) -> Tensor:
        """The guarded coefficients ``theta_k`` in ``names`` order, (B, h, n_x + n_u) -> (B, n_theta), physical units.

        Each lies in its bound (`mhe.models.bounds.Bound.from_raw`, clamped against rounding at a saturated sigmoid).
        """
        z = (self._check(rows) - self.feature_mean) / self.feature_std
        out, _ = self.gru(z)
        raw = self.guard(self.dense(out.flatten(1)))
        theta = torch.stack([b.from_raw(raw[:, j]) for j, b in enumerate(self.bounds)], dim=-1)
        return torch.minimum(torch.maximum(theta, self.lower), self.upper)

    def step(self, x: Tensor, u: Tensor, theta: Tensor) -> Tensor:
        """``f_d(x, u; theta)`` with one coefficient vector per row, (B, n_x), (B, n_u), (B, n_theta) -> (B, n_x)."""
        p = {n: v.to(x.dtype) for n, v in self.physics.params().items() if n not in self.names}
        p.update(zip(self.names, theta.unbind(-1)))
        u_parts = list(u.unbind(-1))

        def field_(s: Tensor) -> Tensor:
            out = self.physics.vector_field(list(s.unbind(-1)), u_parts, p, TORCH_OPS)
            return torch.stack(torch.broadcast_tensors(*out), dim=-1)

        return self.tableau.step(field_, x, self.dt)

    def forward(self, rows: Tensor) -> Tensor:
        """The next state from the history, (B, h, n_x + n_u) -> (B, n_x): the last row's state and input, the
        coefficients of the whole history."""
        theta = self.coefficients(rows)
        last = rows[:, -1]
        return self.step(last[:, :self.n_x], last[:, self.n_x:], theta)


def usable_samples(length: int, history: int, ahead: int = 1, breaks: Sequence[int] = ()) -> Tensor:
    """Samples ``k`` whose history ``k - history + 1..k`` and the next ``ahead`` samples lie in one segment.

    Args:
        length: samples T of the recording.
        history: rows of history ``h``.
        ahead: samples after ``k`` that must exist (1 for a one-step target).
        breaks: rows ``t`` that do not follow row ``t - 1`` (`mhe.data.recording.Recording.breaks`).

    Returns:
        The usable ``k`` in increasing order, shape (M,), int64.

    Raises:
        ValueError: when no sample is usable (a recording shorter than ``history + ahead``).
    """
    if history < 1 or ahead < 0:
        raise ValueError(f"history must be >= 1 and ahead >= 0; got history={history}, ahead={ahead}.")
    segment = torch.zeros(length, dtype=torch.long)
    for b in breaks:
        if 0 < b < length:
            segment[b:] += 1
    k = torch.arange(history - 1, length - ahead)
    k = k[segment[k - history + 1] == segment[k + ahead]] if len(k) else k
    if not len(k):
        raise ValueError(f"A recording of {length} samples (breaks {list(breaks)}) has no stretch of history={history} "
                         f"rows plus {ahead} ahead; use a longer recording or a shorter history.")
    return k


def history_rows(states: Tensor, inputs: Tensor, last: Tensor, history: int) -> Tensor:
    """The rows ``(x_j, u_j)``, ``j = k - history + 1..k``, for each ``k`` in ``last``.

    Args:
        states: ``x_0..x_{T-1}``, shape (T, n_x).
        inputs: ``u_0..u_{T-1}`` (``u_k`` drives ``k -> k + 1``), shape (T, n_u).
        last: the samples ``k``, shape (M,), each in ``[history - 1, T)``.
        history: rows per sample.

    Returns:
        Shape (M, history, n_x + n_u).

    Raises:
        ValueError: for states and inputs of different lengths or a ``k`` without a full history.
    """
    if states.ndim != 2 or inputs.ndim != 2 or len(states) != len(inputs):
        raise ValueError(f"states (T, n_x) and inputs (T, n_u) need the same T; got {tuple(states.shape)} and "
                         f"{tuple(inputs.shape)}.")
    if len(last) and (int(last.min()) < history - 1 or int(last.max()) >= len(states)):
        raise ValueError(f"Every sample in last needs history={history} rows before it within the {len(states)} "
                         f"samples; got samples from {int(last.min())} to {int(last.max())}.")
    z = torch.cat([states, inputs.to(states.dtype)], dim=-1)
    return z[last[:, None] + torch.arange(1 - history, 1)[None, :]]


@dataclass
class DeepDynamicsFit:
    """What `fit_deep_dynamics` did.

    Attributes:
        train_loss: mean weighted squared state error per epoch on the trained samples (during the epoch).
        holdout_loss: the same on the held-out samples after each epoch (empty without a hold-out).
        best_epoch: the epoch (1-based) whose weights were kept (the lowest hold-out loss; the last without one).
        samples: (trained, held out).
        wall_s: wall time of the training in seconds.
    """

    train_loss: list[float] = field(default_factory=list)
    holdout_loss: list[float] = field(default_factory=list)
    best_epoch: int = 0
    samples: tuple[int, int] = (0, 0)
    wall_s: float = 0.0


def fit_deep_dynamics(model: DeepDynamics, rows: Tensor, targets: Tensor, log_every: int = 0) -> DeepDynamicsFit:
    """Train ``model`` on one-step transitions with Adam (its settings); set its feature scale from ``rows`` first.

    Args:
        model: the model; trained in place and left at the kept epoch's weights.
        rows: histories, shape (M, h, n_x + n_u), in the model's dtype.
        targets: the states ``x^_{k+1}`` after each history's last row, shape (M, n_x).
        log_every: print the losses every this many epochs (0: never).

    Returns:
        The loss curves, the kept epoch and the wall time.

    Raises:
        ValueError: for mismatched shapes or fewer than two samples to train on.
    """
    s = model.settings
    model._check(rows)
    if targets.shape != (len(rows), model.n_x):
        raise ValueError(f"targets must have shape ({len(rows)}, {model.n_x}), one next state per history; got "
                         f"{tuple(targets.shape)}.")
    gen = torch.Generator().manual_seed(s.seed)
    order = torch.randperm(len(rows), generator=gen)
    n_hold = int(s.holdout * len(rows))
    hold, train = order[:n_hold], order[n_hold:]
    if len(train) < 2:
        raise ValueError(f"{len(rows)} samples leave {len(train)} to train on after the hold-out of {s.holdout}; "
                         "give more samples.")
    t0 = time.perf_counter()
    model.set_scale(rows[train])
    weights = torch.tensor(s.state_weights, dtype=rows.dtype)
    opt = torch.optim.Adam(model.network_parameters(), lr=s.lr)
    result = DeepDynamicsFit(samples=(len(train), len(hold)))
    best, best_state = float("inf"), None

    def loss_of(idx: Tensor) -> Tensor:
        return (weights * (model(rows[idx]) - targets[idx]) ** 2).sum(-1).mean()

    for epoch in range(1, s.epochs + 1):
        model.train()
        total, count = 0.0, 0
        for batch in train[torch.randperm(len(train), generator=gen)].split(s.batch_size):
            opt.zero_grad()
            loss = loss_of(batch)
            loss.backward()
            opt.step()
            total, count = total + float(loss.detach()) * len(batch), count + len(batch)
        result.train_loss.append(total / count)
        model.eval()
        if n_hold:
            with torch.no_grad():
                result.holdout_loss.append(float(loss_of(hold)))
            if result.holdout_loss[-1] < best:
                best, result.best_epoch = result.holdout_loss[-1], epoch
                best_state = copy.deepcopy(model.state_dict())
        if log_every and (epoch % log_every == 0 or epoch == s.epochs):
            held = f", hold-out {result.holdout_loss[-1]:.4e}" if n_hold else ""
            print(f"epoch {epoch:4d} train {result.train_loss[-1]:.4e}{held} t={time.perf_counter() - t0:.0f}s",
                  flush=True)
    if best_state is not None:
        model.load_state_dict(best_state)
    else:
        result.best_epoch = s.epochs
    result.wall_s = time.perf_counter() - t0
    return result


def rollout(model: DeepDynamics, rows: Tensor, inputs: Tensor) -> Tensor:
    """Open-loop states from histories: each prediction becomes the newest row of the next history.

    Args:
        model: the model.
        rows: histories ending at sample ``k`` (with ``u_k``), shape (M, h, n_x + n_u).
        inputs: the inputs ``u_{k+1}..u_{k+S-1}`` of the later steps, shape (M, S - 1, n_u).

    Returns:
        The predicted states ``x_{k+1}..x_{k+S}``, shape (M, S, n_x).
    """
    model._check(rows)
    if inputs.ndim != 3 or inputs.shape[0] != len(rows) or inputs.shape[2] != model.n_u:
        raise ValueError(f"inputs must have shape ({len(rows)}, S - 1, {model.n_u}); got {tuple(inputs.shape)}.")
    out = [model(rows)]
    for j in range(inputs.shape[1]):
        new = torch.cat([out[-1], inputs[:, j].to(rows.dtype)], dim=-1)
        rows = torch.cat([rows[:, 1:], new[:, None]], dim=1)
        out.append(model(rows))
    return torch.stack(out, dim=1)



@dataclass(frozen=True)
class EKFDeepDynamics:
    """The result of `ekf_deep_dynamics`.

    Attributes:
        model: the trained Deep Dynamics model (float32, in eval mode, at the kept epoch's weights).
        fit: its training (`fit_deep_dynamics`: loss curves, kept epoch, network wall time).
        ekf: the filter's result on the training recording (filtered states ``x^_{k|k}`` (T, n_x), wall time).
        last: the samples ``k`` trained on (a full history and the next sample in one stretch), (M,) int64.
        wall_s: the wall time of both stages in seconds.
    """

    model: DeepDynamics
    fit: DeepDynamicsFit
    ekf: EKFResult
    last: Tensor
    wall_s: float


def ekf_deep_dynamics(problem: IdentificationProblem, settings: DeepDynamicsSettings, build: str | Path,
                      log_every: int = 0) -> EKFDeepDynamics:
    """EKF->PEM (adaptive): the EKF over ``problem``'s recording, then Deep Dynamics trained on its estimates.

    Stage one is `mhe.peers.ekf_pem.run_ekf` (``problem``'s model at its start values; noise model and prior from
    its MHE weights and arrival cost); stage two trains a `DeepDynamics` of ``problem``'s physics (its bounds guard
    the coefficients) on the filtered states of every sample with a full history (`usable_samples`), float32
    (`fit_deep_dynamics`).

    Args:
        problem: the physics, its bounds, discretization, weights and recording.
        settings: the network's and the training's settings.
        build: the build folder of the filter's CasADi functions.
        log_every: print the sample count and the losses every this many epochs (0: never).

    Returns:
        The trained model, its training, the filter's result, the samples and the wall time.
    """
    from .ekf_pem import run_ekf

    t0 = time.perf_counter()
    ekf = run_ekf(problem, build)
    x_hat, rec, h = torch.as_tensor(ekf.states), problem.recording, settings.history
    last = usable_samples(len(rec.outputs), h, 1, rec.breaks)
    model = DeepDynamics(problem.physics, rec.dt, problem.discretization, settings).float()
    rows = history_rows(x_hat.float(), rec.inputs.float(), last, h)
    if log_every:
        print(f"{len(rows)} training samples of history {h}; {sum(p.numel() for p in model.network_parameters())} "
              f"weights", flush=True)
    fit = fit_deep_dynamics(model, rows, x_hat[last + 1].float(), log_every)
    wall = time.perf_counter() - t0
    model.eval()
    return EKFDeepDynamics(model, fit, ekf, last, wall)

def next_state_errors(nxt: Tensor, recording: Recording, measured: Sequence[int], x_hat: Tensor,
                      last: Tensor) -> dict:
    """The one-step errors of next states predicted from state estimates (Table 1's form on given states).

    Args:
        nxt: the predicted next states ``x+_k`` from ``x^_k`` at the samples ``last``, (M, n_x).
        recording: the recording scored (outputs (T, n_y); logged states (T, n_x), or (T, 0) when unknown).
        measured: the states the outputs measure, n_y indices.
        x_hat: the state estimates ``x^_0..x^_{T-1}`` (e.g. an EKF's), (T, n_x).
        last: the samples ``k``, (M,) int, each with ``k + 1 < T``.

    Returns:
        ``mse``: the mean over samples and outputs of ``(C x+_k - y~_{k+1})^2`` (output units squared); ``rmse``
        per output; ``samples`` M; ``state_mse_vs_ekf``: per state the mean squared error against ``x^_{k+1}``;
        with logged states ``hidden_rmse_vs_logged``: per unmeasured state the RMSE against the logged one.
    """
    nxt, n_x = nxt.detach().to(torch.float64), nxt.shape[1]
    r = nxt[:, list(measured)] - recording.outputs[last + 1]
    hidden = [j for j in range(n_x) if j not in measured]
    out = {"mse": float((r ** 2).mean()), "rmse": (r ** 2).mean(0).sqrt().tolist(), "samples": len(last),
           "state_mse_vs_ekf": ((nxt - x_hat[last + 1]) ** 2).mean(0).tolist()}
    if recording.states.shape[1] == n_x:
        logged = recording.states[last + 1][:, hidden]
        out["hidden_rmse_vs_logged"] = ((nxt[:, hidden] - logged) ** 2).mean(0).sqrt().tolist()
    return out


def coefficient_summary(names: Sequence[str], theta: Tensor) -> dict[str, dict[str, float]]:
    """Mean, standard deviation, minimum and maximum of each coefficient over the samples.

    Args:
        names: the coefficients' names (`DeepDynamics.names`), n_theta.
        theta: the coefficients per sample (`DeepDynamics.coefficients`), (M, n_theta), physical units.

    Returns:
        By name ``mean``, ``std`` (sample standard deviation), ``min`` and ``max``, physical units.
    """
    t = theta.to(torch.float64)
    return {n: {"mean": float(t[:, j].mean()), "std": float(t[:, j].std()), "min": float(t[:, j].min()),
                "max": float(t[:, j].max())} for j, n in enumerate(names)}

"""The MHE NLP of Eq. (4) in CasADi, solved by IPOPT with warm starts.

Decision vector ``(x_0..x_N, w_0..w_{N-1}, eta_1..eta_{N-1})`` and constraints
``(x_{k+1} - f_d(x_k, u~_k, w_k), y~_k - h(x_k, u~_k) - F eta_k)`` (``h = C x`` unless the model has an
output map, `mhe.models.output`; ``u~_k`` the step input row of the model's hold, `mhe.models.hold`) come first, in the order of
`mhe.estimator.point.KKTPoint.primal` / `KKTPoint.dual`; CasADi's Lagrangian is
``f + lam_g^T g``, so IPOPT's ``lam_g`` are the multipliers ``mu`` of Eq. (6) without a
sign change. For lifted models (`CasadiDynamics.lifted`) the Runge-Kutta stage derivatives and
their defining constraints follow; eliminating them gives Eq. (4) back with the same
``v`` and ``mu``. The NLP parameters are the window data and the numeric ``alpha``, so
one solver object serves all windows and all outer iterations.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import casadi as cs
import numpy as np
from torch import Tensor

from ..models.casadi_model import CasadiDynamics
from .estimator import MovingHorizonEstimator

__all__ = ["OuterValues", "MHESolution", "MHEProblem"]


@dataclass(frozen=True)
class OuterValues:
    """A numeric, picklable snapshot of ``alpha`` for the NLP.

    Attributes:
        version: changes whenever ``alpha`` changes.
        arrival_mean: ``s_bar``, shape (n_x,).
        arrival_precision: diagonal of ``Sigma^{-1}``, shape (n_x,).
        physics: physical parameter values, shape (n_p,).
        residual: the neural residual's ``state_dict``, or None.
        output: the output map's parameter values, shape (n_q,) (empty for ``y = C x``).
    """

    version: int
    arrival_mean: np.ndarray
    arrival_precision: np.ndarray
    physics: np.ndarray
    residual: dict[str, Tensor] | None
    output: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @staticmethod
    def of(estimator: MovingHorizonEstimator, version: int) -> "OuterValues":
        """Snapshot the current ``alpha`` of ``estimator``."""
        model = estimator.model
        residual = None if model.residual is None else {k: v.detach().clone()
                                                        for k, v in model.residual.state_dict().items()}
        return OuterValues(version, estimator.arrival_mean.detach().numpy().copy(),
                           estimator.arrival_precision().detach().numpy().copy(),
                           CasadiDynamics.parameter_values(model), residual, CasadiDynamics.output_values(model))


@dataclass(frozen=True)
class MHESolution:
    """IPOPT's result for one window.

    Attributes:
        v: primal solution of Eq. (4), shape (n_v,).
        mu: its multipliers, shape (n_mu,).
        start: the full NLP primal and dual solution, the warm start of the next solve.
        success: IPOPT reported success and the solution is finite.
        status: IPOPT's return status (or the error text).
        iterations: IPOPT iterations.
        wall_s: wall time of the solve in seconds.
    """

    v: np.ndarray
    mu: np.ndarray
    start: tuple[np.ndarray, np.ndarray]
    success: bool
    status: str
    iterations: int
    wall_s: float


class MHEProblem:
    """The MHE NLP (Eq. 4) of ``windows`` windows at once, reused across windows and outer iterations.

    With ``windows > 1`` the windows' variables, parameters and constraints are stacked
    into one block-diagonal NLP ("one batched problem"); the default solves one window
    per call.

    Args:
        estimator: the torch MHE; its model, horizon and weights define the NLP.
        dynamics: the CasADi model of ``estimator.model`` (shared between problems so that
            L4CasADi compiles once).
        windows: windows per NLP, >= 1.
    """

    def __init__(self, estimator: MovingHorizonEstimator, dynamics: CasadiDynamics, windows: int = 1) -> None:
        if windows < 1:
            raise ValueError(f"windows must be >= 1; got {windows}.")
        st, lay = estimator.settings, estimator.layout
        self.dynamics, self.windows = dynamics, windows
        n = st.horizon
        self.n_v = (n + 1) * lay.n_x + n * lay.n_w + (n - 1) * lay.n_eta
        self.n_mu = n * lay.n_x + (n - 1) * lay.n_y
        parts = [self._window(estimator) for _ in range(windows)]
        v, p, g = (cs.vertcat(*[q[i] for q in parts]) for i in (0, 1, 3))
        cost = sum(q[2] for q in parts)
        self.n_x_nlp, self.n_g = parts[0][0].shape[0], parts[0][3].shape[0]
        opts = {"print_time": False, "expand": dynamics.symbol is cs.SX, "ipopt.print_level": 0, "ipopt.sb": "yes",
                "ipopt.tol": st.tol, "ipopt.max_iter": st.max_iter,
                "ipopt.warm_start_init_point": "yes" if st.warm_start else "no"}
        self.solver = cs.nlpsol("mhe", st.solver, {"x": v, "p": p, "f": cost, "g": g}, opts)
        self._stages = dynamics.stages.map(n) if dynamics.lifted else None
        self._values: OuterValues | None = None
        self._horizon, self._n_x = n, lay.n_x

    def _window(self, estimator: MovingHorizonEstimator):
        """Symbols ``(v, p)``, cost and constraints of one window."""
        model, lay, dyn = estimator.model, estimator.layout, self.dynamics
        sym, n, h = dyn.symbol, estimator.settings.horizon, model.dt
        tab = dyn.tableau
        n_k = tab.stages * n * lay.n_x if dyn.lifted else 0
        v = sym.sym("v", self.n_v + n_k)
        o1, o2 = (n + 1) * lay.n_x, (n + 1) * lay.n_x + n * lay.n_w
        xs = cs.reshape(v[:o1], lay.n_x, n + 1)
        ws = cs.reshape(v[o1:o2], lay.n_w, n)
        es = cs.reshape(v[o2:self.n_v], lay.n_eta, n - 1)
        sizes = [n * model.n_u_step, (n - 1) * lay.n_y, lay.n_x, lay.n_x, dyn.n_p, dyn.n_q]
        p = sym.sym("p", sum(sizes))
        us, ys, s_bar, prec, theta, q_out = cs.vertsplit(p, list(np.cumsum([0] + sizes)))
        us, ys = cs.reshape(us, model.n_u_step, n), cs.reshape(ys, lay.n_y, n - 1)
        q_inv, r_inv = cs.DM(estimator.q_inv.numpy()), cs.DM(estimator.r_inv.numpy())
        dx = xs[:, 0] - s_bar
        cost = cs.dot(dx * dx, prec) + cs.sum2(cs.mtimes(q_inv.T, ws * ws)) + cs.sum2(cs.mtimes(r_inv.T, es * es))
        if dyn.lifted:
            n_s = tab.stages
            ks = cs.reshape(v[self.n_v:], lay.n_x, n_s * n)
            k = [ks[:, j * n:(j + 1) * n] for j in range(n_s)]
            nodes = [tab.stage_state(xs[:, :n], k, j, h) for j in range(n_s)]
            inputs = cs.horzcat(*[dyn.input_at(us, c) for c in tab.nodes])
            rhs = dyn.field(cs.horzcat(*nodes), inputs, cs.repmat(ws, 1, n_s), theta)
            x_next = tab.combine(xs[:, :n], k, h)
            g_stage = [cs.vec(ks - rhs)]
        else:
            x_next, g_stage = dyn.step.map(n)(xs[:, :n], us, ws, cs.repmat(theta, 1, n)), []
        f = cs.DM(model.F.numpy())
        if model.output_map is None:
            y_model = cs.mtimes(cs.DM(model.C.numpy()), xs[:, 1:n])
        else:
            y_model = dyn.output.map(n - 1)(xs[:, 1:n], us[:model.n_u, 1:n], cs.repmat(q_out, 1, n - 1))
        g_meas = ys - y_model - cs.mtimes(f, es)
        return v, p, cost, cs.vertcat(cs.vec(xs[:, 1:] - x_next), cs.vec(g_meas), *g_stage)

    def set_outer(self, values: OuterValues) -> None:
        """Use the outer parameters ``values`` from now on (pushes new neural weights once per version)."""
        if self._values is not None and self._values.version == values.version:
            return
        if values.residual is not None:
            self.dynamics.load_residual(values.residual, values.version)
        self._values = values

    def start_from(self, u: np.ndarray, v: np.ndarray, mu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A full NLP start of one window from a primal-dual point of Eq. (4).

        Stage derivatives of a lifted NLP are evaluated at the point, their multipliers set to 0.

        Args:
            u: step inputs of the window, shape (N, n_u_step).
            v: primal point, shape (n_v,).
            mu: multipliers, shape (n_mu,).
        """
        if self._stages is None:
            return v, mu
        n, nx = self._horizon, self._n_x
        xs = v[:(n + 1) * nx].reshape(n + 1, nx)[:n].T
        ws = v[(n + 1) * nx:(n + 1) * nx + n * nx].reshape(n, nx).T
        theta = np.repeat(self._values.physics[:, None], n, axis=1)
        n_s = self.dynamics.tableau.stages
        k = np.asarray(self._stages(xs, u.T, ws, theta)).reshape(nx, n, n_s).transpose(0, 2, 1).reshape(nx, n_s * n)
        return np.concatenate([v, k.T.reshape(-1)]), np.concatenate([mu, np.zeros(self.n_g - self.n_mu)])

    def solve(self, u: np.ndarray, y: np.ndarray, starts: list[tuple[np.ndarray, np.ndarray]]) -> list[MHESolution]:
        """Solve the MHE of ``windows`` windows in one NLP.

        Args:
            u: step inputs ``u~_0..u~_{N-1}`` per window, shape (B, N, n_u_step) with B = ``windows``.
            y: outputs ``y~_1..y~_N`` per window, shape (B, N, n_y) (``y~_N`` is not used).
            starts: per window a full NLP primal and dual start (`MHESolution.start` or `start_from`).

        Returns:
            One `MHESolution` per window; they share success, status, iterations and wall
            time of the NLP. A solver exception becomes ``success=False`` with its text.

        Raises:
            RuntimeError: if `set_outer` was never called.
            ValueError: if the number of windows differs from ``windows``.
        """
        if self._values is None:
            raise RuntimeError("Call set_outer() with the outer parameters before solving.")
        if not u.shape[0] == y.shape[0] == len(starts) == self.windows:
            raise ValueError(f"This problem solves {self.windows} windows per call; got {u.shape[0]} inputs, "
                             f"{y.shape[0]} outputs and {len(starts)} starts.")
        a = self._values
        p = np.concatenate([np.concatenate([u[i].reshape(-1), y[i, : self._horizon - 1].reshape(-1), a.arrival_mean,
                                            a.arrival_precision, a.physics, a.output]) for i in range(self.windows)])
        x0, lam0 = np.concatenate([s[0] for s in starts]), np.concatenate([s[1] for s in starts])
        t0 = time.perf_counter()
        try:
            sol = self.solver(x0=x0, lam_g0=lam0, p=p, lbg=0.0, ubg=0.0)
            stats = self.solver.stats()
            x, lam = np.asarray(sol["x"]).ravel(), np.asarray(sol["lam_g"]).ravel()
            status, iters = str(stats.get("return_status", "")), int(stats.get("iter_count", -1))
            ok = bool(stats.get("success", False)) and bool(np.isfinite(x).all() and np.isfinite(lam).all())
        except RuntimeError as err:
            x, lam, status, iters, ok = x0, lam0, f"error: {err}".splitlines()[0], -1, False
        wall = time.perf_counter() - t0
        out = []
        for i in range(self.windows):
            xi = x[i * self.n_x_nlp:(i + 1) * self.n_x_nlp]
            li = lam[i * self.n_g:(i + 1) * self.n_g]
            out.append(MHESolution(xi[:self.n_v], li[:self.n_mu], (xi, li), ok, status, iters, wall))
        return out

"""The CasADi expression of ``f_c`` and ``f_d`` generated from the torch `StateSpaceModel`.

The physics runs its own `PhysicsField.vector_field` on CasADi symbols (`CASADI_OPS`),
with the physical parameter values as a symbolic vector ``p`` so the NLP is built once
and reused while ``theta`` changes. The neural residual enters through L4CasADi: a copy
of the torch module is traced, its C++ wrapper compiled into ``build_dir`` (never the
working directory) and called on rows ``[x^T, u^T]`` of shape (1, n_x + n_u); new
weights are pushed with L4CasADi's mutable update, without recompiling.

L4CasADi provides second derivatives of the network only where its adjoint seed does
not depend on the decision variables, i.e. when the network is called at the top level
of a constraint. Inside a composed Runge-Kutta step it is not, so models with a residual are
*lifted* (`CasadiDynamics.lifted`): the stage derivatives of the model's tableau
(`mhe.models.discretization`) become NLP variables with constraints
``k_j = f_c(x + h sum_{l<j} a_jl k_l, u(c_j), w)``, ``u(c_j)`` the input of the model's hold at the
stage's node (`mhe.models.hold`). Physics-only models use the composed step in SX. L4CasADi evaluates in
float32; `mhe.estimator.kkt.refine` polishes in float64. Its traces of the network (the value, the Jacobian,
the adjoint and its Jacobian, made when the function is first called and again at every weight update) take
example inputs in torch's default dtype, and a trace keeps the dtype of its example: the traces are made with
float64 the default (`mhe.models.model.float64_default`), so the derivatives IPOPT sees do not depend on the
process that builds the solver (float32 by default in the CLI and in a solver's worker processes, float64 where
a benchmark sets it). Made with float32, the derivatives were rounded to float32, and on the same gray-box IAC
weights one of the 151 validation windows ended in another local minimum in the CLI than in the benchmark
(issue 35, item 1).

A residual with a trust envelope (`mhe.models.envelope`) is faded on the CasADi side too. Through L4CasADi the
traced rows are the faded residual (`NeuralResidual.rows`), so L4CasADi's Jacobians and Hessians
(torch's autograd, generated with the network) hold the fade's exact derivatives: multiplying the
network's output by a CasADi fade instead would make its adjoint seed depend on the decision
variables, where L4CasADi gives no second derivatives. An envelope recorded after the NLP was built
is refused when its weights are pushed (`CasadiDynamics.load_residual`): build a new solver.

With ``residual="sx"`` the network is written out in SX instead, with the weights it has now (its
matrix products and tanh, float64, no compiled library, exact derivatives of every order; as
`mhe.models.trained_field` writes a trained field): for problems where the weights stay fixed, such as the
free-run initial states of a gray-box model (`mhe.outer.free_run.estimate_initial_states`); its envelope's fade
is `mhe.models.envelope.casadi_fade` of ``[x, u] / in_scale``, written out in the same graph.

The output ``y = h(x, u; q)`` is a function too (`CasadiDynamics.output`): ``C x`` by default, or the
model's `mhe.models.output.OutputMap` with its parameter values as a symbolic vector ``q``.
"""
from __future__ import annotations

import copy
from pathlib import Path
from types import SimpleNamespace

import casadi as cs
import numpy as np
import torch
from torch import Tensor, nn

from .discretization import ButcherTableau
from .envelope import casadi_fade
from .model import NeuralResidual, StateSpaceModel, float64_default

__all__ = ["CASADI_OPS", "CasadiDynamics"]

CASADI_OPS = SimpleNamespace(sin=cs.sin, cos=cs.cos, tan=cs.tan, atan=cs.atan, atan2=cs.atan2, tanh=cs.tanh,
                             exp=cs.exp, log=cs.log, sqrt=cs.sqrt, fabs=cs.fabs,
                             softplus=lambda z: cs.fmax(z, 0.0) + cs.log1p(cs.exp(-cs.fabs(z))))
"""The math functions of `mhe.models.ops.TORCH_OPS`, for CasADi symbols."""


class _Rows(nn.Module):
    """What L4CasADi traces: rows (1, n_x + n_u) in float32 -> residual (1, n_x) in float64."""

    def __init__(self, residual: NeuralResidual) -> None:
        super().__init__()
        self.residual = residual

    def forward(self, z: Tensor) -> Tensor:
        return self.residual.rows(z)  # with the envelope's fade: L4CasADi differentiates it with the network


class CasadiDynamics:
    """``f_c(x, u, w; p)`` and ``f_d`` of a `StateSpaceModel` as ``casadi.Function`` objects.

    Args:
        model: the torch model; its current neural weights are compiled in.
        build_dir: folder for L4CasADi's generated code and library (created).
        name: unique name of the compiled library inside ``build_dir``.
        residual: how the network reaches CasADi: ``"l4casadi"`` (compiled, its weights updatable) or
            ``"sx"`` (written out with its current weights; nothing is compiled or written).

    Attributes:
        step: ``casadi.Function('f_d', [x, u, w, p], [x_next])``, one composed step of ``tableau``;
            ``u`` is the step input row, n_u_step entries (`mhe.models.hold`).
        stages: ``casadi.Function('k', [x, u, w, p], [K])``, the stage derivatives as columns
            of K (n_x, tableau.stages), for numeric start values of a lifted NLP.
        output: ``casadi.Function('h', [x, u, q], [y])``, the output at the sample's input ``u``
            (n_u entries) and the output map's parameter values ``q`` (n_q).
        tableau: the model's discretization (`mhe.models.discretization.ButcherTableau`).
        symbol: ``casadi.SX`` for physics-only models, ``casadi.MX`` with a residual.
        lifted: whether NLPs must lift the stages (models with a residual through L4CasADi).
        n_p: number of physical parameter values in ``p`` (all, identified or fixed).
        n_q: number of output-map parameter values in ``q`` (0 for ``y = C x``).
        n_u: inputs of the field; a step reads ``hold.columns(n_u)`` of them.
        hold: the model's input hold (`mhe.models.hold.InputHold`).
        dt: the sample time.
    """

    def __init__(self, model: StateSpaceModel, build_dir: str | Path, name: str = "residual",
                 residual: str = "l4casadi") -> None:
        if residual not in ("l4casadi", "sx"):
            raise ValueError(f"residual must be 'l4casadi' or 'sx' (how the network reaches CasADi); got {residual!r}.")
        self.lifted = model.residual is not None and residual == "l4casadi"
        self.symbol = cs.MX if self.lifted else cs.SX
        self.dt, self.hold, self.n_u = model.dt, model.hold, model.n_u
        self.tableau: ButcherTableau = model.tableau
        names = model.physics.params.names if model.physics is not None else ()
        self.n_p = len(names)
        self._physics = None
        if model.physics is not None:
            # the physics reads the first physics.n_u inputs (a residual may read more: mhe.data.input_history)
            x, u, p = cs.SX.sym("x", model.n_x), cs.SX.sym("u", model.n_u), cs.SX.sym("p", self.n_p)
            parts = model.physics.vector_field([x[i] for i in range(model.n_x)],
                                               [u[j] for j in range(model.physics.n_u)],
                                               {n: p[i] for i, n in enumerate(names)}, CASADI_OPS)
            self._physics = cs.Function("h", [x, u, p], [cs.vertcat(*parts)])
        self._rows: _Rows | None = None
        self._l4c = None
        self._network = None
        self._version: int | None = None
        net = model.residual
        self._envelope = None if net is None or net.envelope is None else [t.detach().clone() for t in net.envelope]
        self._in_scale = None if net is None else net.in_scale.detach().numpy().copy()
        if net is not None and not self.lifted:
            self._network = _sx_network(net)
        if self.lifted:
            import l4casadi

            folder = Path(build_dir)
            folder.mkdir(parents=True, exist_ok=True)
            self._rows = _Rows(copy.deepcopy(model.residual))
            self._l4c = l4casadi.L4CasADi(self._rows, name=name, build_dir=str(folder), mutable=True,
                                          generate_jac_jac=False)
        sym = self.symbol
        x, u, w = sym.sym("x", model.n_x), sym.sym("u", model.n_u_step), sym.sym("w", model.n_w)
        p = sym.sym("p", self.n_p)
        with float64_default():  # L4CasADi traces the network at its first call (module doc)
            step = self.tableau.step_timed(lambda s, c: self.field(s, self.input_at(u, c), w, p), x, model.dt)
            self.step = cs.Function("f_d", [x, u, w, p], [step])
            ks: list = []
            for j, c in enumerate(self.tableau.nodes):
                ks.append(self.field(self.tableau.stage_state(x, ks, j, model.dt), self.input_at(u, c), w, p))
            self.stages = cs.Function("k", [x, u, w, p], [cs.horzcat(*ks)])
        self.output, self.n_q = _output_function(model)

    def input_at(self, u, c: float):
        """The field's input at the node ``c`` of a step from step input rows ``u`` (n_u_step, B) -> (n_u, B)."""
        if not self.hold.paired:
            return u
        return self.hold.at(u[:self.n_u, :], u[self.n_u:, :], c)

    def field(self, x, u, w, p):
        """The expression ``f_c`` on columns ``(n_x, B)``, ``(n_u, B)``, ``(n_w, B)`` and ``p`` (n_p, 1).

        The network is called once per column, directly in the caller's graph, so an
        NLP built from these expressions has exact second derivatives when lifted.
        """
        b = x.shape[1]
        out = w
        if self._physics is not None:
            out = out + (self._physics(x, u, p) if b == 1 else self._physics.map(b)(x, u, cs.repmat(p, 1, b)))
        net = self._l4c if self._l4c is not None else self._network
        if net is not None:
            out = out + cs.horzcat(*[self._faded(net, x[:, i], u[:, i]) for i in range(b)])
        return out

    def _faded(self, net, x, u):
        """The residual of one column: ``w(z) * net([x; u])``, ``z = [x; u] / in_scale`` (``w = 1`` without an
        envelope)."""
        if net is self._l4c:  # the traced rows fade themselves (module doc)
            return net(cs.horzcat(x.T, u.T)).T
        out = net(cs.vertcat(x, u))
        if self._envelope is None:
            return out
        z = cs.vertcat(x, u) / cs.DM(self._in_scale)
        return casadi_fade(z, *(t.numpy() for t in self._envelope)) * out

    @staticmethod
    def parameter_values(model: StateSpaceModel) -> np.ndarray:
        """The physical values ``p`` of the torch model, shape (n_p,)."""
        if model.physics is None:
            return np.zeros(0)
        return np.array([float(v.detach()) for v in model.physics.params().values()])

    @staticmethod
    def output_values(model: StateSpaceModel) -> np.ndarray:
        """The output map's values ``q`` of the torch model, shape (n_q,) (empty for ``y = C x``)."""
        if model.output_map is None:
            return np.zeros(0)
        return np.array([float(v.detach()) for v in model.output_map.params().values()])

    def load_residual(self, state: dict[str, Tensor], version: int) -> None:
        """Push new neural weights (a ``NeuralResidual.state_dict()``) into the compiled function.

        Args:
            state: the weights.
            version: the `OuterValues` version they belong to; a repeated version is a no-op.
        """
        if self._rows is None:
            raise ValueError("This model has no neural residual compiled through L4CasADi; there are no weights to "
                             "load.")
        if version == self._version:
            return
        keys = [f"envelope_{k}" for k in ("low", "high", "margin")]
        given = [state[k] for k in keys] if all(k in state for k in keys) else None
        same = (given is None and self._envelope is None) or (
            given is not None and self._envelope is not None
            and all(torch.equal(a.to(torch.float64), b) for a, b in zip(given, self._envelope)))
        if not same:
            raise ValueError("the residual's trust envelope differs from the one this solver's NLP was built with "
                             "(recorded after it was built?); build a new WindowSolver for the model.")
        self._rows.residual.load_state_dict(state)
        with float64_default():  # the traces are made again (module doc)
            self._l4c.update()
        self._version = version


def _sx_network(net: NeuralResidual) -> cs.Function:
    """``casadi.Function('N', [z], [out_scale * place^T mlp(z / in_scale)])`` in SX with the current weights
    written out, ``z = [x; u]`` (n_x + n_u, 1) -> (n_x, 1), float64 (the fade is applied by the caller)."""
    z = cs.SX.sym("z", net.n_x + net.n_u)
    out = z / cs.DM(net.in_scale.detach().numpy())
    layers = net.mlp.layers
    for i, (w, b) in enumerate(layers):
        out = cs.mtimes(cs.DM(w.detach().numpy()), out) + cs.DM(b.detach().numpy())
        if i < len(layers) - 1:
            out = cs.tanh(out)
    place = cs.DM(net.place.detach().numpy().T)
    return cs.Function("N", [z], [cs.DM(net.out_scale.detach().numpy()) * cs.mtimes(place, out)])


def _output_function(model: StateSpaceModel) -> tuple[cs.Function, int]:
    """``casadi.Function('h', [x, u, q], [y])`` of the model's output and the size of ``q``."""
    x, u = cs.SX.sym("x", model.n_x), cs.SX.sym("u", model.n_u)
    out = model.output_map
    if out is None:
        return cs.Function("h", [x, u, cs.SX.sym("q", 0)], [cs.mtimes(cs.DM(model.C.numpy()), x)]), 0
    names = out.params.names
    q = cs.SX.sym("q", len(names))
    ys = out.output([x[i] for i in range(model.n_x)], [u[j] for j in range(model.n_u)] if out.feedthrough else [],
                    {n: q[i] for i, n in enumerate(names)}, CASADI_OPS)
    return cs.Function("h", [x, u, q], [cs.vertcat(*ys)]), len(names)

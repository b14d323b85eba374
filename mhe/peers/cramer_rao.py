"""Which physical parameters a recording determines: Fisher information of the one-step outputs (Table 1).

The one-step outputs ``y_{k+1} = C f_d(x_k, u~_k; theta)`` of a physics-only model (``u~_k`` the step
input of the model's hold, `mhe.models.hold`), evaluated on the true states of a recording, depend on the
identified parameters ``theta``; with measurement noise
``eta ~ N(0, R)``, ``R = diag(r^2)``, the Fisher information of the relative parameters
``theta_j (1 + e_j)`` is ``F = sum_k J_k^T R^-1 J_k`` with ``J_k = dy_{k+1}/de = (dy_{k+1}/dtheta) diag(theta)``.
The Cramér–Rao bound of an unbiased estimator's relative error ``e_j`` is ``sqrt((F^-1)_jj)``
(`cramer_rao_std`); a parameter whose bound is small is one "the data determine" (the issue's
subset of Table 1). The true states stand in for the estimated ones (the hidden state is known
exactly in the bound), so the bound is optimistic for methods that estimate the states.

`mhe_cramer_rao_std` takes the states the MHE estimates instead: the Fisher information of the windows'
prediction residuals from their exact Jacobian at the KKT points (`mhe.outer.gauss_newton.residual_jacobian`),
the noise variance per output estimated from the residuals themselves. `determined_parameters` gives the
bounds and the determined subset of a recording at several noise levels.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from ..estimator.estimator import MovingHorizonEstimator
from ..data.recording import Recording
from ..models.checks import require
from ..models.model import StateSpaceModel
from ..models.ops import TORCH_OPS

if TYPE_CHECKING:
    from ..outer.gauss_newton import ResidualJacobian

__all__ = ["one_step_fisher", "cramer_rao_std", "mhe_cramer_rao_std", "determined_parameters"]


def one_step_fisher(model: StateSpaceModel, states: Tensor, inputs: Tensor, measurement_std: Sequence[float],
                    breaks: Sequence[int] = ()) -> Tensor:
    """Fisher information of the one-step outputs in the relative identified parameters, at the model's values.

    Args:
        model: a physics-only model; its identified parameters (``physics.params.free_names``) are
            the ones in ``F``, at their current values.
        states: true states ``x_0..x_{T-1}``, shape (T, n_x).
        inputs: step inputs ``u~_0..u~_{T-1}``, shape (T, n_u_step) (`mhe.models.hold`: ``u_k``, or
            ``[u_k, u_{k+1}]`` for a paired hold, `mhe.data.recording.held_inputs`); ``u~_k`` drives step k -> k+1.
        measurement_std: ``r``, one positive standard deviation per output (units of the outputs).
        breaks: rows ``t`` that do not follow row ``t - 1`` (`mhe.data.recording.Recording.breaks`); the
            transition into such a row is left out.

    Returns:
        ``F``, shape (n_p, n_p), in ``free_names`` order (dimensionless: relative parameters).

    Raises:
        ValueError: for a model with a neural residual or no identified parameter, shapes that do not
            match the model, or a non-positive ``r``.
    """
    if model.physics is None or model.residual is not None or not model.physics.params.free_names:
        raise ValueError("one_step_fisher needs a physics-only model with identified parameters; got physics="
                         f"{model.physics is not None}, residual={model.residual is not None}.")
    r = torch.as_tensor(measurement_std, dtype=torch.float64)
    require([(states.ndim == 2 and states.shape[1] == model.n_x,
              f"states must have shape (T, {model.n_x}); got {tuple(states.shape)}.")])
    require([(inputs.shape == (states.shape[0], model.n_u_step),
              f"step inputs must have shape (T, {model.n_u_step}) with T = {states.shape[0]}; got {tuple(inputs.shape)}."),
             (r.shape == (model.n_y,) and bool((r > 0).all()),
              f"measurement_std must be {model.n_y} positive numbers; got {r.tolist()}.")])
    params = model.physics.params
    free = params.free_names
    keep = torch.ones(states.shape[0] - 1, dtype=torch.bool)
    keep[[b - 1 for b in breaks if 1 <= b < states.shape[0]]] = False
    x, u = states[:-1][keep].to(torch.float64), inputs[:-1][keep].to(torch.float64)
    fixed = {n: v.detach() for n, v in params().items()}
    theta = torch.stack([fixed[n] for n in free])

    def outputs(values: Tensor) -> Tensor:
        p = {**fixed, **dict(zip(free, values.unbind(0)))}

        def field(s: Tensor, v: Tensor) -> Tensor:
            parts = model.physics.vector_field(list(s.unbind(-1)), list(v.unbind(-1)), p, TORCH_OPS)
            return torch.stack(torch.broadcast_tensors(*parts), dim=-1)

        return model.output(model.held_step(field, x, u))

    jac = torch.func.jacfwd(outputs)(theta) * theta / r[:, None]  # (K, n_y, n_p): dy/de_j in units of r
    return torch.einsum("kyp,kyq->pq", jac, jac)


def cramer_rao_std(fisher: Tensor, rtol: float = 1e-12) -> Tensor:
    """``sqrt((F^-1)_jj)`` per parameter; ``inf`` for a parameter in a direction ``F`` does not see.

    Directions with an eigenvalue at most ``rtol`` times the largest count as unseen (``F`` is
    singular there); a parameter with a component of more than 1e-8 along one gets ``inf``.

    Args:
        fisher: symmetric positive semi-definite ``F``, shape (n_p, n_p).
        rtol: relative eigenvalue threshold of the unseen directions.

    Returns:
        The bound per parameter, shape (n_p,) (the units of ``F``'s parameters).
    """
    lam, vec = torch.linalg.eigh(fisher)
    seen = lam > rtol * lam.max().clamp_min(0.0)
    var = (vec[:, seen] ** 2 / lam[seen]).sum(dim=1)
    blind = (vec[:, ~seen] ** 2).sum(dim=1) > 1e-16
    return torch.where(blind, torch.full_like(var, float("inf")), var.sqrt())


def mhe_cramer_rao_std(estimator: MovingHorizonEstimator, jacobian: ResidualJacobian) -> dict[str, float]:
    """Cramér–Rao standard deviations of the relative errors of the identified physical parameters, from the
    windows' prediction residuals at the MHE's estimated states (module docstring).

    With ``J_i = dr_i/de`` the residuals' Jacobian in the relative parameters ``theta_j (1 + e_j)`` (the columns
    of the physics' raw parameters, chained through their bounds, `mhe.models.bounds.Bound.from_raw`) and
    ``R = diag(var_i(r_i))`` the residuals' sample variance per output, ``F = sum_i J_i^T R^-1 J_i`` and the bound
    is ``sqrt((F^-1)_jj)``.

    Args:
        estimator: the MHE whose physics has identified parameters, at the values the bound is taken at.
        jacobian: the residuals (M, n_y) and their Jacobian (M, n_y, n_alpha) at the windows' KKT points
            (`mhe.outer.gauss_newton.residual_jacobian`).

    Returns:
        The bound per identified physical parameter, by name in ``free_names`` order (dimensionless).
    """
    params = estimator.model.physics.params
    free = params.free_names
    draw = torch.func.jacfwd(lambda r: torch.stack([params.bounds[n].from_raw(r[i]) for i, n in enumerate(free)]))(
        params.raw.detach())
    scale = draw.diagonal() / torch.tensor([abs(float(params()[n])) for n in free], dtype=torch.float64)
    named = list(estimator.named_parameters())
    first = sum(p.numel() for _, p in named[:[n for n, _ in named].index("model.physics.params.raw")])
    dr = jacobian.jacobian[..., first:first + len(free)] / scale
    fisher = torch.einsum("myp,myq,y->pq", dr, dr, 1.0 / jacobian.residual.var(0))
    return {n: float(s) for n, s in zip(free, torch.linalg.inv(fisher).diagonal().sqrt())}
def determined_parameters(model: StateSpaceModel, recording: Recording, measurement_std: Sequence[float],
                          scales: Sequence[float], threshold: float) -> dict:
    """The Cramér–Rao bounds of the relative identified parameters on ``recording``'s true states, per noise level,
    and the parameters the data determine.

    Args:
        model: the physics-only model at the values the bound is taken at (e.g. the truth).
        recording: the recording, with true states (T, n_x) and the model's step inputs.
        measurement_std: the noise ``r`` of each output, (n_y,), output units.
        scales: the noise levels, as multiples of ``r`` (the bound grows with ``r``: ``F`` scales with ``1 / r^2``).
        threshold: the largest relative bound of a parameter the data determine.

    Returns:
        ``measurement_std``, ``threshold``, ``fisher_eigenvalues`` (of ``F`` at ``r``, ascending) and ``scales``: per
        scale (keyed ``f"{scale:g}"``) ``rel_std``, the bound of each identified parameter, and ``determined``,
        those at most ``threshold``, in the model's order.
    """
    free = model.physics.params.free_names
    fisher = one_step_fisher(model, recording.states, recording.inputs, measurement_std, recording.breaks)
    std = cramer_rao_std(fisher)
    out = {"measurement_std": list(measurement_std), "threshold": threshold,
           "fisher_eigenvalues": torch.linalg.eigvalsh(fisher).tolist(), "scales": {}}
    for scale in scales:  # F scales with 1/r^2, the bound with r
        bound = {n: float(v) * scale for n, v in zip(free, std)}
        out["scales"][f"{scale:g}"] = {"rel_std": bound, "determined": [n for n in free if bound[n] <= threshold]}
    return out

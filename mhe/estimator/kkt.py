"""KKT system of the MHE windows and the PEM hypergradient, explicit (Eq. 11) and adjoint-VJP (Prop. 1).

With ``F(z, alpha) = grad_z L`` the KKT residual (Eq. 7) of a window in the stage
layout of `mhe.estimator.point`, ``K = dF/dz`` (block tridiagonal, Prop. 2), ``A = dF/dalpha`` and
``b = grad_z J`` (only ``x_N`` entries, ``C^T r``), the hypergradient of
``J = 1/2 sum_i ||C x^_N - y~_N||^2`` is

* explicit (Eq. 11): ``dJ/dalpha = -sum_i A_i^T K_i^{-1} b_i`` with the n_alpha-column
  ``A_i`` formed row by row (one VJP of ``F`` per row) and ``K_i`` dense;
* adjoint-VJP (Eq. 12-13): ``K_i lambda_i = b_i`` solved block-tridiagonally, then
  ``dJ/dalpha = -grad_alpha sum_i F_i^T lambda_i``, one VJP; ``A`` is never formed.

With an output map ``y = h(x, u; p_y)`` (`mhe.models.output`) in place of ``C x``, ``b`` holds
``(dh/dx)^T r`` at ``x^_N`` and ``J`` also depends on ``p_y`` directly, not only through the
MHE's solution: both forms add ``sum_i (dh/dp_y)^T r_i`` (`output_parameter_jacobian`), the
partial derivative at fixed ``z``; the Gauss-Newton rows add ``dh/dp_y`` alike.

``F`` itself is a VJP of the Lagrangian (``torch.func.grad``), so the second step is a
reverse-over-reverse product. Everything is batched over the M windows.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor
from torch.func import functional_call, grad, jacrev, vjp, vmap

from ..data.windows import Windows
from .blocktri import block_tridiagonal_dense, block_tridiagonal_solve
from .estimator import MovingHorizonEstimator

__all__ = ["Hypergradient", "kkt_residual", "kkt_blocks", "output_jacobian", "prediction_rhs", "prediction_loss",
           "output_parameter_jacobian", "refine", "hypergradient_adjoint", "hypergradient_explicit",
           "explicit_memory_bytes", "outer_parameters"]

Params = dict[str, Tensor]


@dataclass(frozen=True)
class Hypergradient:
    """The PEM objective and its gradient.

    Attributes:
        loss: ``J^(i) = 1/2 ||C x^_N - y~_N||^2`` per window, shape (M,).
        grads: ``dJ/dalpha`` summed over the windows, by parameter name of the estimator.
    """

    loss: Tensor
    grads: Params


def outer_parameters(estimator: MovingHorizonEstimator) -> Params:
    """The outer parameters ``alpha`` by name, detached (Eq. 5)."""
    return {n: p.detach() for n, p in estimator.named_parameters()}


def kkt_residual(estimator: MovingHorizonEstimator, z: Tensor, windows: Windows,
                 params: Params | None = None) -> Tensor:
    """``F = grad_z L`` (Eq. 7) at the padded stages ``z``, shape (M, N + 1, s), zero at dummies.

    Args:
        estimator: the MHE.
        z: padded stage vectors, shape (M, N + 1, s).
        windows: the M windows.
        params: outer parameters to use instead of the estimator's own (for transforms).
    """
    params = outer_parameters(estimator) if params is None else params
    return grad(lambda zz: functional_call(estimator, params, (zz, windows)).sum())(z)


def kkt_blocks(estimator: MovingHorizonEstimator, z: Tensor, windows: Windows) -> tuple[Tensor, Tensor]:
    """The blocks of ``K = dF/dz`` in stage order (Prop. 2), dummies replaced by identity rows.

    Each stage term ``l_k(z_k, z_{k+1})`` contributes its Hessian to ``D_k``, ``D_{k+1}``
    and ``E_k``; the Hessians (reverse over reverse, which avoids the per-operation cost
    of forward-mode decompositions) are batched over all windows and stages.

    Returns:
        ``D`` of shape (M, N + 1, s, s) and ``E`` of shape (M, N, s, s).
    """
    m, t, s = z.shape
    n = t - 1
    u, y, first, measured = estimator.stage_data(windows)

    def stage(c: Tensor, uk: Tensor, yk: Tensor, fk: Tensor, mk: Tensor) -> Tensor:
        return estimator.stage_lagrangian(c[None, :s], c[None, s:], uk[None], yk[None], fk[None], mk[None])[0]

    with torch.no_grad():
        c = torch.cat([z[:, :-1], z[:, 1:]], dim=-1).reshape(m * n, 2 * s)
        flat = [v.reshape(m * n, *v.shape[2:]) for v in (u, y, first, measured)]
        h = vmap(jacrev(jacrev(stage)))(c, *flat).reshape(m, n, 2 * s, 2 * s)
        d = z.new_zeros(m, t, s, s)
        d[:, :n] += h[..., :s, :s]
        d[:, 1:] += h[..., s:, s:]
        dummy = ~estimator.layout.mask()
        d[:, dummy] = d[:, dummy] + torch.eye(s, dtype=z.dtype)[None].expand(t, s, s)[dummy]
        return d, h[..., :s, s:].contiguous()


def output_jacobian(estimator: MovingHorizonEstimator, z: Tensor, windows: Windows | None = None) -> Tensor:
    """``dh/dx`` at the last states ``x^_N`` of the windows: ``C`` for ``y = C x``, shape (M, n_y, n_x).

    Args:
        estimator: the MHE.
        z: padded stage vectors, shape (M, N + 1, s).
        windows: the M windows (their ``u_end`` for an output map that reads the input).
    """
    model = estimator.model
    x = z[:, -1, estimator.layout.slices["x"]]
    if model.output_map is None:
        return model.C.expand(x.shape[0], *model.C.shape)
    u = None if windows is None or not model.output_map.feedthrough else windows.u_end
    if u is None:
        return vmap(jacrev(lambda xi: model.output(xi[None])[0]))(x)
    return vmap(jacrev(lambda xi, ui: model.output(xi[None], ui[None])[0]))(x, u)


def prediction_rhs(estimator: MovingHorizonEstimator, z: Tensor, v: Tensor, windows: Windows | None = None) -> Tensor:
    """``(d h(x^_N)/dz)^T v``: ``(dh/dx)^T v`` (``C^T v`` for ``y = C x``) in the ``x_N`` entries, zeros elsewhere.

    With ``v = r`` this is ``b = grad_z J`` of Eq. (11); with ``v = I`` its ``n_y``
    columns are the right-hand sides of the residual Jacobian's adjoints.

    Args:
        estimator: the MHE.
        z: padded stage vectors, shape (M, N + 1, s).
        v: output-space vectors, shape (M, n_y), or (M, n_y, k) for ``k`` of them.
        windows: the M windows (needed only for an output map that reads the input).

    Returns:
        Shape (M, N + 1, s), or (M, N + 1, s, k).
    """
    out = z.new_zeros(*z.shape, *v.shape[2:])
    with torch.no_grad():
        jac = output_jacobian(estimator, z, windows)
    out[:, -1, estimator.layout.slices["x"]] = torch.einsum("myx,my...->mx...", jac, v)
    return out


def prediction_loss(estimator: MovingHorizonEstimator, z: Tensor, windows: Windows) -> tuple[Tensor, Tensor]:
    """``J^(i)`` and ``b^(i) = grad_z J^(i)`` (Eq. 9, 11).

    Returns:
        ``J`` of shape (M,) and ``b`` of shape (M, N + 1, s) (nonzero only at ``x_N``).
    """
    with torch.no_grad():
        r = estimator.prediction_error(z, windows)
        return 0.5 * (r * r).sum(-1), prediction_rhs(estimator, z, r, windows)


def output_parameter_jacobian(estimator: MovingHorizonEstimator, z: Tensor, windows: Windows) -> Params:
    """``dr_i/dp_y`` at fixed ``z``: how the residuals ``r_i = h(x^_N, u~_N; p_y) - y~_N`` move with the output
    map's parameters directly (the term the KKT adjoint does not carry).

    Args:
        estimator: the MHE.
        z: padded stage vectors, shape (M, N + 1, s).
        windows: the M windows.

    Returns:
        By the estimator's parameter name (``model.output_map.params.raw``) the Jacobian, shape
        (M, n_y, *parameter shape); empty for ``y = C x``.
    """
    model = estimator.model
    out = model.output_map
    if out is None:
        return {}
    x = z[:, -1, estimator.layout.slices["x"]].detach()
    u = windows.u_end[..., :model.n_u] if out.feedthrough else None
    params = {n: p.detach() for n, p in out.named_parameters()}
    with torch.no_grad():
        jac = jacrev(lambda p: functional_call(out, p, (x, u)))(params)
    return {f"model.output_map.{n}": j for n, j in jac.items()}


def _with_output_term(estimator: MovingHorizonEstimator, z: Tensor, windows: Windows, grads: Params) -> Params:
    """``grads`` plus ``sum_i (dr_i/dp_y)^T r_i``, the direct part of ``dJ/dp_y`` (module docstring)."""
    direct = output_parameter_jacobian(estimator, z, windows)
    if not direct:
        return grads
    with torch.no_grad():
        r = estimator.prediction_error(z, windows)
    return {n: g + torch.einsum("my...,my->...", direct[n], r) if n in direct else g for n, g in grads.items()}


def refine(estimator: MovingHorizonEstimator, z: Tensor, windows: Windows, steps: int) -> tuple[Tensor, Tensor]:
    """Newton steps ``z <- z - K^{-1} F`` on the torch KKT system, block-tridiagonally.

    Args:
        estimator: the MHE.
        z: padded stage vectors from the NLP solver, shape (M, N + 1, s).
        windows: the M windows.
        steps: number of Newton steps (>= 0).

    Returns:
        The refined ``z`` and the relative KKT residual per window at it,
        ``||F||_inf / (1 + ||mu||_inf)``, shape (M,): the multipliers carry the scale of
        the weights (``mu ~ 2 R^-1 eta``), so this is comparable across weightings.
    """
    sl = estimator.layout.slices
    with torch.no_grad():
        for _ in range(steps):
            f = kkt_residual(estimator, z, windows)
            d, e = kkt_blocks(estimator, z, windows)
            z = z - block_tridiagonal_solve(d, e, f)
        mu = torch.cat([z[..., sl["mu_w"]], z[..., sl["mu_eta"]]], dim=-1).abs().amax(dim=(1, 2))
        res = kkt_residual(estimator, z, windows).abs().amax(dim=(1, 2)) / (1.0 + mu)
    return z, res


def hypergradient_adjoint(estimator: MovingHorizonEstimator, z: Tensor, windows: Windows) -> Hypergradient:
    """Adjoint-VJP hypergradient (Prop. 1, Eq. 12-13) at the KKT points ``z``.

    Args:
        estimator: the MHE (its parameters are ``alpha``).
        z: padded KKT points of the M windows, shape (M, N + 1, s).
        windows: the M windows.

    Returns:
        The `Hypergradient`.
    """
    d, e = kkt_blocks(estimator, z, windows)
    loss, b = prediction_loss(estimator, z, windows)
    lam = block_tridiagonal_solve(d, e, b)
    _, pull = vjp(lambda p: kkt_residual(estimator, z, windows, p), outer_parameters(estimator))
    (g,) = pull(lam)
    return Hypergradient(loss, _with_output_term(estimator, z, windows, {n: -v for n, v in g.items()}))


def explicit_memory_bytes(estimator: MovingHorizonEstimator, chunk_size: int) -> int:
    """Bytes of the matrices the explicit form holds per window: ``A`` plus one chunk of rows."""
    n_alpha = sum(p.numel() for p in estimator.parameters())
    return (estimator.layout.n_z + chunk_size) * n_alpha * 8


def hypergradient_explicit(estimator: MovingHorizonEstimator, z: Tensor, windows: Windows,
                           chunk_size: int = 32) -> Hypergradient:
    """Explicit hypergradient (Eq. 11, Simpson et al. 2024): forms ``K_i`` dense and ``A_i``.

    ``A_i = dF_i/dalpha`` (n_z rows, n_alpha columns) is built window by window into a
    preallocated matrix, ``chunk_size`` rows per vectorized pass of VJPs of ``F``; this
    is the memory-bound reference of the benchmarks (`explicit_memory_bytes`).

    Args:
        estimator: the MHE.
        z: padded KKT points, shape (M, N + 1, s).
        windows: the M windows.
        chunk_size: rows of ``A_i`` per vectorized pass.

    Returns:
        The `Hypergradient`.
    """
    d, e = kkt_blocks(estimator, z, windows)
    loss, b = prediction_loss(estimator, z, windows)
    mask = estimator.layout.mask().flatten()
    dense = block_tridiagonal_dense(d, e)[:, mask][:, :, mask]
    rhs = b.reshape(len(windows), -1)[:, mask]
    params = outer_parameters(estimator)
    sizes = [p.numel() for p in params.values()]
    n_z, n_alpha = int(mask.sum()), sum(sizes)
    total = z.new_zeros(n_alpha)
    a = z.new_empty(n_z, n_alpha)
    for i in range(len(windows)):
        zi, wi = z[i:i + 1], windows[i:i + 1]
        _, pull = vjp(lambda p: kkt_residual(estimator, zi, wi, p).reshape(-1)[mask], params)
        rows = vmap(lambda c: torch.cat([g.reshape(-1) for g in pull(c)[0].values()]))
        for r0 in range(0, n_z, chunk_size):
            eye = torch.eye(n_z, dtype=z.dtype)[r0:r0 + chunk_size]
            a[r0:r0 + chunk_size] = rows(eye)
        total -= a.T @ torch.linalg.solve(dense[i], rhs[i])
    del a
    grads = dict(zip(params, (t.reshape(p.shape) for t, p in zip(total.split(sizes), params.values()))))
    return Hypergradient(loss, _with_output_term(estimator, z, windows, grads))

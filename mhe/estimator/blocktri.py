"""Batched block-tridiagonal linear systems (Proposition 2): O(N s^3) time, O(N s^2) memory.

The symmetric system has diagonal blocks ``D_0..D_N`` and off-diagonal blocks
``K[k, k+1] = E_k``, ``K[k+1, k] = E_k^T``. `block_tridiagonal_solve` eliminates the
stages forward (block LU with partial pivoting inside each block, the structure of a
Riccati recursion) and substitutes back. `block_tridiagonal_dense` assembles the dense
matrix, for the dense reference solve and the explicit hypergradient.
"""
from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["block_tridiagonal_solve", "block_tridiagonal_dense"]


def _check(d: Tensor, e: Tensor) -> None:
    t, s = d.shape[-3], d.shape[-1]
    if d.shape[-2] != s or e.shape[-3:] != (t - 1, s, s) or e.shape[:-3] != d.shape[:-3]:
        raise ValueError(f"D must have shape (..., T, s, s) and E (..., T-1, s, s); got {tuple(d.shape)} and "
                         f"{tuple(e.shape)}.")


def _columns(d: Tensor, rhs: Tensor) -> Tensor:
    if rhs.shape[:d.ndim - 1] != d.shape[:-1] or rhs.ndim not in (d.ndim - 1, d.ndim):
        raise ValueError(f"With D of shape {tuple(d.shape)} the right-hand sides must have shape "
                         f"{tuple(d.shape[:-1])} or {tuple(d.shape[:-1])} + (k,); got {tuple(rhs.shape)}.")
    return rhs[..., None] if rhs.ndim == d.ndim - 1 else rhs


def block_tridiagonal_solve(d: Tensor, e: Tensor, rhs: Tensor) -> Tensor:
    """Solve ``K z = rhs`` for block-tridiagonal symmetric ``K``, batched over leading dims.

    One factorization serves all ``k`` columns of a multi-column right-hand side (the
    ``n_y`` adjoints of the residual Jacobian, `mhe.outer.gauss_newton.residual_jacobian`).

    Args:
        d: diagonal blocks, shape (..., T, s, s).
        e: upper off-diagonal blocks ``K[k, k+1]``, shape (..., T-1, s, s).
        rhs: right-hand sides, shape (..., T, s), or (..., T, s, k) for ``k`` of them.

    Returns:
        ``z``, the shape of ``rhs``.

    Raises:
        ValueError: for inconsistent shapes.
    """
    _check(d, e)
    cols = _columns(d, rhs)
    t, s = d.shape[-3], d.shape[-1]
    factors, reduced = [], []
    dk, rk = d[..., 0, :, :], cols[..., 0, :, :]
    for k in range(t):
        lu, piv = torch.linalg.lu_factor(dk)
        factors.append((lu, piv))
        reduced.append(rk)
        if k == t - 1:
            break
        ek = e[..., k, :, :]
        sol = torch.linalg.lu_solve(lu, piv, torch.cat([ek, rk], dim=-1))
        et = ek.transpose(-1, -2)
        dk = d[..., k + 1, :, :] - et @ sol[..., :s]
        rk = cols[..., k + 1, :, :] - et @ sol[..., s:]
    out = [None] * t
    nxt = None
    for k in range(t - 1, -1, -1):
        r = reduced[k] if nxt is None else reduced[k] - e[..., k, :, :] @ nxt
        lu, piv = factors[k]
        nxt = torch.linalg.lu_solve(lu, piv, r)
        out[k] = nxt
    z = torch.stack(out, dim=-3)
    return z if z.ndim == rhs.ndim else z[..., 0]


def block_tridiagonal_dense(d: Tensor, e: Tensor) -> Tensor:
    """The dense matrix of the blocks, shape (..., T s, T s)."""
    _check(d, e)
    t, s = d.shape[-3], d.shape[-1]
    k = d.new_zeros(*d.shape[:-3], t * s, t * s)
    for i in range(t):
        k[..., i * s:(i + 1) * s, i * s:(i + 1) * s] = d[..., i, :, :]
        if i < t - 1:
            k[..., i * s:(i + 1) * s, (i + 1) * s:(i + 2) * s] = e[..., i, :, :]
            k[..., (i + 1) * s:(i + 2) * s, i * s:(i + 1) * s] = e[..., i, :, :].transpose(-1, -2)
    return k

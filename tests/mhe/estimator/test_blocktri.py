"""Block-tridiagonal solve (Prop. 2) against a dense solve."""
import pytest
import torch

from mhe.estimator.blocktri import block_tridiagonal_dense, block_tridiagonal_solve


def test_block_solve_matches_dense_solve_batched():
    gen = torch.Generator().manual_seed(0)
    m, t, s = 3, 9, 5
    d = torch.randn(m, t, s, s, generator=gen)
    d = d + d.transpose(-1, -2) + 4 * s * torch.eye(s)
    e = torch.randn(m, t - 1, s, s, generator=gen)
    rhs = torch.randn(m, t, s, generator=gen)
    z = block_tridiagonal_solve(d, e, rhs)
    dense = block_tridiagonal_dense(d, e)
    assert torch.allclose(dense, dense.transpose(-1, -2))
    ref = torch.linalg.solve(dense, rhs.reshape(m, -1)).reshape(m, t, s)
    assert torch.allclose(z, ref, rtol=1e-12, atol=1e-12)


def test_indefinite_saddle_blocks_are_solved():
    """KKT-like blocks [[H, -A^T], [-A, 0]] are indefinite; pivoting inside each block handles them."""
    gen = torch.Generator().manual_seed(1)
    t, n = 6, 2
    h = torch.randn(t, n, n, generator=gen)
    h = h @ h.transpose(-1, -2) + torch.eye(n)
    a = torch.randn(t, n, n, generator=gen) + 2 * torch.eye(n)
    d = torch.cat([torch.cat([h, -a.transpose(-1, -2)], -1), torch.cat([-a, torch.zeros(t, n, n)], -1)], -2)
    e = torch.zeros(t - 1, 2 * n, 2 * n)
    e[:, n:, :n] = torch.eye(n)
    rhs = torch.randn(t, 2 * n, generator=gen)
    z = block_tridiagonal_solve(d, e, rhs)
    assert torch.allclose(block_tridiagonal_dense(d, e) @ z.reshape(-1), rhs.reshape(-1), atol=1e-11)


def test_several_right_hand_sides_share_one_factorization():
    gen = torch.Generator().manual_seed(2)
    m, t, s, k = 2, 7, 4, 3
    d = torch.randn(m, t, s, s, generator=gen)
    d = d + d.transpose(-1, -2) + 4 * s * torch.eye(s)
    e = torch.randn(m, t - 1, s, s, generator=gen)
    rhs = torch.randn(m, t, s, k, generator=gen)
    z = block_tridiagonal_solve(d, e, rhs)
    assert z.shape == rhs.shape
    for j in range(k):
        assert torch.allclose(z[..., j], block_tridiagonal_solve(d, e, rhs[..., j]), rtol=1e-13, atol=1e-13)
    with pytest.raises(ValueError, match="right-hand sides"):
        block_tridiagonal_solve(d, e, rhs[:, :-1])

"""Primal-dual points of the MHE problems and their stage layout (Proposition 2).

A `KKTPoint` holds, for M windows of horizon N, the decision variables
``v = (x^_0..x^_N, w^_0..w^_{N-1}, eta^_1..eta^_{N-1})`` and the multipliers
``mu = (mu^w_0..mu^w_{N-1}, mu^eta_1..mu^eta_{N-1})`` of Eq. (6). The stage layout
``z_k = col(x_k, w_k, eta_k, mu^w_k, mu^eta_k)``, ``k = 0..N``, of size
``s = 2 n_x + n_w + n_eta + n_y`` is the reordering ``P`` of Proposition 2 padded to a
uniform size: entries that do not exist (``eta_0``, ``mu^eta_0`` and everything at
``k = N`` but ``x_N``) are dummies, flagged by `StageLayout.mask`.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["StageLayout", "KKTPoint"]


@dataclass(frozen=True)
class StageLayout:
    """Sizes and slices of one stage vector ``z_k``.

    Attributes:
        n_x, n_w, n_eta, n_y: dimensions of the model.
        horizon: the MHE horizon N.
    """

    n_x: int
    n_w: int
    n_eta: int
    n_y: int
    horizon: int

    @property
    def size(self) -> int:
        """``s = 2 n_x + n_w + n_eta + n_y``."""
        return 2 * self.n_x + self.n_w + self.n_eta + self.n_y

    @property
    def slices(self) -> dict[str, slice]:
        """Slices of x, w, eta, mu_w, mu_eta inside ``z_k``."""
        sizes = {"x": self.n_x, "w": self.n_w, "eta": self.n_eta, "mu_w": self.n_x, "mu_eta": self.n_y}
        out, start = {}, 0
        for name, n in sizes.items():
            out[name] = slice(start, start + n)
            start += n
        return out

    def mask(self) -> Tensor:
        """Which entries of the padded stages exist, bool of shape (N + 1, s)."""
        n, sl = self.horizon, self.slices
        m = torch.ones(n + 1, self.size, dtype=torch.bool)
        m[0, sl["eta"]] = False
        m[0, sl["mu_eta"]] = False
        m[n, self.n_x:] = False
        return m

    @property
    def n_z(self) -> int:
        """Number of primal-dual unknowns of one window (the size of K)."""
        n = self.horizon
        return (n + 1) * self.n_x + n * (self.n_w + self.n_x) + (n - 1) * (self.n_eta + self.n_y)


@dataclass(frozen=True)
class KKTPoint:
    """A primal-dual point of M MHE problems.

    Attributes:
        x: states, shape (M, N + 1, n_x).
        w: process noise, shape (M, N, n_w).
        eta: measurement noise at k = 1..N-1, shape (M, N - 1, n_eta).
        mu_w: multipliers of the dynamics (Eq. 4b), shape (M, N, n_x).
        mu_eta: multipliers of the measurement equations (Eq. 4c), shape (M, N - 1, n_y).
    """

    x: Tensor
    w: Tensor
    eta: Tensor
    mu_w: Tensor
    mu_eta: Tensor

    @property
    def layout(self) -> StageLayout:
        """The `StageLayout` of this point."""
        return StageLayout(self.x.shape[-1], self.w.shape[-1], self.eta.shape[-1], self.mu_eta.shape[-1],
                           self.w.shape[1])

    def stages(self) -> Tensor:
        """The padded stage vectors ``z_0..z_N``, shape (M, N + 1, s), dummies zero."""
        lay = self.layout
        m, n = self.x.shape[0], lay.horizon
        z = self.x.new_zeros(m, n + 1, lay.size)
        sl = lay.slices
        z[:, :, sl["x"]] = self.x
        z[:, :n, sl["w"]] = self.w
        z[:, 1:n, sl["eta"]] = self.eta
        z[:, :n, sl["mu_w"]] = self.mu_w
        z[:, 1:n, sl["mu_eta"]] = self.mu_eta
        return z

    @staticmethod
    def from_stages(z: Tensor, layout: StageLayout) -> "KKTPoint":
        """Inverse of `stages` for stage vectors of shape (M, N + 1, s)."""
        n, sl = layout.horizon, layout.slices
        return KKTPoint(z[:, :, sl["x"]], z[:, :n, sl["w"]], z[:, 1:n, sl["eta"]], z[:, :n, sl["mu_w"]],
                        z[:, 1:n, sl["mu_eta"]])

    def __getitem__(self, index: Tensor | slice | list[int]) -> "KKTPoint":
        """The windows at ``index``."""
        return KKTPoint(self.x[index], self.w[index], self.eta[index], self.mu_w[index], self.mu_eta[index])

    @staticmethod
    def cat(points: list["KKTPoint"]) -> "KKTPoint":
        """Concatenate points along the window axis."""
        return KKTPoint(*(torch.cat([getattr(p, f) for p in points]) for f in ("x", "w", "eta", "mu_w", "mu_eta")))

    def primal(self) -> Tensor:
        """``v`` per window in the NLP's order ``(x, w, eta)`` flattened, shape (M, n_v)."""
        m = self.x.shape[0]
        return torch.cat([self.x.reshape(m, -1), self.w.reshape(m, -1), self.eta.reshape(m, -1)], dim=1)

    def dual(self) -> Tensor:
        """``mu`` per window in the NLP's order ``(mu_w, mu_eta)`` flattened, shape (M, n_mu)."""
        m = self.x.shape[0]
        return torch.cat([self.mu_w.reshape(m, -1), self.mu_eta.reshape(m, -1)], dim=1)

    @staticmethod
    def from_flat(v: Tensor, mu: Tensor, layout: StageLayout) -> "KKTPoint":
        """Inverse of `primal` and `dual`, from shapes (M, n_v) and (M, n_mu)."""
        m, n = v.shape[0], layout.horizon
        sizes_v = [(n + 1, layout.n_x), (n, layout.n_w), (n - 1, layout.n_eta)]
        sizes_mu = [(n, layout.n_x), (n - 1, layout.n_y)]
        parts = []
        for flat, sizes in ((v, sizes_v), (mu, sizes_mu)):
            chunks = torch.split(flat, [a * b for a, b in sizes], dim=1)
            parts += [c.reshape(m, a, b) for c, (a, b) in zip(chunks, sizes)]
        return KKTPoint(*parts)

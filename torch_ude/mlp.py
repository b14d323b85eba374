"""A tanh multilayer perceptron that carries its own derivative formulas.

Forward pass, forward-mode tangent (JVP), input cotangent (VJP) and the parameter
gradient of a primal cotangent plus a tangent cotangent (reverse-over-JVP,
Appendix A.1 of the jet-matching paper) are written out by hand, batched, with
plain tensor algebra, so no autograd graph is ever built. All methods work in
float64 (verification), float32 (device) and complex128 (complex-step checks).

Notation, layers ``l = 1..L``: ``h_0 = z``, ``a_l = h_{l-1} W_l^T + b_l``,
``h_l = tanh(a_l)`` for ``l < L`` and output ``o = a_L``. With the opt-in linear term
(``linear=True``) the output is ``o = a_L + z L^T``, ``L`` a trainable (d_L, d_0) matrix
initialised to zero: a path around the tanh layers for a response linear in the input
(a gain error of the known model, which saturated tanh units cannot follow over a wide
input range). Its derivatives: ``odot`` gains ``zdot L^T``, the input cotangent
``obar L``, and the gradient of ``L`` is ``obar^T z + tbar^T zdot``.

With ``reads=k`` (k < d_0, only beside the linear term) the tanh layers read the first k
input columns only, ``h_0 = z[:, :k]``, and the remaining columns reach the output through
``L`` alone: an output affine in those columns (a plant whose recorded input enters
linearly, ``N(x, u) = MLP(x) + L [x, u]``). The tangent and cotangent formulas above then
apply to ``z[:, :k]``, and the input cotangent of the other columns is ``obar L`` alone.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

__all__ = ["TanhMLP", "Activations", "Tangents"]


@dataclass
class Activations:
    """Forward values kept for the reverse sweeps.

    Attributes:
        inputs: ``h_0 = z``, shape (B, d_0).
        hidden: ``h_1 .. h_{L-1}``, shapes (B, d_l).
        output: ``o``, shape (B, d_L).
    """

    inputs: Tensor
    hidden: list[Tensor]
    output: Tensor


@dataclass
class Tangents:
    """Forward-mode tangents of a JVP along ``zdot``.

    Attributes:
        inputs: ``zdot``, shape (B, d_0).
        pre: pre-activation tangents ``adot_1 .. adot_{L-1}``, shapes (B, d_l).
        hidden: hidden tangents ``hdot_l = (1 - h_l^2) adot_l``, shapes (B, d_l).
        output: ``odot``, shape (B, d_L).
    """

    inputs: Tensor
    pre: list[Tensor]
    hidden: list[Tensor]
    output: Tensor


class TanhMLP(nn.Module):
    """A tanh MLP ``z -> o`` with hand-written JVP, VJP and reverse-over-JVP.

    Initialization: Glorot-uniform weights with the tanh gain 5/3 on hidden layers,
    the output layer scaled by ``last_layer_gain`` (small, so the hybrid model
    starts close to the known physics), zero biases; the linear term (if any) zero, so
    it changes neither the initial outputs nor the random draws of the weights.

    Args:
        sizes: layer widths ``(d_0, d_1, ..., d_L)``, e.g. ``(2, 16, 16, 2)`` (354
            parameters) or ``(4, 16, 16, 4)`` (420).
        dtype: parameter dtype, float64 for verification, float32 for a device.
        generator: random generator for reproducible initial weights.
        last_layer_gain: scale of the output layer's initial weights.
        linear: add the trainable linear term ``z L^T`` to the output (module doc),
            parameter ``linear_weight`` of shape (d_L, d_0). Off, the parameters and the
            state dict are those of the plain MLP.
        reads: how many leading input columns the tanh layers read (module doc), between 1
            and d_0; None (the default) or d_0 for all. Fewer than d_0 needs ``linear``
            (otherwise the other columns would not reach the output); ``weight0`` is then
            (d_1, reads).

    Raises:
        ValueError: for widths below 1, or ``reads`` out of range or below d_0 without ``linear``.
    """

    def __init__(self, sizes: Sequence[int], dtype: torch.dtype = torch.float64,
                 generator: torch.Generator | None = None, last_layer_gain: float = 0.1,
                 linear: bool = False, reads: int | None = None) -> None:
        super().__init__()
        sizes = tuple(int(s) for s in sizes)
        if len(sizes) < 2 or min(sizes) < 1:
            raise ValueError(f"sizes must list at least an input and an output width, all >= 1; got {sizes}.")
        if not isinstance(linear, bool):
            raise TypeError(f"linear must be True or False; got {linear!r}.")
        reads = sizes[0] if reads is None else int(reads)
        if not 1 <= reads <= sizes[0]:
            raise ValueError(f"reads must lie between 1 and the input width {sizes[0]}; got {reads}.")
        if reads < sizes[0] and not linear:
            raise ValueError(f"reads={reads} < {sizes[0]} inputs needs linear=True: the columns the tanh layers "
                             f"do not read reach the output only through the linear term.")
        self.sizes = sizes
        self.reads = reads
        n_layers = len(sizes) - 1
        self._names = [(f"weight{l}", f"bias{l}") for l in range(n_layers)]
        for l, (d_in, d_out) in enumerate(zip((reads, *sizes[1:-1]), sizes[1:])):
            gain = last_layer_gain if l == n_layers - 1 else 5.0 / 3.0
            bound = gain * math.sqrt(6.0 / (d_in + d_out))
            w = torch.empty(d_out, d_in, dtype=dtype)
            w.uniform_(-bound, bound, generator=generator)
            self.register_parameter(f"weight{l}", nn.Parameter(w))
            self.register_parameter(f"bias{l}", nn.Parameter(torch.zeros(d_out, dtype=dtype)))
        self.linear = linear
        if linear:  # only when on: a plain MLP's state dict is unchanged
            self.register_parameter("linear_weight", nn.Parameter(torch.zeros(sizes[-1], sizes[0], dtype=dtype)))

    @property
    def layers(self) -> list[tuple[Tensor, Tensor]]:
        """``[(W_1, b_1), ..., (W_L, b_L)]``, looked up by name (so ``torch.func.functional_call`` works)."""
        params = self._parameters
        return [(params[w], params[b]) for w, b in self._names]

    @property
    def n_layers(self) -> int:
        """Number of affine layers ``L``."""
        return len(self._names)

    def _linear(self) -> Tensor:
        """``L``, shape (d_L, d_0), of the linear term, looked up by name (as `layers`)."""
        return self._parameters["linear_weight"]

    def ordered_parameters(self) -> list[Tensor]:
        """Parameters in the order of `backward`'s gradients: W_1, b_1, ..., W_L, b_L (then L
        with the linear term)."""
        params = [t for layer in self.layers for t in layer]
        return params + [self._linear()] if self.linear else params

    def _read(self, z: Tensor) -> Tensor:
        """The columns the tanh layers read, (B, d_0) -> (B, reads) (``z`` itself when all)."""
        return z if self.reads == self.sizes[0] else z[:, : self.reads]

    def activations(self, z: Tensor) -> Activations:
        """Forward pass keeping activations, (B, d_0) -> `Activations`."""
        params, (*inner, (w_out, b_out)) = self._parameters, self._names  # by name, as `layers`
        hidden = []
        h = self._read(z)
        for w, b in inner:
            h = torch.tanh(torch.addmm(params[b], h, params[w].T))
            hidden.append(h)
        out = torch.addmm(params[b_out], h, params[w_out].T)
        if self.linear:
            out = torch.addmm(out, z, self._linear().T)
        return Activations(inputs=z, hidden=hidden, output=out)

    def forward(self, z: Tensor) -> Tensor:
        """Network output, (B, d_0) -> (B, d_L)."""
        return self.activations(z).output

    def jvp(self, acts: Activations, zdot: Tensor) -> Tangents:
        """Forward-mode tangent ``odot = (do/dz) zdot`` at the point of ``acts``.

        Args:
            acts: activations from `activations`.
            zdot: input tangents, shape (B, d_0).

        Returns:
            `Tangents`; ``.output`` has shape (B, d_L).
        """
        pre, hid = [], []
        hdot = self._read(zdot)
        layers = self.layers
        for (w, _), h in zip(layers, acts.hidden):
            adot = hdot @ w.T
            hdot = (1.0 - h * h) * adot
            pre.append(adot)
            hid.append(hdot)
        out = hdot @ layers[-1][0].T
        if self.linear:
            out = torch.addmm(out, zdot, self._linear().T)
        return Tangents(inputs=zdot, pre=pre, hidden=hid, output=out)

    def vjp_input(self, acts: Activations, obar: Tensor) -> Tensor:
        """Input cotangent ``(do/dz)^T obar``, shape (B, d_L) -> (B, d_0)."""
        g = obar
        layers = self.layers
        for l in range(len(layers) - 1, 0, -1):
            h = acts.hidden[l - 1]
            g = (g @ layers[l][0]) * (1.0 - h * h)
        g = g @ layers[0][0]
        if not self.linear:
            return g
        if self.reads == self.sizes[0]:
            return torch.addmm(g, obar, self._linear())
        full = obar @ self._linear()
        full[:, : self.reads] += g
        return full

    def backward(self, acts: Activations, obar: Tensor, tangents: Tangents | None = None,
                 tbar: Tensor | None = None, out: Sequence[Tensor] | None = None) -> list[Tensor]:
        """Parameter gradient of ``sum(obar * o) + sum(tbar * odot)``, summed over the batch.

        The first term is the VJP of the output; the second is reverse mode over the
        JVP (``odot`` depends on the weights both directly and through the hidden
        activations' derivatives ``1 - h^2``), Eq. (16) and Appendix A.1.

        Args:
            acts: activations from `activations`.
            obar: output cotangent, shape (B, d_L).
            tangents: the `Tangents` of a JVP, required when ``tbar`` is given.
            tbar: cotangent of the output tangent ``odot``, shape (B, d_L), or None.
            out: tensors to write the gradients into (each of its parameter's shape and dtype,
                in `ordered_parameters`' order, e.g. the parameters' ``.grad``), or None for new
                tensors. Written with the same operations (``out=``): the values are those of
                new tensors, except that a matrix product's last bits may depend on the
                alignment of its destination in memory (the BLAS's kernels).

        Returns:
            Gradients ``[dW_1, db_1, ..., dW_L, db_L]`` (then ``dL`` with the linear term)
            matching `ordered_parameters` (``out`` itself when given).
        """
        with_tangent = tbar is not None
        if with_tangent and tangents is None:
            raise ValueError("tangents are required when tbar is given.")
        n_layers = len(self._names)
        grads: list[Tensor | None] = [None] * (2 * n_layers + self.linear) if out is None else list(out)
        if self.linear:
            grads[-1] = torch.mm(obar.T, acts.inputs, out=grads[-1])
            if with_tangent:
                grads[-1] += tbar.T @ tangents.inputs
        params = self._parameters
        abar, tabar = obar, tbar  # cotangents of a_l and adot_l
        for l in range(n_layers - 1, -1, -1):
            h_prev = acts.hidden[l - 1] if l > 0 else self._read(acts.inputs)
            dw = grads[2 * l] = torch.mm(abar.T, h_prev, out=grads[2 * l])
            if with_tangent:
                hdot_prev = tangents.hidden[l - 1] if l > 0 else self._read(tangents.inputs)
                dw += tabar.T @ hdot_prev
            grads[2 * l + 1] = torch.sum(abar, 0, out=grads[2 * l + 1])
            if l == 0:
                break
            w = params[self._names[l][0]]
            hbar = abar @ w
            deriv = 1.0 - h_prev * h_prev
            if with_tangent:
                thbar = tabar @ w
                tabar = thbar * deriv
                hbar = hbar - 2.0 * h_prev * thbar * tangents.pre[l - 1]
            abar = hbar * deriv
        return grads

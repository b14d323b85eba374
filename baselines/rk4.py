"""Taped fixed-step RK4 over a batch of shooting windows (Section 4.1 of the jet-matching paper).

The forward pass integrates ``x' = F(x)`` with ``K`` classical RK4 steps of size
``h`` from ``B`` initial states at once and writes, into buffers allocated once,
everything the discrete adjoint (`baselines.adjoint`) reads back: the four stage
states of every step, the hidden activations of the network at each stage, and
the step states ``x_1 .. x_K``. Nothing else survives the forward pass, so the
tape's size is the sum of these buffers' bytes.

RK4 step ``k`` from ``x_k`` (Butcher tableau of the classical method)::

    z1 = x_k,              k1 = F(z1)
    z2 = x_k + h/2 k1,     k2 = F(z2)
    z3 = x_k + h/2 k2,     k3 = F(z3)
    z4 = x_k + h   k3,     k4 = F(z4)
    x_{k+1} = x_k + h/6 (k1 + 2 k2 + 2 k3 + k4)

Recorded inputs (a field on a `torch_ude.systems.ControlledField`): the input is known
at the step times ``t_k`` (the observations) and interpolated linearly over a step
(first-order hold), so stage ``i`` sees ``u_k + c_i (u_{k+1} - u_k)`` with the stage
offsets ``c = (0, 1/2, 1/2, 1)``. Held constant it would lag a ramping torque by half a
step; linear, the RK4 step stays second-order accurate in the input for a smooth
``u(t)``. The stage inputs are taped too (the adjoint evaluates ``J_x^T`` there); they
are data, so no cotangent flows to them.

The network reads its inputs through the field's input map (periodic states as ``(sin,
cos)``, `torch_ude.input_map`), recomputed from the taped stage states. A field with a trust
envelope (`torch_ude.envelope`) also tapes the network's outputs, which the adjoint of the
fade reads; a field without one tapes exactly what it did before envelopes existed.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from torch_ude.field import HybridField
from torch_ude.mlp import Activations

__all__ = ["RK4Tape", "rk4_forward", "STAGE_OFFSETS"]

#: ``c_i``: stage ``i`` is evaluated at ``x_k + c_i h k_{i-1}`` (``c_1 = 0``).
STAGE_OFFSETS = (0.0, 0.5, 0.5, 1.0)


@dataclass
class RK4Tape:
    """The preallocated record of a taped RK4 forward pass.

    Attributes:
        stages: stage states ``z_{k,i}``, shape (K, 4, B, n).
        hidden: hidden activations ``h_l`` of the network at each stage, one tensor of
            shape (K, 4, B, d_l) per hidden layer.
        states: step states ``x_1 .. x_K``, shape (K, B, n).
        inputs: stage inputs ``u_{k,i}``, shape (K, 4, B, n_u), for a field with inputs; else None.
        outputs: the network's outputs at each stage, shape (K, 4, B, n), for a field with a
            trust envelope; else None.
    """

    stages: Tensor
    hidden: list[Tensor]
    states: Tensor
    inputs: Tensor | None = None
    outputs: Tensor | None = None

    @classmethod
    def allocate(cls, field: HybridField, steps: int, batch: int) -> RK4Tape:
        """Allocate the buffers for ``steps`` RK4 steps of ``batch`` windows.

        Args:
            field: the field to be integrated; fixes ``n``, the hidden widths and the dtype.
            steps: ``K``, RK4 steps per window (>= 1).
            batch: ``B``, windows integrated side by side (>= 1).

        Raises:
            ValueError: for ``steps`` or ``batch`` below 1.
        """
        for name, value in (("steps", steps), ("batch", batch)):
            if int(value) != value or value < 1:
                raise ValueError(f"{name} must be a positive integer; got {value!r}.")
        dtype = field.in_scale.dtype
        n = field.n_states
        widths = field.mlp.sizes[1:-1]
        return cls(
            stages=torch.empty(steps, 4, batch, n, dtype=dtype),
            hidden=[torch.empty(steps, 4, batch, d, dtype=dtype) for d in widths],
            states=torch.empty(steps, batch, n, dtype=dtype),
            inputs=torch.empty(steps, 4, batch, field.n_inputs, dtype=dtype) if field.n_inputs else None,
            outputs=torch.empty(steps, 4, batch, n, dtype=dtype) if field.envelope is not None else None,
        )

    @property
    def steps(self) -> int:
        """``K``, the number of RK4 steps recorded."""
        return int(self.stages.shape[0])

    @property
    def batch(self) -> int:
        """``B``, the number of windows."""
        return int(self.stages.shape[2])

    @property
    def nbytes(self) -> int:
        """Bytes held by the tape's buffers (what the reverse sweep keeps)."""
        taped = (self.stages, self.states, *self.hidden) + tuple(t for t in (self.inputs, self.outputs) if t is not None)
        return sum(t.numel() * t.element_size() for t in taped)

    def activations(self, field: HybridField, step: int, stage: slice | int) -> Activations:
        """The network activations recorded at ``(step, stage)``, flattened over stages.

        The output layer's value is kept only for a field with an envelope (the fade's adjoint
        reads it); otherwise ``output`` is empty.

        Args:
            field: the field that was integrated (for the input scale).
            step: the RK4 step ``k``.
            stage: a stage index or a slice of stages.

        Returns:
            `Activations` with inputs ``phi(z, u)`` (`HybridField.net_input`) and the hidden
            layers, batch ``S * B`` for ``S`` selected stages.
        """
        n = field.n_states
        z = self.stages[step, stage].reshape(-1, n)
        hidden = [h[step, stage].reshape(-1, h.shape[-1]) for h in self.hidden]
        u = None if self.inputs is None else self.inputs[step, stage].reshape(-1, self.inputs.shape[-1])
        output = z.new_empty(0) if self.outputs is None else self.outputs[step, stage].reshape(-1, n)
        return Activations(inputs=field.net_input(z, u), hidden=hidden, output=output)


@torch.no_grad()
def rk4_forward(field: HybridField, x0: Tensor, h: float, tape: RK4Tape, inputs: Tensor | None = None) -> Tensor:
    """Integrate ``K = tape.steps`` RK4 steps from ``x0``, recording the tape.

    Works in the field's dtype: float64, float32 or complex128 (complex-step checks).

    Args:
        field: the hybrid field ``F = f_known + N_theta`` (Eq. 2).
        x0: initial states of the windows, shape (B, n), the field's dtype.
        h: step in s.
        tape: buffers from `RK4Tape.allocate` for this field, ``K`` and ``B``.
        inputs: for a field with inputs, the recorded inputs at the step times
            ``t_0 .. t_K``, shape (K + 1, B, n_u), interpolated linearly over each step
            (module doc); None without inputs.

    Returns:
        ``tape.states``, the step states ``x_1 .. x_K``, shape (K, B, n).

    Raises:
        ValueError: if ``x0`` does not match the tape's batch, state size or dtype.
    """
    if x0.shape != tape.stages.shape[2:] or x0.dtype != tape.stages.dtype:
        raise ValueError(
            f"x0 must have shape {tuple(tape.stages.shape[2:])} and dtype {tape.stages.dtype} "
            f"to match the tape; got shape {tuple(x0.shape)} and dtype {x0.dtype}."
        )
    if tape.inputs is not None:
        want = (tape.steps + 1, *tape.inputs.shape[2:])
        if inputs is None or inputs.shape != want:
            raise ValueError(f"the field reads recorded inputs: pass inputs of shape {want} (the inputs at the "
                             f"K + 1 step times of each window); got "
                             f"{None if inputs is None else tuple(inputs.shape)}.")
        for i, c in enumerate(STAGE_OFFSETS):
            tape.inputs[:, i].copy_(inputs[:-1] + c * (inputs[1:] - inputs[:-1]))
    elif inputs is not None:
        raise ValueError("inputs were given but the field has no inputs (its known model is a VectorField).")
    weights = (h / 6.0, h / 3.0, h / 3.0, h / 6.0)
    x = x0
    for k in range(tape.steps):
        increment = torch.zeros_like(x)
        slope = None
        for i, c in enumerate(STAGE_OFFSETS):
            z = tape.stages[k, i]
            if slope is None:
                z.copy_(x)
            else:
                torch.add(x, slope, alpha=c * h, out=z)
            u = None if tape.inputs is None else tape.inputs[k, i]
            acts = field.mlp.activations(field.net_input(z, u))
            for buf, act in zip(tape.hidden, acts.hidden):
                buf[k, i].copy_(act)
            if tape.outputs is not None:
                tape.outputs[k, i].copy_(acts.output)
            slope = (field.known(z) if u is None else field.known(z, u)) + field.residual_of(acts)
            increment.add_(slope, alpha=weights[i])
        x = tape.states[k]
        torch.add(tape.stages[k, 0], increment, out=x)
    return tape.states

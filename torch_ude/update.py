"""One update of Algorithm 1 (lines 14-16) and the training rate's update count.

Every trainer built on the streaming estimator (the Lightning module, the float32
reference that checks the C port) makes its updates through `jet_update` and counts
them with `due_updates`, so they cannot drift apart.

The update's housekeeping is per-call overhead on a 354-weight network, so
`clip_grad_norm` and `ExponentialAverage` do torch's own arithmetic
(``torch.nn.utils.clip_grad_norm_``, ``AveragedModel`` with
``get_ema_multi_avg_fn``) as the same ``torch._foreach_*`` kernels without the
general-purpose wrappers around them, and `flatten_parameters` keeps a network's
weights and gradients in one flat vector each, so that the optimizer steps one tensor
and the average is one ``lerp_``: the results are bit for bit those of torch's
functions on the separate tensors (tests/torch_ude/test_update.py). For the same reason
`optimizer_step` calls the optimizer's own ``step`` without torch's per-call profiler and
hook wrapper when no hook is registered.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.optim.optimizer as _optim
from torch import Tensor
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

from .calibration import Calibration, noise_adaptive_weight_decay
from .field import HybridField
from .jet import JetLoss, JetResult
from .prng import Pcg32
from .reservoir import SampleBuffer

__all__ = ["UpdateResult", "jet_update", "due_updates", "apply_calibration", "clip_grad_norm", "ExponentialAverage",
           "flatten_parameters", "link_gradients", "flat_view", "optimizer_step"]


@torch.no_grad()
def flatten_parameters(parameters: Sequence[Tensor], grad: bool = True) -> Tensor:
    """Move ``parameters`` into one flat weight vector, and their gradients into its ``.grad``.

    Each parameter keeps its values and becomes a view of the returned vector (``p.data``),
    and its ``.grad`` a view of the vector's gradient (its old gradient, or zeros): whatever
    writes a parameter's weights or gradient (an optimizer over the parameters, a state
    dict load, `HybridField.write_grad`) writes the flat vectors, and an optimizer over the
    one returned vector steps all of them in one call. Elementwise updates (Adam, AdamW,
    the EMA's ``lerp_``) give the same bits on the flat vector as on the separate tensors.

    Args:
        parameters: distinct leaf tensors of one dtype and device, in the order they are to be laid out.
        grad: also lay out the gradients; False leaves every ``.grad`` None (an average).

    Returns:
        The flat weights, shape (sum of the sizes,), a leaf tensor whose ``.grad`` is the
        flat gradient (hand it to the optimizer in place of ``parameters``).

    Raises:
        ValueError: for no parameters, a repeated one, or mixed dtypes or devices.
    """
    parameters = list(parameters)
    if not parameters:
        raise ValueError("flatten_parameters needs at least one parameter; got none.")
    if len({id(p) for p in parameters}) != len(parameters):
        raise ValueError("flatten_parameters got the same parameter twice; pass each once.")
    kinds = {(p.dtype, p.device) for p in parameters}
    if len(kinds) != 1:
        raise ValueError("flatten_parameters needs parameters of one dtype and device; got "
                         f"{', '.join(sorted(f'{d} on {v}' for d, v in kinds))}.")
    flat = torch.cat([p.detach().reshape(-1) for p in parameters])
    offset = 0
    for p in parameters:
        p.data = flat[offset:offset + p.numel()].view_as(p)
        offset += p.numel()
    if grad:
        flat.grad = torch.cat([torch.zeros_like(p).reshape(-1) if p.grad is None else p.grad.reshape(-1)
                               for p in parameters])
        link_gradients(parameters, flat)
    else:
        for p in parameters:
            p.grad = None
    return flat


def link_gradients(parameters: Sequence[Tensor], flat: Tensor) -> None:
    """Make each parameter's ``.grad`` its view of ``flat.grad`` again (zeros if ``flat`` has
    none), e.g. after ``module.zero_grad()`` set them to None (Lightning does so before fitting).

    Args:
        parameters: the parameters `flatten_parameters` laid out into ``flat``, in its order.
        flat: the flat weights it returned.
    """
    if flat.grad is None:
        flat.grad = torch.zeros_like(flat)
    offset = 0
    for p in parameters:
        p.grad = flat.grad[offset:offset + p.numel()].view_as(p)
        offset += p.numel()


def flat_view(tensors: Sequence[Tensor]) -> Tensor | None:
    """The 1-D view spanning ``tensors`` if they lie back to back in one memory block, in this
    order (as `flatten_parameters` lays them out), else None.

    Args:
        tensors: tensors of one dtype (at least one).

    Returns:
        A detached view of shape (total size,) sharing their memory, or None.
    """
    first = tensors[0]
    start, size, total = first.data_ptr(), first.element_size(), 0
    for t in tensors:
        if t.dtype != first.dtype or not t.is_contiguous() or t.data_ptr() != start + total * size:
            return None
        total += t.numel()
    return first.detach().as_strided((total,), (1,))


@torch.no_grad()
def clip_grad_norm(parameters: list[Tensor], max_norm: float) -> Tensor:
    """Clip the gradients' total 2-norm to ``max_norm`` in place; bit for bit
    ``torch.nn.utils.clip_grad_norm_(parameters, max_norm)`` on tensors of one device and
    dtype (its foreach path: per-tensor norms, their norm, ``min(max_norm / (norm + 1e-6), 1)``).

    Args:
        parameters: tensors that all have a ``.grad`` of one device and dtype.
        max_norm: the largest total norm kept.

    Returns:
        The total norm before clipping, 0-dim tensor (non-finite if a gradient is).
    """
    return _clip_grads([p.grad for p in parameters], max_norm)


def _clip_grads(grads: list[Tensor], max_norm: float) -> Tensor:
    """`clip_grad_norm` on the gradient tensors themselves (grad mode off).

    In float64 the coefficient is computed in Python floats with torch's operations
    (``max_norm / t`` is ``t.reciprocal() * max_norm``, then the clamp), which are the same
    IEEE double operations, and the gradients are not multiplied by a coefficient of 1 (a
    product with 1 is the factor itself): two fewer tensor operations per update in most
    updates, the same bits. Other dtypes use the tensor operations.
    """
    total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2.0)), 2.0)
    if total.dtype == torch.float64:
        coef = (1.0 / (total.item() + 1e-6)) * float(max_norm)
        if not coef >= 1.0:  # NaN included, as torch.clamp keeps it
            torch._foreach_mul_(grads, coef)
    else:
        torch._foreach_mul_(grads, torch.clamp(float(max_norm) / (total + 1e-6), max=1.0))
    return total


def optimizer_step(optimizer: torch.optim.Optimizer) -> None:
    """``optimizer.step()`` without torch's per-call wrapper when it would do nothing else.

    ``Optimizer.step`` is wrapped (for every optimizer class) by a function that opens a
    profiler ``record_function`` range and runs the registered step hooks; a learning-rate
    scheduler adds a wrapper that marks the optimizer as stepped. With no step hook
    registered (global or on ``optimizer``) and no profiler running, this calls the
    optimizer class's own ``step`` (the same update, e.g. fused AdamW) and marks it as
    the scheduler's wrapper does; otherwise, or when the wrapper is not torch's, it calls
    ``optimizer.step()``.

    Args:
        optimizer: a ``torch.optim`` optimizer (not Lightning's wrapper of one).
    """
    step = getattr(type(optimizer).step, "__wrapped__", None)
    # private attributes of torch's wrapper: a torch without one of them (or with a hook in it)
    # takes the public call
    hooks = (getattr(optimizer, "_optimizer_step_pre_hooks", True), getattr(optimizer, "_optimizer_step_post_hooks", True),
             getattr(_optim, "_global_optimizer_pre_hooks", True), getattr(_optim, "_global_optimizer_post_hooks", True),
             getattr(torch.autograd.profiler, "_is_profiler_enabled", True))
    if step is None or any(hooks):
        optimizer.step()
        return
    optimizer._opt_called = True  # what the scheduler's wrapper records (its step-order check)
    step(optimizer)


class ExponentialAverage(AveragedModel):
    """``AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(decay))`` with a lean update.

    The first update copies the weights, each later one is a lerp with weight
    ``1 - decay``, and the buffers (the field's scales) are copied every time: bit for bit
    torch's update, with the same state dict (``module.*``, ``n_averaged``), so checkpoints
    of either load in the other. The averaged copy's parameters are kept in one flat vector
    (`flatten_parameters`); when the averaged model's are too (`flat_view`), the update is
    one ``lerp_`` of the two vectors, otherwise one ``torch._foreach_lerp_`` over the tensors.

    Args:
        model: the module to average (its parameters and buffers of one device and dtype).
        decay: the EMA decay beta in [0, 1].
    """

    def __init__(self, model: torch.nn.Module, decay: float) -> None:
        super().__init__(model, multi_avg_fn=get_ema_multi_avg_fn(decay))
        self.decay = float(decay)
        self._averaged = list(self.module.parameters())
        flatten_parameters(self._averaged, grad=False)
        self._averaged_buffers = list(self.module.buffers())
        self._model_tensors = (model, list(model.parameters()), list(model.buffers()))
        self._flat_pair: tuple[tuple[int, ...], Tensor | None, Tensor | None] = ((), None, None)

    def _flat_views(self, params: list[Tensor]) -> tuple[Tensor | None, Tensor | None]:
        """`flat_view` of the averaged and of the model's parameters, cached for as long as
        every tensor keeps its memory (the key is all their data pointers)."""
        key = (*map(Tensor.data_ptr, self._averaged), *map(Tensor.data_ptr, params))
        if key != self._flat_pair[0]:
            self._flat_pair = (key, flat_view(self._averaged), flat_view(params))
        return self._flat_pair[1], self._flat_pair[2]

    @torch.no_grad()
    def update_parameters(self, model: torch.nn.Module) -> None:
        """Average ``model``'s parameters into the copy and take its buffers."""
        known, params, buffers = self._model_tensors
        if model is not known:
            params, buffers = list(model.parameters()), list(model.buffers())
        averaged, current = self._flat_views(params)
        if averaged is None or current is None:
            averaged, current = self._averaged, params
            copy, lerp = torch._foreach_copy_, torch._foreach_lerp_
        else:
            copy, lerp = Tensor.copy_, Tensor.lerp_
        count = self.n_averaged
        if count.item() == 0:
            copy(averaged, current)
        else:
            lerp(averaged, current, 1 - self.decay)
        if buffers:
            torch._foreach_copy_(self._averaged_buffers, buffers)
        count.add_(1)  # in place, as torch's ``n_averaged += 1``


@dataclass
class UpdateResult:
    """What one update did.

    Attributes:
        result: the minibatch's loss terms and gradient (`JetResult`).
        grad_norm: the gradient norm before clipping, 0-dim tensor.
        lr: the learning rate the step used.
        skipped: True when the loss or the gradient was not finite and nothing changed.
    """

    result: JetResult
    grad_norm: Tensor
    lr: float
    skipped: bool


def jet_update(field: HybridField, loss: JetLoss, buffer: SampleBuffer, batch_size: int,
               generator: torch.Generator | Pcg32, optimizer, scheduler, ema: AveragedModel | None,
               grad_clip: float, report_r2: bool = False, frozen: Tensor | None = None) -> UpdateResult:
    """Draw a minibatch, write the exact jet gradient (Eq. 14-16), clip it, step the
    optimizer and the schedule, and update the weight EMA.

    The gradient is written straight into the parameters' ``.grad`` (``out=`` of
    `JetLoss.value_and_grad`) when they exist, else stored there (`HybridField.write_grad`);
    ``result.grads`` are then those tensors, clipped.

    Args:
        field: the hybrid field being trained (float64 host, float32 as on a device).
        loss: the jet loss with the calibrated scales.
        buffer: the sample buffer to draw ``batch_size`` jets from (with replacement); for a
            field with ``n_u`` inputs its channels are the n states, then the inputs, whose
            jet rows 0 and 1 are ``u`` and ``udot``.
        batch_size: minibatch size.
        generator: the minibatch index generator (torch's, or `Pcg32` as the C trainer).
        optimizer: a ``torch.optim`` optimizer over ``field.parameters_list()`` (or
            Lightning's wrapper of one).
        scheduler: its learning-rate scheduler (stepped once per update made).
        ema: the averaged model, or None.
        grad_clip: the gradient-norm clip.
        report_r2: evaluate ``||r2||^2`` even when lambda2 = 0 (for logs only).
        frozen: a gradient to zero before clipping and stepping (the network's flat gradient
            while only physical parameters train, `torch_ude.training.JetMatchingModule`'s
            ``physics_first``): Adam's moments then stay zero and those weights do not move.

    Returns:
        The `UpdateResult`; a non-finite loss or gradient norm skips the step (the
        weights never become non-finite) and zeroes the gradient.
    """
    lr = float(scheduler.get_last_lr()[0])
    batch = buffer.sample(batch_size, generator)
    params = field.parameters_list()
    grads = [p.grad for p in params]
    if any(g is None for g in grads):  # no gradients yet: new tensors, then stored in .grad
        grads = None
    with torch.inference_mode():  # new tensors are temporaries; in-place writes go to ordinary tensors
        if field.n_inputs:
            n = field.n_states
            res = loss.value_and_grad(field, batch[:, 0, :n], batch[:, 1, :n], batch[:, 2, :n], validate=False,
                                      report_r2=report_r2, u=batch[:, 0, n:], udot=batch[:, 1, n:], out=grads)
        else:
            res = loss.value_and_grad(field, batch[:, 0], batch[:, 1], batch[:, 2], validate=False,
                                      report_r2=report_r2, out=grads)
    with torch.no_grad():
        if grads is None:
            field.write_grad(res.grads)  # copies: the .grad are ordinary tensors
            grads = [p.grad for p in params]
        if frozen is not None:
            frozen.zero_()
        norm = _clip_grads(grads, grad_clip)
        if not (math.isfinite(norm.item()) and math.isfinite(res.loss.item())):
            optimizer.zero_grad(set_to_none=False)  # in place: gradients may be views of a flat one
            return UpdateResult(res, norm, lr, True)
        optimizer_step(optimizer)
        if field.physical:
            field.known.project()
        scheduler.step()
        if ema is not None:
            ema.update_parameters(field)
    return UpdateResult(res, norm, lr, False)


def due_updates(before: int | None, last: int | None, train_every: int) -> int:
    """Updates the training rate asks for after a chunk of the live stream.

    One update per multiple of ``train_every`` ticks crossed between the newest tick
    before the chunk (``before``; None at the start) and after it (``last``); the C
    trainer's ``tu_trainer_push_chunk`` counts the same way.

    Args:
        before: the newest tick before the chunk, or None.
        last: the newest tick after it, or None (nothing arrived yet).
        train_every: ticks per training tick (``fs / train_rate``, >= 1).

    Returns:
        The number of updates (>= 0).
    """
    if last is None:
        return 0
    lo = -1 if before is None else before
    return max(last // train_every - lo // train_every, 0)


def apply_calibration(cal: Calibration, fields: list[HybridField], loss: JetLoss, optimizer,
                      weight_decay: float, weight_decay_full_at: float | None, keep_scales: bool = False) -> None:
    """Hand a finished calibration to the trainer (Algorithm 1, line 4).

    Sets the fields' input and output scales to ``x_rms`` and ``s1`` (unless
    ``keep_scales``: a pretrained field keeps its own; a field with inputs takes the
    state channels' values, and the input channels' ``x_rms`` as its input scale), the
    loss scales ``s1, s2`` (state channels) and
    ``lambda2``, and, when ``weight_decay > 0`` (AdamW), the noise-adaptive decay of
    `torch_ude.calibration.noise_adaptive_weight_decay` in every parameter group.

    Args:
        cal: the calibration.
        fields: the trained field and its averaged copy (each set once).
        loss: the jet loss.
        optimizer: the optimizer (or Lightning's wrapper; its ``param_groups`` are set).
        weight_decay: the decay at and above ``weight_decay_full_at``.
        weight_decay_full_at: relative noise of full decay, or None for a constant decay.
        keep_scales: leave the fields' scales as they are (fine-tuning a trained field).
    """
    n = fields[0].n_states
    if fields[0].n_inputs:
        if not keep_scales:
            for f in {id(f): f for f in fields}.values():
                f.set_scales(cal.x_rms[:n].to(f.in_scale.dtype), cal.s1[:n].to(f.out_scale.dtype),
                             cal.x_rms[n:].to(f.input_scale.dtype))
        loss.s1.copy_(cal.s1[:n])
        loss.s2.copy_(cal.s2[:n])
    else:
        if not keep_scales:
            for f in {id(f): f for f in fields}.values():
                f.set_scales(cal.x_rms.to(f.in_scale.dtype), cal.s1.to(f.out_scale.dtype))
        loss.s1.copy_(cal.s1)
        loss.s2.copy_(cal.s2)
    loss.lambda2 = cal.lambda2
    if weight_decay > 0:
        decay = noise_adaptive_weight_decay(cal.sigma_rel, weight_decay, weight_decay_full_at)
        for group in getattr(optimizer, "optimizer", optimizer).param_groups:
            if not group.get("physical"):  # (trained physical parameters are never decayed)
                group["weight_decay"] = decay

"""Memory and compute accounting of one baseline iteration (Sections 4.1 and 5.5 of the paper).

Three numbers, each measured on the code that trains:

* tape bytes: the bytes of the buffers `baselines.rk4.RK4Tape` allocates, which hold
  everything the reverse sweep reads back;
* peak heap: the largest amount of tensor memory allocated during one iteration and
  still live at once, from the allocation events torch's profiler records
  (``profile_memory=True``). Python's ``tracemalloc`` would miss these, since torch
  allocates tensor storage outside Python's allocator;
* multiply-accumulates: the profiler's FLOP count (``with_flops=True``) of the matrix
  products, halved, next to `matmul_macs`, the count derived from the layer widths.
  Elementwise work (tanh, its derivative, the RK4 combinations) is not counted.

`account_iteration` gathers the three with the wall time of an iteration (the table of
``python -m benchmarks.baseline.accounting``).
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch._C._profiler import _EventType
from torch.profiler import ProfilerActivity, profile

from torch_ude.field import HybridField

from .rk4 import RK4Tape
from .shooting import ShootingObjective
from .windows import ShootingWindows

__all__ = ["IterationCost", "measure_iteration", "matmul_macs", "tape_breakdown", "account_iteration",
           "MATRIX_PRODUCTS"]

#: The profiler events whose FLOPs are matrix products (elementwise ops carry FLOPs too).
MATRIX_PRODUCTS = ("aten::mm", "aten::addmm", "aten::bmm")


@dataclass
class IterationCost:
    """What one call of the measured function cost.

    Attributes:
        peak_heap_bytes: the peak of tensor bytes allocated inside the call and live at once.
        matmul_macs: multiply-accumulates of its matrix products (profiler FLOPs / 2).
    """

    peak_heap_bytes: int
    matmul_macs: int


def _walk(nodes: list) -> Iterator:
    for node in nodes:
        yield node
        yield from _walk(node.children)


def measure_iteration(fn: Callable[[], object]) -> IterationCost:
    """Run ``fn`` once under torch's profiler and read its heap peak and matrix MACs.

    Args:
        fn: one iteration, e.g. ``lambda: ShootingObjective(field, windows).gradient()``
            (building the objective inside ``fn`` counts the tape's allocation too).

    Returns:
        The `IterationCost`.
    """
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, with_flops=True) as prof:
        fn()
    tree = prof.profiler.kineto_results.experimental_event_tree()
    allocations = sorted((n for n in _walk(tree) if n.tag == _EventType.Allocation), key=lambda n: n.start_time_ns)
    live = peak = 0
    for node in allocations:
        live += node.extra_fields.alloc_size
        peak = max(peak, live)
    flops = sum(e.flops or 0 for e in prof.events() if e.name in MATRIX_PRODUCTS)
    return IterationCost(peak_heap_bytes=int(peak), matmul_macs=int(flops // 2))


def matmul_macs(field: HybridField, steps: int, batch: int) -> int:
    """Matrix-product MACs of one iteration, counted from the layer widths.

    Per stage evaluation (4 per RK4 step, ``4 K B`` in all) with ``P = sum_l d_{l-1} d_l``
    (320 for 2-16-16-2): the forward pass ``P``; in reverse the input VJP ``P``, the
    weight gradients ``P`` and the hidden cotangents the parameter VJP forms again,
    ``P - d_0 d_1``; and the known field's ``J^T u``, ``n^2``. The residual's linear term (if
    any) adds ``3 d_0 d_L``: its value, its input VJP and its weight gradient.

    Args:
        field: the field.
        steps: ``K``.
        batch: ``B``.

    Returns:
        The count.
    """
    sizes = field.mlp.sizes
    products = sum(a * b for a, b in zip(sizes[:-1], sizes[1:]))
    per_stage = 4 * products - sizes[0] * sizes[1] + field.n_states**2
    if field.linear:
        per_stage += 3 * sizes[0] * sizes[-1]
    return 4 * steps * batch * per_stage


def tape_breakdown(tape: RK4Tape) -> dict[str, int]:
    """Bytes of each tape buffer: ``stages``, ``hidden`` (all layers), ``states`` and ``total``."""
    def size(t: torch.Tensor) -> int:
        return t.numel() * t.element_size()
    out = {"stages": size(tape.stages), "hidden": sum(size(h) for h in tape.hidden), "states": size(tape.states)}
    out["total"] = sum(out.values())
    return out


def account_iteration(field: HybridField, windows: ShootingWindows, state_scale: torch.Tensor | None = None,
                      repeats: int = 5) -> dict:
    """Memory and compute of one iteration (`ShootingObjective.gradient`) on ``windows``.

    Args:
        field: the field.
        windows: the ``B`` windows of ``K`` steps.
        state_scale: the objective's per-channel scale of the state error, (n,), or None.
        repeats: timed iterations (without the profiler) on one objective, >= 1.

    Returns:
        ``tape`` (`tape_breakdown`, bytes), ``peak_heap_bytes`` (`measure_iteration` of an iteration
        that builds its objective, so its tape counts), ``matmul_macs_profiled``, ``matmul_macs_counted``
        (`matmul_macs`) and ``iteration_s``, the median wall time of one iteration in s.
    """
    cost = measure_iteration(lambda: ShootingObjective(field, windows, state_scale).gradient())
    objective = ShootingObjective(field, windows, state_scale)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        objective.gradient()
        times.append(time.perf_counter() - start)
    return {"tape": tape_breakdown(objective.tape), "peak_heap_bytes": cost.peak_heap_bytes,
            "matmul_macs_profiled": cost.matmul_macs,
            "matmul_macs_counted": matmul_macs(field, windows.steps, windows.batch),
            "iteration_s": statistics.median(times)}

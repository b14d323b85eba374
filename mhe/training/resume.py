"""The PEM loop's warm starts in a checkpoint, so a resumed run takes the iterates an uninterrupted one takes.

`mhe.outer.outer.PEMLoop.state_dict` holds the optimizer, the damping, the accepted losses and the
counters, but not the warm starts each window's MHE solve begins from (``PEMLoop.starts``) nor
the window solutions Gauss-Newton already has at the current ``alpha`` (``PEMLoop._solved``: the
accepted trial's solve, which the next step reuses instead of solving again). Without them a
resumed run starts every window cold once and solves again what it had, so IPOPT lands on
slightly different points and the iterates drift from the uninterrupted run's.
`warm_state` adds both to the checkpoint as plain tensors and lists (a checkpoint must load with
``torch.load(weights_only=True)``), and `restore_warm_state` puts them back.
"""
from __future__ import annotations

from dataclasses import fields

import numpy as np
import torch

from ..estimator.point import KKTPoint
from ..estimator.solver import Start, WindowSolutions
from ..outer.outer import PEMLoop

__all__ = ["warm_state", "restore_warm_state"]


def _start_out(start: Start | None) -> list[torch.Tensor] | None:
    return None if start is None else [torch.from_numpy(np.array(a, copy=True)) for a in start]


def _start_in(saved: list[torch.Tensor] | None) -> Start | None:
    return None if saved is None else tuple(t.numpy() for t in saved)


def _solutions_out(sol: WindowSolutions) -> dict:
    return {"point": {f.name: getattr(sol.point, f.name) for f in fields(sol.point)}, "ok": sol.ok,
            "starts": [_start_out(s) for s in sol.starts], "status": list(sol.status), "iterations": sol.iterations,
            "kkt_residual": sol.kkt_residual, "wall_s": float(sol.wall_s), "ipopt_s": float(sol.ipopt_s)}


def _solutions_in(saved: dict) -> WindowSolutions:
    return WindowSolutions(point=KKTPoint(**saved["point"]), ok=saved["ok"],
                           starts=[_start_in(s) for s in saved["starts"]], status=list(saved["status"]),
                           iterations=saved["iterations"], kkt_residual=saved["kkt_residual"],
                           wall_s=saved["wall_s"], ipopt_s=saved["ipopt_s"])


def warm_state(loop: PEMLoop) -> dict:
    """The loop's warm starts and its solutions at the current ``alpha``, as tensors and lists."""
    solved = loop._solved
    return {"starts": {"index": [int(i) for i in loop.starts], "values": [_start_out(s) for s in loop.starts.values()]},
            "solved": None if solved is None else {"alpha": solved[0], "index": [int(i) for i in solved[1]],
                                                    "solutions": _solutions_out(solved[2])}}


def restore_warm_state(loop: PEMLoop, state: dict) -> None:
    """Put back what `warm_state` saved (a checkpoint written before it existed has none: cold starts)."""
    starts = state.get("starts") or {"index": [], "values": []}
    loop.starts = {int(i): _start_in(s) for i, s in zip(starts["index"], starts["values"])}
    solved = state.get("solved")
    loop._solved = None if solved is None else (solved["alpha"], list(solved["index"]),
                                                _solutions_in(solved["solutions"]))

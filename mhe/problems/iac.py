"""The real IAC racecar (Table 2 of the PEM-MHE paper): the validation data of a train/validation split.

A config on the Indy Autonomous Challenge log (`mhe.data.logs.IACRecording`) trains on a ``part`` of the log's
gated stretch; `validation_source` gives the data its results are validated on: another part, or by default the
rest of the stretch (the blocks the training part leaves out), read the same way.
"""
from __future__ import annotations

from collections.abc import Sequence

from ..data.logs import IACRecording
from ..identification import IdentificationProblem

__all__ = ["validation_source"]


def validation_source(problem: IdentificationProblem, part: Sequence[float] | None = None) -> IACRecording:
    """The validation recording of ``problem``'s train/validation split of an IAC log.

    Args:
        problem: a problem on a part of an IAC log (its source an `mhe.data.logs.IACRecording`).
        part: the fractions ``(a, b)`` of the gated stretch to validate on, or several pairs in time order
            ``(a1, b1, a2, b2, ...)``; None: the rest of the stretch (`mhe.data.logs.IACRecording.rest`).

    Returns:
        The same log, parsed the same way, with the validation part.

    Raises:
        ValueError: if ``problem`` does not read an `mhe.data.logs.IACRecording`, or (from the recording) for a
            ``part`` that is not pairs of fractions, or for no ``part`` when the training part is the whole stretch.
    """
    src = problem.source
    if not isinstance(src, IACRecording):
        raise ValueError(f"The problem must read an mhe.data.logs.IACRecording; it reads {type(src).__name__}. "
                         "Give a problem on an IAC log (e.g. configs/mhe_iac_physics_gn.yaml).")
    return src.rest() if part is None else src.with_part(part)

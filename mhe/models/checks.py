"""Checks of settings and arguments that name the condition that failed.

A compound message ("need A, B and C; got ...") leaves the user to find which of the three is
wrong; `require` takes the conditions one by one, each with its own message, and raises the
first that fails.
"""
from __future__ import annotations

from collections.abc import Iterable

__all__ = ["require"]


def require(checks: Iterable[tuple[object, str]]) -> None:
    """Raise the message of the first failed check.

    Args:
        checks: ``(condition, message)`` pairs in the order they are checked; a condition
            fails when it is falsy (a bool, or anything with a truth value).

    Raises:
        ValueError: with the message of the first failed condition.
    """
    for ok, message in checks:
        if not ok:
            raise ValueError(message)

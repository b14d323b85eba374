"""A plant's torch field run on CasADi symbols: the known model's CasADi form, traced.

The C trainer's known field f_known(x, u) and its Jacobians are generated from the plant's
own Python definition, the ``forward`` of its `torch_ude.systems.VectorField` (or
`torch_ude.systems.ControlledField`) that the Python trainer runs. `trace_field` calls that
``forward`` once on a stand-in for a batch of one row whose entries are ``casadi.SX``
symbols: arithmetic, indexing and ``torch.stack`` act on the symbols, and torch functions
reach this module through torch's ``__torch_function__`` protocol, which torch honours for
any argument that defines it. So a user's `System` needs nothing beyond what the Python
trainer already needs, no second (CasADi) definition can drift from the first, and
``torch_ude`` keeps no CasADi import (house style). A ``forward`` that leaves this set
(a linear solve, a loop over the batch, control flow on values) raises `TraceError`
naming the operation.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import casadi as cs
import numpy as np
import torch

__all__ = ["TraceError", "trace_field", "SUPPORTED"]


class TraceError(ValueError):
    """The field's ``forward`` does something that has no CasADi form here (the message says what)."""


def _sigmoid(z):
    return 1.0 / (1.0 + cs.exp(-z))


_UNARY: dict[str, Callable] = {
    "sin": cs.sin, "cos": cs.cos, "tan": cs.tan, "asin": cs.asin, "arcsin": cs.asin, "acos": cs.acos,
    "arccos": cs.acos, "atan": cs.atan, "arctan": cs.atan, "sinh": cs.sinh, "cosh": cs.cosh, "tanh": cs.tanh,
    "exp": cs.exp, "log": cs.log, "log1p": cs.log1p, "expm1": cs.expm1, "sqrt": cs.sqrt, "abs": cs.fabs,
    "square": lambda z: z * z, "neg": lambda z: -z, "negative": lambda z: -z, "sign": cs.sign, "erf": cs.erf,
    "sigmoid": _sigmoid, "reciprocal": lambda z: 1.0 / z,
}
_BINARY: dict[str, Callable] = {
    "add": lambda a, b: a + b, "__add__": lambda a, b: a + b, "__radd__": lambda a, b: b + a,
    "sub": lambda a, b: a - b, "subtract": lambda a, b: a - b, "__sub__": lambda a, b: a - b,
    "__rsub__": lambda a, b: b - a, "rsub": lambda a, b: b - a,
    "mul": lambda a, b: a * b, "multiply": lambda a, b: a * b, "__mul__": lambda a, b: a * b,
    "__rmul__": lambda a, b: b * a, "div": lambda a, b: a / b, "divide": lambda a, b: a / b,
    "true_divide": lambda a, b: a / b, "__truediv__": lambda a, b: a / b, "__rtruediv__": lambda a, b: b / a,
    "pow": lambda a, b: a ** b, "__pow__": lambda a, b: a ** b, "__rpow__": lambda a, b: b ** a,
    "atan2": cs.atan2, "arctan2": cs.atan2, "maximum": cs.fmax, "minimum": cs.fmin, "hypot": cs.hypot,
}
SUPPORTED = tuple(sorted({*_UNARY, *(k for k in _BINARY if not k.startswith("_")), "stack", "cat", "unbind",
                          "where", "clamp", "zeros_like", "ones_like"}))
"""The torch functions (and Tensor methods of the same names) a traced ``forward`` may call,
besides ``+ - * / **``, comparisons and indexing ``x[:, j]``."""


class _Row:
    """A torch tensor of shape (N,) (``ndim`` 1) or (N, k) (``ndim`` 2) for a batch of one row:
    ``expr`` is a ``casadi.SX`` of shape (1, 1) or (1, k); ``ndim`` 0: a 0-dim tensor, a trained
    physical constant ``p0 + s theta`` of the known model (1, 1)."""

    def __init__(self, expr, ndim: int, name: str = "a tensor") -> None:
        self.expr, self.ndim, self.name = expr, ndim, name

    # what torch code reads off a tensor
    @property
    def shape(self) -> tuple[int, ...]:
        return () if self.ndim == 0 else (1,) if self.ndim == 1 else (1, int(self.expr.shape[1]))

    dtype = torch.float64
    device = torch.device("cpu")

    def dim(self) -> int:
        return self.ndim

    def __len__(self) -> int:
        return 1

    def __bool__(self) -> bool:
        raise TraceError("branches on the value of a state or input (Python `if`/`and`/`or` on a tensor, or "
                         ".item()); write it with torch.where")

    def __getitem__(self, key) -> _Row:
        key = key if isinstance(key, tuple) else (key,)
        if key and key[0] is Ellipsis and self.ndim == 2:
            key = (slice(None), *key[1:])
        if not key or key[0] != slice(None) or len(key) > self.ndim:
            raise TraceError(f"indexes a batch with {key!r}; index the channels of every row as x[:, j] or x[:, a:b]")
        if len(key) == 1:
            return self
        index = key[1]
        width = int(self.expr.shape[1])
        if isinstance(index, (int, np.integer)):
            if not -width <= int(index) < width:
                raise TraceError(f"reads column {int(index)} of {self.name} of {width} columns")
            return _Row(self.expr[0, int(index) % width], 1)
        if isinstance(index, slice):
            cols = list(range(width))[index]
        elif isinstance(index, (list, tuple)) and all(isinstance(i, (int, np.integer)) for i in index):
            cols = [int(i) for i in index]
            if any(not -width <= i < width for i in cols):
                raise TraceError(f"reads columns {cols} of {self.name} of {width} columns")
        else:
            raise TraceError(f"indexes the columns with {index!r}; use an integer, a slice or a list of integers")
        return _Row(cs.horzcat(*[self.expr[0, i % width] for i in cols]) if cols else cs.SX(1, 0), 2)

    def unbind(self, dim: int = 0) -> tuple[_Row, ...]:
        if self.ndim != 2 or dim not in (1, -1):
            raise TraceError("unbinds along the batch; unbind the channels with x.unbind(1)")
        return tuple(_Row(self.expr[0, j], 1) for j in range(int(self.expr.shape[1])))

    def __getattr__(self, name: str):
        if name.startswith("__"):  # protocols probed by numpy, copy, pickle: not a tensor method
            raise AttributeError(name)
        if name in _UNARY:
            return lambda: _Row(_UNARY[name](self.expr), self.ndim)
        if name in _BINARY or name in ("clamp",):
            return lambda *args, **kwargs: _call(name, (self, *args), kwargs)
        raise TraceError(f"calls Tensor.{name}, which has no CasADi form here (supported: {', '.join(SUPPORTED)})")

    def _binary(self, name: str, other) -> _Row:
        return _call(name, (self, other), {})

    __add__ = lambda self, o: self._binary("add", o)  # noqa: E731
    __radd__ = lambda self, o: _call("add", (o, self), {})  # noqa: E731
    __sub__ = lambda self, o: self._binary("sub", o)  # noqa: E731
    __rsub__ = lambda self, o: _call("sub", (o, self), {})  # noqa: E731
    __mul__ = lambda self, o: self._binary("mul", o)  # noqa: E731
    __rmul__ = lambda self, o: _call("mul", (o, self), {})  # noqa: E731
    __truediv__ = lambda self, o: self._binary("div", o)  # noqa: E731
    __rtruediv__ = lambda self, o: _call("div", (o, self), {})  # noqa: E731
    __pow__ = lambda self, o: self._binary("pow", o)  # noqa: E731
    __rpow__ = lambda self, o: _call("pow", (o, self), {})  # noqa: E731
    __lt__ = lambda self, o: _compare(self, o, lambda a, b: a < b)  # noqa: E731
    __le__ = lambda self, o: _compare(self, o, lambda a, b: a <= b)  # noqa: E731
    __gt__ = lambda self, o: _compare(self, o, lambda a, b: a > b)  # noqa: E731
    __ge__ = lambda self, o: _compare(self, o, lambda a, b: a >= b)  # noqa: E731

    def __neg__(self) -> _Row:
        return _Row(-self.expr, self.ndim)

    def __pos__(self) -> _Row:
        return self

    def __abs__(self) -> _Row:
        return _Row(cs.fabs(self.expr), self.ndim)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return _call(getattr(func, "__name__", str(func)), args, kwargs or {})


def _operand(value, ndim: int):
    """``value`` (a `_Row`, a number or a constant tensor) as a CasADi operand for a row of ``ndim``."""
    if isinstance(value, _Row):
        if value.ndim == 0:  # a trained physical constant: the same symbol for every row and column
            return value.expr
        if value.ndim != ndim and value.ndim == 1 and ndim == 2:
            raise TraceError("combines a (N,) tensor with a (N, k) one (torch broadcasts them along the wrong axis); "
                             "index or stack the channels first")
        return value.expr
    if isinstance(value, torch.Tensor):
        value = value.detach().to(torch.float64).numpy()
    if isinstance(value, (bool, int, float, np.floating, np.integer)):
        return float(value)
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return float(value)
    if isinstance(value, np.ndarray) and value.ndim == 1 and ndim == 2:
        return cs.DM(value.reshape(1, -1))
    raise TraceError(f"combines a state or input with a constant of type {type(value).__name__} "
                     f"{getattr(value, 'shape', '')}; use numbers, 0-d tensors or (k,) tensors of per-channel "
                     f"constants")


def _rank(args: Sequence) -> int:
    return max((a.ndim for a in args if isinstance(a, _Row)), default=1)


def _compare(a, b, op) -> _Row:
    ndim = _rank((a, b))
    return _Row(op(_operand(a, ndim), _operand(b, ndim)), ndim)


def _elementwise(fn: Callable, args: Sequence) -> _Row:
    ndim = _rank(args)
    return _Row(fn(*(_operand(a, ndim) for a in args)), ndim)


def _join(seq, dim, name: str, want: int) -> _Row:
    if dim not in (1, -1) or not isinstance(seq, (list, tuple)) or not seq:
        raise TraceError(f"calls torch.{name} along dimension {dim}; {name} the channels along dim=1")
    parts = []
    for item in seq:
        if not isinstance(item, _Row):
            raise TraceError(f"{name}s a constant {type(item).__name__} with states; multiply it by a state-shaped "
                             f"tensor (e.g. torch.zeros_like(x[:, 0]) + value) first")
        if item.ndim != want:
            raise TraceError(f"calls torch.{name} on a tensor of {item.ndim} dimension(s); torch.{name} needs "
                             f"{'(N,) channels' if want == 1 else '(N, k) blocks'}")
        parts.append(item.expr)
    return _Row(cs.horzcat(*parts), 2)


def _call(name: str, args: Sequence, kwargs: dict) -> _Row:
    if name in _UNARY and len(args) == 1 and not kwargs:
        return _elementwise(_UNARY[name], args)
    if name in _BINARY and len(args) == 2 and not kwargs:
        return _elementwise(_BINARY[name], args)
    if name in ("stack", "cat"):
        dim = kwargs.get("dim", args[1] if len(args) > 1 else 0)
        return _join(args[0], dim, name, 1 if name == "stack" else 2)
    if name == "unbind" and isinstance(args[0], _Row):
        return args[0].unbind(kwargs.get("dim", args[1] if len(args) > 1 else 0))
    if name == "where" and len(args) == 3:
        return _elementwise(lambda c, a, b: cs.if_else(c, a, b), args)
    if name == "clamp":
        low, high = kwargs.get("min", args[1] if len(args) > 1 else None), kwargs.get("max", args[2] if len(args) > 2
                                                                                     else None)
        out = args[0]
        out = out if low is None else _elementwise(cs.fmax, (out, low))
        return out if high is None else _elementwise(cs.fmin, (out, high))
    if name in ("zeros_like", "ones_like") and isinstance(args[0], _Row):
        value = 0.0 if name == "zeros_like" else 1.0
        return _Row(cs.SX(*args[0].expr.shape) + value, args[0].ndim)
    raise TraceError(f"calls torch.{name}, which has no CasADi form here (supported: {', '.join(SUPPORTED)})")


def _physical_symbols(field: torch.nn.Module, theta: cs.SX) -> dict:
    """The constants of a known model that trains physical parameters (`torch_ude.systems.parameters`) with
    each trained one ``p0_i + s_i theta_i`` on the symbol ``theta_i`` (``p0``, ``s`` rounded as the field's
    dtype rounds them: float32 for a float32 field), the fixed ones as their floats."""
    dtype = field.p0.dtype
    p0 = field.p0.detach().numpy()
    spans = field.spans().detach().to(dtype).numpy()
    out = field.values()  # (the trained ones replaced below)
    for i, name in enumerate(field.trainable_names):
        out[name] = _Row(float(p0[i]) + float(spans[i]) * theta[i], 0, name)
    return out


def trace_field(field: torch.nn.Module, n: int, n_u: int, theta: cs.SX | None = None) -> tuple[cs.SX, cs.SX, cs.SX]:
    """The field's ``forward`` on symbols: ``(x, u, f)`` as ``casadi.SX`` columns.

    Args:
        field: a `VectorField` (``forward(x)``, ``n_u == 0``) or a `ControlledField`
            (``forward(x, u)``); its constants are baked in, but for its trained physical parameters
            when ``theta`` is given.
        n: the state count.
        n_u: the input count (0: ``forward(x)``).
        theta: for a known model that trains physical parameters (a `PhysicalParameters` with ``P``
            trainable names), a (P, 1) symbol of its ``theta``: the model then reads each trained
            constant (`PhysicalParameters.value`, `PhysicalParameters.constants`) as ``p0 + s theta``
            on that symbol, so ``f`` is a function of ``theta`` too (None: every constant baked in).

    Returns:
        ``x`` (n, 1) and ``u`` (n_u, 1) symbols and ``f(x, u)`` (n, 1).

    Raises:
        TraceError: if ``forward`` uses an operation without a CasADi form here, or returns
            anything but one (N, n) tensor.
    """
    x, u = cs.SX.sym("x", n), cs.SX.sym("u", n_u)
    states, inputs = _Row(x.T, 2, "the states x"), _Row(u.T, 2, f"the inputs u (n_inputs = {n_u})")
    args = (states,) if n_u == 0 else (states, inputs)
    if theta is not None:  # the instance's value/constants shadow the class's for the trace only
        constants = _physical_symbols(field, theta)
        field.value, field.constants = constants.__getitem__, lambda: constants
    try:
        out = field(*args)
    except TraceError:
        raise
    except (TypeError, IndexError, RuntimeError, AttributeError, NotImplementedError) as err:
        raise TraceError(f"fails on symbols ({type(err).__name__}: {' '.join(str(err).split())})") from None
    finally:
        if theta is not None:
            del field.value, field.constants
    if not isinstance(out, _Row):
        raise TraceError(f"returns a {type(out).__name__}, not a tensor computed from the states")
    if out.ndim != 2 or int(out.expr.shape[1]) != n:
        shape = "(N,)" if out.ndim == 1 else f"(N, {int(out.expr.shape[1])})"
        raise TraceError(f"returns shape {shape}; the plant has {n} states, so f must be (N, {n})")
    return x, u, out.expr.T

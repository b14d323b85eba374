"""The plant interface: analytic vector fields and the `System` a trainer learns.

A user's own plant works without touching library code: subclass `System`, give it
its true field, its known (mis-specified) field per case, an initial state and a
re-excitation law, and pass it (in Python or in YAML by ``class_path``) to any
trainer of the project.
"""
from __future__ import annotations

import abc
import importlib
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor, nn

__all__ = ["VectorField", "ZeroField", "System", "check_states"]


def check_states(x: object, n: int, name: str = "x", dtype: torch.dtype | None = None) -> None:
    """Validate a batch of states at a public boundary.

    Args:
        x: the value to check; must be a float32 or float64 ``torch.Tensor`` of shape
            ``(N, n)`` (complex tensors pass too, for complex-step checks).
        n: the expected state dimension.
        name: the argument name used in the error message.
        dtype: the dtype ``x`` must have (the parameter dtype of the field it is fed
            to), or None for any of the above.

    Raises:
        TypeError: if ``x`` is not a tensor, is not float32/float64 (integer and half
            precision tensors included), or differs from ``dtype``.
        ValueError: if ``x`` is not of shape ``(N, n)`` or holds NaN or Inf.
    """
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape (N, {n}); got {type(x).__name__}.")
    if x.dtype not in (torch.float32, torch.float64) and not x.is_complex():
        raise TypeError(
            f"{name} must be a float32 or float64 tensor; got dtype {x.dtype}, which the library does not "
            f"compute in. Convert it with {name}.to({dtype or torch.float64})."
        )
    if x.ndim != 2 or x.shape[1] != n:
        raise ValueError(
            f"{name} must have shape (N, {n}), a batch of {n}-dimensional states; got shape "
            f"{tuple(x.shape)}. A single state reshapes with {name}.reshape(1, -1)."
        )
    if dtype is not None and x.dtype != dtype:
        raise TypeError(
            f"{name} has dtype {x.dtype} but the field's parameters are {dtype}; convert the states with "
            f"{name}.to({dtype}) (or the field with field.to({x.dtype}))."
        )
    if not bool(torch.isfinite(x).all()):
        bad = int((~torch.isfinite(x)).any(dim=1).sum())
        raise ValueError(
            f"{name} holds NaN or Inf values in {bad} of its {x.shape[0]} rows; "
            "drop or repair those states before evaluating the field."
        )


class VectorField(nn.Module, abc.ABC):
    """An analytic, batched vector field ``f: (N, n) -> (N, n)`` with its Jacobian.

    Subclasses implement `forward` and `jacobian` with plain tensor operations (no
    autograd), so they run in float64 for verification, in float32 where a device
    would, and in complex128 for complex-step checks. Inputs are not validated here:
    the public entry points of the library call `check_states` once at their boundary.
    """

    n_states: int

    @abc.abstractmethod
    def forward(self, x: Tensor) -> Tensor:
        """Evaluate the field.

        Args:
            x: states, shape ``(N, n)``, in the plant's units (rad, rad/s, ...).

        Returns:
            Time derivatives ``f(x)``, shape ``(N, n)``, units per second.
        """

    @abc.abstractmethod
    def jacobian(self, x: Tensor) -> Tensor:
        """The state Jacobian ``df/dx``.

        Args:
            x: states, shape ``(N, n)``.

        Returns:
            ``J[b, i, j] = d f_i / d x_j`` at ``x[b]``, shape ``(N, n, n)``, units 1/s.
        """

    def jvp(self, x: Tensor, v: Tensor) -> Tensor:
        """Jacobian-vector product ``J(x) v``; shapes ``(N, n)`` -> ``(N, n)``."""
        return torch.einsum("bij,bj->bi", self.jacobian(x), v)

    def vjp(self, x: Tensor, u: Tensor) -> Tensor:
        """Vector-Jacobian product ``J(x)^T u``; shapes ``(N, n)`` -> ``(N, n)``."""
        return torch.einsum("bij,bi->bj", self.jacobian(x), u)


class ZeroField(VectorField):
    """The field ``f(x) = 0``: a purely neural model with no known physics."""

    def __init__(self, n_states: int) -> None:
        super().__init__()
        if n_states < 1:
            raise ValueError(f"n_states must be a positive integer; got {n_states}.")
        self.n_states = n_states

    def forward(self, x: Tensor) -> Tensor:
        """Return zeros shaped like ``x`` (N, n)."""
        return torch.zeros_like(x)

    def jacobian(self, x: Tensor) -> Tensor:
        """Return zeros of shape ``(N, n, n)``."""
        return x.new_zeros(x.shape[0], self.n_states, self.n_states)


class System(abc.ABC):
    """A plant: true dynamics, known models per case, initial state and excitation.

    Class attributes a subclass sets:
        state_names: names of the state channels, length ``n``.
        cases: the names `known_field` accepts (the paper's ``("A", "B", "C")``).
        reexcite_interval: ``(low, high)`` seconds between re-excitation events,
            drawn uniformly; ``None`` for a plant that is never re-excited.
        periodic: indices of the states that are angles in rad (the dynamics are
            2 pi-periodic in them); the residual network reads them as ``(sin, cos)``
            (`torch_ude.input_map`) and prediction errors wrap them. Empty by default.
        invariant: indices of the states the dynamics do not depend on (cyclic
            coordinates); the residual network does not read them. Empty by default.

    Methods a subclass implements: `true_field`, `build_known_field`,
    `initial_state`, `reexcite`, `damping_terms`, `init_args`; optionally
    `evaluation_grid` and `visited_region` for a grid-based field error.
    """

    state_names: tuple[str, ...] = ()
    cases: tuple[str, ...] = ("A", "B", "C")
    reexcite_interval: tuple[float, float] | None = None
    periodic: tuple[int, ...] = ()
    invariant: tuple[int, ...] = ()

    @property
    def n_states(self) -> int:
        """The state dimension ``n``."""
        return len(self.state_names)

    @abc.abstractmethod
    def true_field(self) -> VectorField:
        """The true dynamics ``f*`` that generate the data (Eq. 1)."""

    @abc.abstractmethod
    def build_known_field(self, case: str) -> VectorField:
        """The known model ``f_known`` of a case already validated by `known_field`."""

    @abc.abstractmethod
    def initial_state(self) -> np.ndarray:
        """The initial state ``x0``, shape ``(n,)``, float64."""

    @abc.abstractmethod
    def reexcite(self, rng: np.random.Generator) -> np.ndarray:
        """Draw the state the plant is put in at a re-excitation event.

        Args:
            rng: the excitation random generator (owned by the simulator).

        Returns:
            The new state, shape ``(n,)``, float64.
        """

    @abc.abstractmethod
    def damping_terms(self, case: str) -> tuple[tuple[int, int, float], ...]:
        """The damping coefficients the learned residual should recover.

        Returns:
            Tuples ``(residual_channel, velocity_channel, c_true)``: the residual's
            ``residual_channel`` should equal ``-c_true * x[velocity_channel]`` where
            ``c_true`` is the damping missing from ``f_known`` of ``case`` (zero where
            the case already models it).
        """

    @abc.abstractmethod
    def init_args(self) -> dict:
        """The constructor arguments that rebuild this plant (for run sidecars)."""

    def spec(self) -> dict:
        """``{"class_path": ..., "init_args": ...}``: the plant as a config file names it."""
        return {"class_path": f"{type(self).__module__}.{type(self).__qualname__}", "init_args": self.init_args()}

    @staticmethod
    def from_spec(spec: dict) -> System:
        """The plant a `spec` (or a run's ``field.json`` ``"plant"`` entry) names.

        Raises:
            ValueError: if ``spec`` has no ``class_path``, or it does not name an importable
                `System` subclass.
        """
        path = spec.get("class_path") if isinstance(spec, dict) else None
        module, _, name = str(path).rpartition(".")
        try:
            cls = getattr(importlib.import_module(module), name) if module else None
        except (ImportError, AttributeError):
            cls = None
        if not (isinstance(cls, type) and issubclass(cls, System)):
            raise ValueError(f"the plant spec must name an importable torch_ude.systems.System subclass in "
                             f"'class_path' (e.g. 'torch_ude.systems.SinglePendulum'); got {path!r}.")
        return cls(**spec.get("init_args", {}))

    def known_field(self, case: str) -> VectorField:
        """The known model ``f_known`` for ``case`` (Eq. 2).

        Args:
            case: one of `cases`, case-insensitive.

        Raises:
            ValueError: for a case this plant does not define.
        """
        return self.build_known_field(self.check_case(case))

    def check_case(self, case: str) -> str:
        """Normalize and validate a case name; see `known_field`."""
        if not isinstance(case, str) or case.upper() not in self.cases:
            raise ValueError(
                f"case must be one of {list(self.cases)} for {type(self).__name__}; got {case!r}."
            )
        return case.upper()

    def evaluation_grid(self) -> Tensor | None:
        """A fixed grid of states for the field error, shape ``(G, n)``, or ``None``.

        Plants without a grid are evaluated on visited trajectory states.
        """
        return None

    def visited_region(self, x: Tensor) -> Tensor:
        """Mask of the states in ``x`` (shape ``(G, n)``) that the stream visits, ``(G,)``."""
        return torch.ones(x.shape[0], dtype=torch.bool)


def as_state(value: Sequence[float], n: int, name: str) -> np.ndarray:
    """Convert a user-given state to a float64 array of shape ``(n,)`` or raise ValueError."""
    arr = np.asarray(value, dtype=np.float64).reshape(-1)
    if arr.shape != (n,) or not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be {n} finite numbers; got {list(np.ravel(value))}.")
    return arr

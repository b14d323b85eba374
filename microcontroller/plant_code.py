"""The plant's fields as static-memory float C: ``tu_plant_code.h``, generated, never written by hand.

`plant_code` traces the known field of a `System` and case into CasADi
(`microcontroller.symbolic`), differentiates it there (``J_x = df/dx``, ``J_u = df/du``,
exact, by CasADi's algorithmic differentiation) and keeps the expression graph as CasADi
``SX`` functions, whose instruction lists share every common subexpression between ``f`` and
its Jacobians. A known model that trains physical parameters (`torch_ude.systems.parameters`)
is traced as a function of its ``theta`` too (``p = p0 + s theta``), and a third function gives
the physical part of the jet gradient, ``d/dtheta [ubar . f + wbar . (J_x f v + J_u f udot)]``
with ``v`` and ``udot`` held fixed (`torch_ude.field.HybridField.physical_vjp`), by CasADi's
reverse mode, and a fourth the known model's part of the jet residuals' Jacobian in ``theta``,
``df/dtheta`` and ``d/dtheta (J_x f v + J_u f udot)`` (`torch_ude.physical`), for the end-of-run
refit and the standard errors. `plant_source` writes those instructions as C99 in ``float``: one ``const
float`` per instruction, ``sinf``/``cosf``/... from ``<math.h>``, float literals that
round-trip float32, no work array, no allocation, no global state.

Why not CasADi's own ``CodeGenerator``: its C computes with the double-precision math
functions (``sin``, not ``sinf``) and double literals even with ``casadi_real`` set to
``float``, which on a Cortex-M4F (single-precision FPU) links ``__aeabi_f2d``, ``__aeabi_d2f``
and software ``sin``/``cos`` in double, and it leaves unused parameters (``iw``, ``w``,
``mem``) that the house flags (``-Wextra -Werror``) reject. Walking the same ``SX``
instruction list ourselves keeps CasADi's differentiation and common-subexpression
elimination and gives float C that compiles with the project's warning flags.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import math

import casadi as cs
import numpy as np
from torch import nn

from torch_ude.systems import SinglePendulum, System
from torch_ude.systems.controlled import ControlledField

from .symbolic import TraceError, trace_field

__all__ = ["PlantCode", "plant_code", "plant_source", "float_literal", "CODE_FILE"]

CODE_FILE = "tu_plant_code.h"

_OPS: dict[int, Callable[..., str]] = {
    cs.OP_ADD: lambda a, b: f"({a} + {b})", cs.OP_SUB: lambda a, b: f"({a} - {b})",
    cs.OP_MUL: lambda a, b: f"({a} * {b})", cs.OP_DIV: lambda a, b: f"({a} / {b})",
    cs.OP_NEG: lambda a: f"(-{a})", cs.OP_SQ: lambda a: f"({a} * {a})", cs.OP_TWICE: lambda a: f"({a} + {a})",
    cs.OP_INV: lambda a: f"(1.0f / {a})", cs.OP_POW: lambda a, b: f"powf({a}, {b})",
    cs.OP_EXP: lambda a: f"expf({a})", cs.OP_LOG: lambda a: f"logf({a})", cs.OP_SQRT: lambda a: f"sqrtf({a})",
    cs.OP_SIN: lambda a: f"sinf({a})", cs.OP_COS: lambda a: f"cosf({a})", cs.OP_TAN: lambda a: f"tanf({a})",
    cs.OP_ASIN: lambda a: f"asinf({a})", cs.OP_ACOS: lambda a: f"acosf({a})", cs.OP_ATAN: lambda a: f"atanf({a})",
    cs.OP_ATAN2: lambda a, b: f"atan2f({a}, {b})", cs.OP_SINH: lambda a: f"sinhf({a})",
    cs.OP_COSH: lambda a: f"coshf({a})", cs.OP_TANH: lambda a: f"tanhf({a})", cs.OP_LOG1P: lambda a: f"log1pf({a})",
    cs.OP_EXPM1: lambda a: f"expm1f({a})", cs.OP_ERF: lambda a: f"erff({a})", cs.OP_FABS: lambda a: f"fabsf({a})",
    cs.OP_FMIN: lambda a, b: f"fminf({a}, {b})", cs.OP_FMAX: lambda a, b: f"fmaxf({a}, {b})",
    cs.OP_HYPOT: lambda a, b: f"hypotf({a}, {b})",
    cs.OP_SIGN: lambda a: f"((float)({a} > 0.0f) - (float)({a} < 0.0f))",
    cs.OP_LT: lambda a, b: f"(float)({a} < {b})", cs.OP_LE: lambda a, b: f"(float)({a} <= {b})",
    cs.OP_EQ: lambda a, b: f"(float)({a} == {b})", cs.OP_NE: lambda a, b: f"(float)({a} != {b})",
    cs.OP_NOT: lambda a: f"(float)({a} == 0.0f)", cs.OP_AND: lambda a, b: f"(float)({a} != 0.0f && {b} != 0.0f)",
    cs.OP_OR: lambda a, b: f"(float)({a} != 0.0f || {b} != 0.0f)",
    cs.OP_IF_ELSE_ZERO: lambda a, b: f"({a} != 0.0f ? {b} : 0.0f)",
}
_OP_NAMES = {getattr(cs, k): k for k in dir(cs) if k.startswith("OP_")}


@dataclass
class PlantCode:
    """The CasADi functions of one plant and case, ready to be written as C.

    Attributes:
        n, n_u: states and inputs.
        field: ``casadi.Function('f', [x, u], [f])``: f_known, (n,) per second; with trained
            physical parameters ``[x, u, theta]``.
        jacobians: ``casadi.Function('fj', [x, u], [f, J_x, J_u])``: f_known, its dense
            state Jacobian (n, n) and input Jacobian (n, n_u); with trained physical
            parameters ``[x, u, theta]``.
        truth: ``casadi.Function('t', [x, u], [f])`` of the true field when the firmware
            simulates the plant (the single pendulum), else None.
        describes: what the code is of (for the file's comment).
        n_p: trained physical parameters P (0: none).
        physical: with ``n_p`` > 0, ``casadi.Function('fp', [x, u, theta, v, udot, ubar, wbar], [g])``:
            ``g = d/dtheta [ubar . f + wbar . (J_x f v + J_u f udot)]`` (P,), ``v`` and ``udot`` held
            fixed (`torch_ude.field.HybridField.physical_vjp`); else None.
        sensitivity: with ``n_p`` > 0, ``casadi.Function('fs', [x, u, theta, v, udot], [df/dtheta,
            d/dtheta (J_x f v + J_u f udot)])``, (n, P) each, ``v`` and ``udot`` held fixed: the known
            model's part of the jet residuals' Jacobian in theta (`torch_ude.physical`), which the
            end-of-run refit and the standard errors read; else None.
    """

    n: int
    n_u: int
    field: cs.Function
    jacobians: cs.Function
    truth: cs.Function | None
    describes: str
    n_p: int = 0
    physical: cs.Function | None = None
    sensitivity: cs.Function | None = None


def _symbolic(field: nn.Module, n: int, n_u: int, what: str, theta: cs.SX | None = None
              ) -> tuple[cs.SX, cs.SX, cs.SX]:
    try:
        return trace_field(field, n, n_u, theta)
    except TraceError as err:
        raise ValueError(f"{what} {type(field).__name__}.forward has no CasADi form for the C generator: it {err}; "
                         f"write forward with the torch operations listed in microcontroller.symbolic.SUPPORTED, "
                         f"or train this plant with the Python trainer.") from None


def plant_code(system: System, case: str, known: nn.Module) -> PlantCode:
    """Trace and differentiate the known field of ``system`` (and its truth, for the firmware's simulation).

    Args:
        system: the plant; ``len(system.state_names)`` states and ``system.input_names``
            (none by default) inputs.
        case: the known-model case (for messages).
        known: its known field f_known, a `VectorField` or a `ControlledField` with ``n_inputs``.

    Raises:
        ValueError: one sentence, when the plant names a different number of inputs than
            its known field reads, or the known field has no CasADi form (an operation the
            tracer does not know, a result that is not (N, n)).
    """
    n = len(system.state_names)
    n_u = int(known.n_inputs) if isinstance(known, ControlledField) else 0
    names = tuple(getattr(system, "input_names", ()))
    what = f"the known field of {type(system).__name__} case {case},"
    if len(names) != n_u:
        raise ValueError(f"{type(system).__name__} names {len(names)} input(s) {list(names)} but its known field "
                         f"{type(known).__name__} reads {n_u} (n_inputs); the input columns of the log and the known "
                         f"model must agree: fix data.inputs or the known model.")
    n_p = len(known.trainable_names) if getattr(known, "trainable", False) else 0
    theta = cs.SX.sym("p", n_p) if n_p else None
    x, u, f = _symbolic(known, n, n_u, what, theta)
    jx, ju = cs.densify(cs.jacobian(f, x)), cs.densify(cs.jacobian(f, u))
    truth = None
    if isinstance(system, SinglePendulum):
        tx, tu, tf = _symbolic(system.true_field(), n, 0, f"the true field of {type(system).__name__},")
        truth = cs.Function("t", [tx, tu], [tf])
    describes = (f"{type(system).__name__} case {case}: f_known = {type(known).__module__}."
                 f"{type(known).__qualname__}")
    if not n_p:
        return PlantCode(n, n_u, cs.Function("f", [x, u], [f]), cs.Function("fj", [x, u], [f, jx, ju]), truth,
                         describes)
    v, udot, ubar, wbar = cs.SX.sym("v", n), cs.SX.sym("ud", n_u), cs.SX.sym("ub", n), cs.SX.sym("wb", n)
    lie = cs.mtimes(jx, v) + (cs.mtimes(ju, udot) if n_u else 0)
    grad = cs.densify(cs.gradient(cs.dot(ubar, f) + cs.dot(wbar, lie), theta))
    sens = [cs.densify(cs.jacobian(f, theta)), cs.densify(cs.jacobian(lie, theta))]
    describes += f", trained physical parameters {list(known.trainable_names)} (theta)"
    return PlantCode(n, n_u, cs.Function("f", [x, u, theta], [f]), cs.Function("fj", [x, u, theta], [f, jx, ju]),
                     truth, describes, n_p, cs.Function("fp", [x, u, theta, v, udot, ubar, wbar], [grad]),
                     cs.Function("fs", [x, u, theta, v, udot], sens))


def float_literal(value: float) -> str:
    """A C float literal that round-trips the float32 value of ``value`` (negative ones in parentheses)."""
    v = float(np.float32(value))
    if math.isinf(v):
        return "INFINITY" if v > 0 else "(-INFINITY)"
    if math.isnan(v):
        return "NAN"
    text = f"{v:.9g}"
    if "e" not in text and "." not in text:
        text += ".0"
    return f"({text}f)" if text.startswith("-") else text + "f"


_INPUTS = ("x", "u", "theta", "v", "udot", "ubar", "wbar")  # the C names of a function's inputs, in CasADi's order


def _body(fn: cs.Function, outputs: list[Callable[[int], str]]) -> tuple[list[str], set[str]]:
    """The C statements of an ``SX`` function's instruction list and the inputs they read (``x``,
    ``u``, and for trained physical parameters ``theta`` ... ``wbar``: `_INPUTS`); ``outputs[k](nz)``
    names the destination of output ``k``'s nonzero ``nz`` (column-major, the outputs are dense)."""
    lines, names, constants, read = [], {}, {}, set()
    for k in range(fn.n_instructions()):
        op, args, out = fn.instruction_id(k), fn.instruction_input(k), fn.instruction_output(k)
        if op == cs.OP_INPUT:
            names[out[0]] = f"{_INPUTS[args[0]]}[{args[1]}]"
            read.add(_INPUTS[args[0]])
        elif op == cs.OP_CONST:
            value = float(fn.instruction_constant(k))
            names[out[0]] = float_literal(value)
            constants[names[out[0]]] = value
        elif op == cs.OP_OUTPUT:
            lines.append(f"{outputs[out[0]](out[1])} = {names[args[0]]};")
        elif op == cs.OP_CONSTPOW:
            base, power = names[args[0]], constants.get(names[args[1]])
            expr = " * ".join([base] * int(power)) if power in (2.0, 3.0, 4.0) else f"powf({base}, {names[args[1]]})"
            lines.append(f"const float t{k} = ({expr});")
            names[out[0]] = f"t{k}"
        elif op in _OPS:
            lines.append(f"const float t{k} = {_OPS[op](*(names[a] for a in args))};")
            names[out[0]] = f"t{k}"
        else:
            raise ValueError(f"the known field uses CasADi's {_OP_NAMES.get(op, op)}, which the C generator does not "
                             f"write; express the field without it, or train this plant with the Python trainer.")
    return lines, read


def _function(signature: str, doc: str, fn: cs.Function, outputs: list[Callable[[int], str]],
              inputs: tuple[str, ...], unwritten: tuple[str, ...] = ()) -> str:
    """A C function of ``fn`` whose parameters ``inputs`` it may not read, and ``unwritten``
    outputs it does not write (``ju`` without inputs), each marked used for the compiler."""
    lines, read = _body(fn, outputs)
    body = [f"(void){name};" for name in (*inputs, *unwritten) if name not in read] + lines
    return f"/* {doc} */\n{signature}\n{{\n" + "".join(f"    {line}\n" for line in body) + "}\n"


def plant_source(code: PlantCode, stamp: str, tag: str = "0") -> str:
    """The C of ``code``: static ``tu_plant_field_<tag>``, ``tu_plant_jacobians_<tag>``, with trained physical
    parameters ``tu_plant_physical_<tag>`` and ``tu_plant_sensitivity_<tag>``, and (with a
    simulated plant) ``tu_plant_truth_<tag>``, of the types in ``include/tu_plant.h``; a configuration
    (``tu_model_data.h``) points at them. ``stamp`` (e.g. the generator's) heads the text; with a
    stamp the text is a whole ``tu_plant_code.h`` of one configuration (tag "0")."""
    n = code.n
    f_out = lambda nz: f"f[{nz}]"  # noqa: E731
    jx_out = lambda nz: f"jx[{nz % n} * TU_N_MAX + {nz // n}]"  # noqa: E731
    ju_out = lambda nz: f"ju[{nz % n} * {code.n_u} + {nz // n}]"  # noqa: E731
    theta, of = (", const float *theta", ", theta") if code.n_p else ("", "")
    args = ("x", "u", "theta") if code.n_p else ("x", "u")
    parts = [
        _function(f"static void tu_plant_field_{tag}(const float *x, const float *u{theta}, float *f)",
                  f"f_known(x, u{of})", code.field, [f_out], args),
        _function(f"static void tu_plant_jacobians_{tag}(const float *x, const float *u{theta}, float *f, float *jx, "
                  f"float *ju)", f"f_known(x, u{of}), J_x (rows TU_N_MAX apart) and J_u ({n} x {code.n_u}, "
                  "row-major): CasADi's exact derivatives", code.jacobians,
                  [f_out, jx_out, ju_out], args, ("ju",) if code.n_u == 0 else ()),
    ]
    if code.n_p:
        parts.append(_function(
            f"static void tu_plant_physical_{tag}(const float *x, const float *u, const float *theta, const float *v, "
            "const float *udot, const float *ubar, const float *wbar, float *g)",
            f"g[0 .. {code.n_p}) = d/dtheta [ubar . f + wbar . (J_x f v + J_u f udot)], v and udot held fixed: "
            "the physical part of the jet gradient (CasADi's reverse mode)", code.physical,
            [lambda nz: f"g[{nz}]"], _INPUTS))
        sens_out = lambda name: lambda nz: f"{name}[{nz % n} * {code.n_p} + {nz // n}]"  # noqa: E731
        parts.append(_function(
            f"static void tu_plant_sensitivity_{tag}(const float *x, const float *u, const float *theta, "
            "const float *v, const float *udot, float *fp, float *lp)",
            f"fp = df/dtheta and lp = d/dtheta (J_x f v + J_u f udot), {n} x {code.n_p} row-major each, v and udot "
            "held fixed: the known model's part of the jet residuals' Jacobian in theta (CasADi's forward mode)",
            code.sensitivity, [sens_out("fp"), sens_out("lp")], _INPUTS[:5]))
    if code.truth is not None:
        parts.append(_function(f"static void tu_plant_truth_{tag}(const float *x, float *f)",
                               "f*(x), the simulated plant's true field", code.truth, [f_out], ("x",)))
    text = (f"/* {code.describes},\n * traced into CasADi (microcontroller.symbolic) and written as "
            f"float C (microcontroller.plant_code). */\n#include <math.h>\n\n#include \"tu_plant.h\"\n\n"
            + "\n".join(parts))
    if not stamp:
        return text
    return (stamp + "#ifndef TU_PLANT_CODE_H\n#define TU_PLANT_CODE_H\n\n" + text + "\n#endif /* TU_PLANT_CODE_H */\n")

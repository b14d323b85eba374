"""The C trainer's static memory, computed from the generator's settings, and a target's RAM budget.

`static_bytes` is ``sizeof(tu_trainer)`` for a `DeviceSpec`, from the layout of the struct
in ``include/tu_trainer.h`` (the same on the host and on 32-bit Arm; the tests compare it
with the compiler's ``sizeof`` for several configurations, `member_sizes`). `check_ram` refuses a
configuration whose trainer does not fit a target's budget, before any compiler sees it,
and names the largest reservoir that would fit.
"""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from .build import ROOT, build

if TYPE_CHECKING:
    from .generate import DeviceSpec

__all__ = ["static_bytes", "member_sizes", "build_maxima", "reservoir_half", "check_ram", "firmware_ram",
           "FIRMWARE_RESERVE", "default_ram_budget", "network_parameters", "physical_count", "physical_max",
           "velocity_ring_max"]

#: Bytes of the Cortex-M4F firmware's RAM kept for everything but the trainer instance: its
#: stack, newlib and its stream buffers (a margin chosen for them, not a measurement).
FIRMWARE_RESERVE = 64 * 1024
_F32, _F16, _COUNTERS = 4, 2, 13


def _round_up(value: int, to: int) -> int:
    return -(-value // to) * to


def _as_list(specs) -> list:
    """One configuration or a list of them (one build) as a list; refuses an empty list and twins."""
    specs = list(specs) if isinstance(specs, (list, tuple)) else [specs]
    if not specs:
        raise ValueError("give at least one configuration.")
    hashes = [spec.config_hash() for spec in specs]
    if len(set(hashes)) != len(hashes):
        raise ValueError(f"two configurations of one build have the same settings hash ({hashes}); give each once.")
    return specs


def network_parameters(spec: DeviceSpec) -> int:
    """The network's trainable weights (``TU_NUM_PARAMS``): the field's parameters without the known model's
    ``theta`` (`physical_count`), which the C trainer holds after them."""
    return sum(p.numel() for p in spec.field.mlp.ordered_parameters())


def physical_count(spec: DeviceSpec) -> int:
    """The trained physical parameters of a configuration's known model, P (0: none; `torch_ude.systems.parameters`)."""
    return len(spec.field.known.trainable_names) if spec.field.physical else 0


def physical_max(specs) -> int:
    """The most trained physical parameters of a build's configurations (``TU_PHYSICAL_MAX``; 0: the build has
    no ``TU_PHYSICAL`` code)."""
    return max(physical_count(spec) for spec in _as_list(specs))


def velocity_ring_max(specs) -> int:
    """Samples of the ring of the device's velocity derivative, the most over a build's configurations
    (``TU_VEL_RING_MAX``): ``2 M + 2`` for a configuration with ``data.velocity_from_position`` (the window of
    ``2 M + 1`` and one more, as a segment needs ``2 M + 2`` samples to give any velocity), 0 for one without;
    0 for a build without (no ``TU_VELOCITY`` code or memory)."""
    return max(2 * spec.velocity.half_width + 2 if spec.velocity is not None else 0 for spec in _as_list(specs))


def _sizes(spec: DeviceSpec) -> dict[str, int]:
    """The sizes of one configuration that bound the instance buffers (the TU_*_MAX of a build)."""
    st, sizes = spec.stream, spec.field.mlp.sizes
    taps = 2 * st.half_width + 1
    return {
        "N": len(spec.system.state_names), "NU": spec.field.n_inputs,
        "CH": spec.field.n_states + spec.field.n_inputs, "NUM_LAYERS": len(sizes) - 1, "WIDTH": max(sizes),
        "NUM_PARAMS": network_parameters(spec), "TAPS": taps, "CAL_LEN": st.calibration_ticks(spec.fs),
        "RING_LEN": (taps - 1) * st.m_max + (st.m_max if st.tap_average else 1),
        "GATE_HISTORY": st.gate_history, "CAPACITY": st.capacity, "JET_ROWS": 3 if st.lambda2 > 0 else 2,
        "TRAIN_EVERY": round(spec.fs / spec.train_rate),  # (the stream readers' chunks, not the instance)
    }


def build_maxima(specs) -> dict[str, int]:
    """The elementwise maxima of the sizes over a build's configurations (``TU_*_MAX`` of the generated
    ``tu_config.h``): every buffer of the instance is sized by them, so one instance type serves every
    configuration of the image (a configuration smaller in one size leaves that part unused)."""
    sizes = [_sizes(spec) for spec in _as_list(specs)]
    return {key: max(s[key] for s in sizes) for key in sizes[0]}


def reservoir_half(specs) -> bool:
    """Whether a build's reservoir stores binary16 (``model.stream.reservoir_precision: float16``; the
    instance has one reservoir type, so every configuration of an image must agree).

    Raises:
        ValueError: for a build whose configurations mix float32 and float16 storage.
    """
    precisions = {spec.stream.reservoir_precision for spec in _as_list(specs)}
    if len(precisions) > 1:
        raise ValueError(f"the configurations of one build store their reservoirs in {sorted(precisions)}; the trainer "
                         f"instance has one reservoir type: give them all the same model.stream.reservoir_precision.")
    return precisions == {"float16"}


def _value_bytes(specs) -> int:
    """Bytes of one stored jet value: 4 (float32) or 2 (float16 storage)."""
    return _F16 if reservoir_half(specs) else _F32


def static_bytes(spec, capacity: int | None = None) -> int:
    """``sizeof(tu_trainer)`` of the C build of ``spec``, or of a list of settings (one image, the
    buffers sized by their maxima, `build_maxima`), with reservoir ``capacity`` if given.

    The layout of ``tu_trainer``: the 8-byte members first (magic and state, the configuration pointer
    in 8 bytes, two PCG32 generators, tick, seen, update count, 13 counters), then 4-byte ones only, so
    nothing is padded inside; the struct is rounded up to 8 bytes. With a trust envelope (``TU_ENVELOPE``) the
    span of the jets, 2 ch floats, precedes the digest. The reservoir shares its memory with the
    calibration record (a union); a jet value takes 4 bytes (float32 storage) or 2 (float16 storage,
    ``model.stream.reservoir_precision``), so with float16 the record may be the larger member; a build that
    streams the record again (``TU_CAL_REPLAY``) gives it its own memory after the reservoir and keeps its ticks
    (8 bytes a sample) among the 8-byte members. With the
    device's velocity derivative (``TU_VELOCITY``) the newest pushed tick joins the 8-byte members and the ring of
    ``TU_VEL_RING_MAX`` pushed samples and four counts precede the digest.
    """
    mx = build_maxima(spec)
    n, ch = mx["N"], mx["CH"]                                    # stream channels: states, then inputs
    capacity = mx["CAPACITY"] if capacity is None else capacity
    cal_len, params, rows = mx["CAL_LEN"], mx["NUM_PARAMS"], mx["JET_ROWS"]
    head = 8 + 8 + 2 * 16 + 3 * 8 + _COUNTERS * 8                # magic .. counters, the configuration pointer
    stream = 4 * 4 + (4 * ch + 7) * _F32                         # have_last .. cal_fill, tu_calibration
    ring = mx["RING_LEN"] * ch * _F32 + 2 * 4                     # ring, head, run
    gate = mx["GATE_HISTORY"] * ch * _F32 + 2 * 4                 # history, head, count
    record = cal_len * ch * _F32 + _round_up(2 * cal_len, 4) + cal_len * _F32  # y, flags, scratch
    reservoir = capacity * rows * ch * _value_bytes(spec)
    replay = any(s.stream.calibration_replay for s in _as_list(spec))
    union = reservoir + record + cal_len * 8 if replay else max(reservoir, record)
    weights = params + physical_max(spec)                         # the network's, then theta (TU_PHYSICAL)
    network = (5 * weights + ch + n + 4) * _F32 + 4               # weights .. EMA, scales, last losses, digest
    span = 2 * ch * _F32 if any(s.envelope for s in _as_list(spec)) else 0  # the envelope's span (TU_ENVELOPE)
    vel = velocity_ring_max(spec)
    velocity = 8 + vel * ch * _F32 + 4 * 4 if vel else 0         # tick, ring, head, count, segment, runs
    return _round_up(head + stream + ring + gate + union + network + span + velocity, 8)


def member_sizes(gen: str | Path) -> dict[str, int]:
    """The compiler's ``sizeof`` of the trainer built from the generated headers in ``gen``, member by member: the
    host build of ``support/tu_sizes.c``, run.

    Returns:
        Bytes of ``total`` (``sizeof(tu_trainer)``, `static_bytes`), ``reservoir``, ``calibration_record`` (in the
        reservoir's memory: a union, unless the build replays the calibration), ``weights``, ``gradient``,
        ``adam_exp_avg``, ``adam_exp_avg_sq``, ``ema``, ``ring``, ``gate_history``, ``calibration``, ``counters``,
        ``prng`` and ``other`` (the rest); and the build's ``capacity``, ``n``, ``params``, ``m_max`` and
        ``gate_history_windows``.

    Raises:
        microcontroller.build.BuildError: if the program does not compile.
    """
    exe = build(gen, "program", [ROOT / "support" / "tu_sizes.c"])
    return json.loads(subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout)


def firmware_ram() -> int:
    """The RAM of the Cortex-M4F firmware's target (``targets/cortex_m4/mps2_an386.ld``), bytes."""
    text = (ROOT / "targets" / "cortex_m4" / "mps2_an386.ld").read_text()
    found = re.search(r"^\s*RAM\s*\(\w+\)\s*:\s*ORIGIN\s*=\s*\w+\s*,\s*LENGTH\s*=\s*(\d+)\s*([KM]?)", text, re.M)
    if found is None:
        raise RuntimeError("targets/cortex_m4/mps2_an386.ld declares no RAM region; restore its MEMORY block.")
    return int(found.group(1)) * {"": 1, "K": 1024, "M": 1024 * 1024}[found.group(2)]


def default_ram_budget() -> int:
    """The Cortex-M4F firmware's budget for the trainer: its RAM less `FIRMWARE_RESERVE`."""
    return firmware_ram() - FIRMWARE_RESERVE


def check_ram(spec, budget: int) -> int:
    """Refuse a configuration (or a list of them, one image) whose trainer exceeds ``budget`` bytes of
    static RAM.

    Returns:
        ``static_bytes(spec)``.

    Raises:
        ValueError: naming the bytes needed, the budget and the largest reservoir capacity
            that fits (none if even the empty reservoir's neighbours do not fit).
    """
    need = static_bytes(spec)
    if need <= budget:
        return need
    specs = _as_list(spec)
    mx = build_maxima(specs)
    batch = max(s.batch_size for s in specs)
    lo, hi = 0, mx["CAPACITY"]  # the largest capacity that fits: static_bytes grows with it
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if static_bytes(specs, mid) <= budget else (lo, mid - 1)
    slot = mx["JET_ROWS"] * mx["CH"] * _value_bytes(specs)
    fits = (f"lower model.stream.capacity to at most {lo:,}" if lo >= batch else
            "no reservoir of one minibatch fits: shorten model.stream.calibration_s or lower model.stream.m_max")
    if not reservoir_half(specs) and lo >= batch:
        fits += " (or store it in float16: model.stream.reservoir_precision float16)"
    raise ValueError(
        f"the C trainer needs {need:,} bytes of static RAM (a reservoir of B = {mx['CAPACITY']:,} jets of {slot} bytes "
        f"each), more than the target's budget of {budget:,} bytes; {fits}, or give the target's budget with "
        f"--ram-budget BYTES (default: the Cortex-M4F firmware's {firmware_ram():,} bytes of RAM less "
        f"{FIRMWARE_RESERVE:,} for its stack and buffers).")

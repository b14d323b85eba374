"""Golden vectors for the C trainer's tests, made by the Python reference in float32.

Each stage of the C port is compared with the torch_ude code it mirrors, run in float32
(the device's precision): PCG32, the Savitzky-Golay estimates and misfit, the generated known
field and its Jacobians (J_x, and J_u for a plant with recorded inputs) against the plant's Python field, the MLP's
forward / JVP / VJP / reverse-over-JVP, the jet loss gradient (Eq. 14-16), clipping, AdamW
and the EMA, the misfit gate, the float16 reservoir's storage (`torch_ude.reservoir.stored_jets`),
and a whole run (calibration, stream counters, updates,
weights) driven by the same stream and the same PCG32 draws (`reference_run`). For a plant with
recorded inputs every stream-side golden covers the states and the inputs (``n + n_u`` channels),
the network's goldens its ``n + n_u`` inputs, and the jet loss takes ``u`` and ``udot``. With the
residual's linear term (``model.linear``, and the input-affine residual) the network's goldens
start from a random ``L`` (it is zero at the start of a run) and every flat weight array ends with it. With
trained physical parameters of the known model the jet stage and the known field's goldens are at a random ``theta``
inside its bounds (``plant_theta``), and the jet gradient and the run's weights end with ``theta``. For a
position-only log (``spec.velocity``) the stream holds the positions and the inputs, `device_velocities` derives the
velocities as the device does (float32, its order of operations) and the run's goldens end with the newest stream
samples the trainer's ring holds (``run_ring``); with trained physical parameters the run's goldens
also hold the float64 standard errors and end-of-run refit of ``theta`` on the reference's buffer (`physical_fit`).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

from torch_ude.calibration import noise_adaptive_weight_decay
from torch_ude.field import HybridField
from torch_ude.gate import QualityGate
from torch_ude.jet import JetLoss
from torch_ude.physical import physical_report, refit_physical_parameters
from torch_ude.prng import STREAM_BATCH, Pcg32
from torch_ude.reservoir import jet_arguments, stored_jets
from torch_ude.savgol import SavitzkyGolay
from torch_ude.stream import StreamEstimator
from torch_ude.training.data import StreamDataModule
from torch_ude.update import apply_calibration, due_updates, flatten_parameters, jet_update

from . import headers
from .generate import DeviceSpec, _quiet_cli
from .memory import _sizes

__all__ = ["ReferenceRun", "reference_run", "stage_goldens", "chunks", "device_velocities", "data_module",
           "data_stream", "golden_stream", "run_goldens", "physical_fit"]

F32 = torch.float32


def _t(a) -> torch.Tensor:
    return torch.as_tensor(np.asarray(a), dtype=F32)


def stage_goldens(spec: DeviceSpec, seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs and expected outputs of each stage (float32), keyed by name for the C tests."""
    rng = np.random.default_rng(seed)
    n, n_u, out = spec.field.n_states, spec.field.n_inputs, {}
    ch = n + n_u  # stream channels: the states, then the recorded inputs
    # PCG32
    pcg = Pcg32(42, 54)
    out["prng_next"] = np.array([pcg.next_u32() for _ in range(8)])
    out["prng_below"] = np.array([pcg.below(b) for b in (1, 7, 1000, 2**31 + 5, 4096, 3)])
    # Savitzky-Golay estimates, misfit, centre residual
    st = spec.stream
    sg = SavitzkyGolay(st.half_width, st.order, dtype=F32)
    win = _t(rng.normal(size=(8, ch, sg.taps)).cumsum(axis=2))
    dt = 0.034
    x, xd, xdd = sg.estimate(win, dt)
    out |= {"sg_windows": win, "sg_dt": np.array([dt]), "sg_x": x, "sg_xdot": xd, "sg_xddot": xdd,
            "sg_misfit": sg.misfit(win), "sg_rms": torch.sqrt((win * win).mean(dim=2)),
            "sg_centre": sg.centre_residual(win)}
    # the MLP's derivatives at the generated initial weights
    field = copy.deepcopy(spec.field).to(F32)
    mlp = field.mlp
    if mlp.linear:  # L starts at zero: give it values, so that every stage below exercises it
        with torch.no_grad():
            mlp.linear_weight.copy_(_t(rng.normal(size=tuple(mlp.linear_weight.shape)) * 0.3))
    z, zdot = (_t(rng.normal(size=(4, mlp.sizes[0]))) for _ in range(2))
    obar, tbar = (_t(rng.normal(size=(4, n))) for _ in range(2))
    acts = mlp.activations(z)
    tan = mlp.jvp(acts, zdot)
    flat = lambda grads: torch.cat([g.flatten() for g in grads])  # noqa: E731
    out |= {"mlp_params": flat(mlp.ordered_parameters()), "mlp_z": z, "mlp_zdot": zdot, "mlp_obar": obar,
            "mlp_tbar": tbar, "mlp_out": acts.output, "mlp_jvp": tan.output, "mlp_vjp": mlp.vjp_input(acts, obar),
            "mlp_grad": flat(mlp.backward(acts, obar)), "mlp_grad_tangent": flat(mlp.backward(acts, obar, tan, tbar))}
    # the jet loss and its gradient at calibrated-looking scales (and trained physical parameters inside their
    # bounds, so that the generated functions of theta are checked away from theta = 0)
    if field.physical:
        known = field.known
        with torch.no_grad():
            s = known.spans().to(F32)
            low, high = (known.p_low - known.p0) / s, (known.p_high - known.p0) / s
            known.theta.copy_(low + (high - low) * _t(rng.uniform(0.25, 0.75, size=len(known.trainable_names))))
    input_scale = _t([0.3 + 0.2 * k for k in range(n_u)]) if n_u else None
    field.set_scales(_t([0.6, 2.0][:n] + [1.0] * (n - 2)), _t([2.0, 5.3][:n] + [8.0] * (n - 2)), input_scale)
    xs = _t(rng.normal(size=(spec.batch_size, n)) * 0.7)
    us, udots = (_t(rng.normal(size=(spec.batch_size, n_u)) * s) for s in (0.4, 1.5))  # (B, 0) without inputs
    # targets near the field: the true field of a simulated plant, the known one of a recorded plant
    near = spec.system.true_field().to(F32)(xs) if not n_u else copy.deepcopy(spec.field.known).to(F32)(xs, us)
    xdots = near + _t(rng.normal(size=(spec.batch_size, n)) * 0.05)
    xddots = _t(rng.normal(size=(spec.batch_size, n)) * 3.0)
    s1, s2 = _t([2.0, 5.3][:n] + [8.0] * (n - 2)), _t([5.2, 17.8][:n] + [30.0] * (n - 2))
    scales = field.in_scale if not n_u else torch.cat([field.in_scale, field.input_scale])
    out |= {"jet_params": flat(field.parameters_list()), "jet_x": xs, "jet_xdot": xdots, "jet_xddot": xddots,
            "jet_u": us, "jet_udot": udots, "jet_in": scales,
            "jet_out": field.out_scale, "jet_s1": s1, "jet_s2": s2}
    inputs = {"u": us, "udot": udots} if n_u else {}
    for name, lam2 in (("jet0", 0.0), ("jet2", 0.1)):
        res = JetLoss(s1, s2, 1.0, lam2).value_and_grad(field, xs, xdots, xddots, report_r2=True, **inputs)
        out |= {f"{name}_sq1": res.loss_r1.reshape(1), f"{name}_sq2": res.loss_r2.reshape(1),
                f"{name}_grad": flat(res.grads)}
    # clipping, AdamW (the trainers' fused implementation) and the EMA over three steps
    params = [p.detach().clone().requires_grad_(True) for p in mlp.ordered_parameters()]
    opt = torch.optim.AdamW(params, lr=5e-3, weight_decay=0.05, fused=True)
    ema = [p.detach().clone() for p in params]
    grads_in, norms = [], []
    for k in range(3):
        grads = [_t(rng.normal(size=p.shape)) * (3.0 if k == 0 else 0.1) for p in params]
        grads_in.append(flat(grads))
        for p, g in zip(params, grads):
            p.grad = g.clone()
        norms.append(torch.nn.utils.clip_grad_norm_(params, 5.0))
        opt.step()
        with torch.no_grad():
            for e, p in zip(ema, params):
                e.copy_(p) if k == 0 else e.lerp_(p, 1.0 - 0.995)
    out |= {"adam_grads": torch.stack(grads_in), "adam_norms": torch.stack(norms), "adam_params": flat(params),
            "adam_exp_avg": flat(opt.state[p]["exp_avg"] for p in params),
            "adam_exp_avg_sq": flat(opt.state[p]["exp_avg_sq"] for p in params), "adam_ema": flat(ema)}
    # the misfit gate on a sequence with outliers
    misfit = _t(np.abs(rng.normal(size=(300, ch))) * 0.01)
    misfit[rng.integers(0, 300, 20)] *= 40.0
    rms = _t(np.abs(rng.normal(size=(300, ch))) + 0.5)
    gate = QualityGate(ch, st.gate_factor, st.gate_floor, st.gate_history, st.quality_gate, dtype=F32)
    out |= {"gate_misfit": misfit, "gate_rms": rms,
            "gate_accept": np.array([bool(gate.check(misfit[i : i + 1], rms[i : i + 1])[0]) for i in range(300)])}
    # the float16 reservoir's storage (stream.reservoir_precision): jets over eleven decades in units of
    # per-channel scales, a few past binary16's range (they become +-inf)
    jets = rng.normal(size=(400, 3, ch)) * 10.0 ** rng.uniform(-7.0, 4.0, size=(400, 3, ch))
    jets[:4] *= 1e4
    store_scale = _t(np.abs(rng.normal(size=ch)) + 0.2)
    out |= {"store_jets": _t(jets), "store_scale": store_scale, "store_values": stored_jets(_t(jets), store_scale)}
    # the known field and its hand-written Jacobians J_x, J_u (what the generated C replaces), at the jet stage's
    # physical parameters when it trains them
    known = copy.deepcopy(field.known)
    px, pu = _t(rng.normal(size=(32, n)) * 1.5), _t(rng.normal(size=(32, n_u)) * 0.5)
    if n_u:
        out |= {"plant_f": known(px, pu), "plant_jac": known.jacobian(px, pu), "plant_ju": known.input_jacobian(px, pu)}
    else:
        out |= {"plant_f": known(px), "plant_jac": known.jacobian(px), "plant_ju": torch.zeros(32, n, 0)}
    out |= {"plant_x": px, "plant_u": pu, **({"plant_theta": known.theta} if field.physical else {})}
    return {k: (v.detach().numpy() if isinstance(v, torch.Tensor) else v) for k, v in out.items()}


@dataclass
class ReferenceRun:
    """The outcome of `reference_run`.

    Attributes:
        stream: the float32 `StreamEstimator` after the run (calibration, counters, buffer).
        ema_weights: the EMA weights (the raw ones without EMA), flat float32 array.
        raw_weights: the raw weights, flat float32 array.
        updates: updates made; skipped: updates skipped.
        field: the trained float32 field with the EMA weights (the raw ones without EMA) and the
            calibrated scales: the Python trainer's model, to score beside the C trainer's.
    """

    stream: StreamEstimator
    ema_weights: np.ndarray
    raw_weights: np.ndarray
    updates: int
    skipped: int
    field: HybridField


def chunks(ticks: np.ndarray, train_every: int) -> list[slice]:
    """The stream's chunks: runs of samples in one training tick (``tick // train_every``)."""
    block = np.asarray(ticks) // train_every
    edges = np.flatnonzero(np.diff(block)) + 1
    bounds = [0, *edges.tolist(), len(block)]
    return [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def device_velocities(spec: DeviceSpec, y: np.ndarray, ticks: np.ndarray, segment: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The stream the device's velocity derivative gives for a pushed stream (``TU_VELOCITY``, tu_trainer.h), in
    float32 as the C code computes it: runs of consecutive ticks of one segment id (a tick that does not increase
    dropped), in each run of at least ``2 M + 2`` samples every sample with ``M`` on both sides, its velocities
    ``sum_j row_j q_(k - M + j)`` summed oldest first with the generated float32 row (`headers.velocity_row`).
    `torch_ude.position_only.with_velocities` of each run is the same in float64.

    Args:
        spec: settings with ``velocity``.
        y, ticks, segment: the pushed stream (k, p + n_u): the positions, then the inputs (float32), (k,), (k,).

    Returns:
        ``(y (j, 2 p + n_u) float32: positions, velocities, inputs; ticks (j,): the centre samples' ticks;
        segment (j,): the run's index; source (j,): the index of the pushed sample that released it)``.
    """
    m = spec.velocity.half_width
    row = headers.velocity_row(spec).numpy()
    y = np.asarray(y, dtype=np.float32)
    p = spec.field.n_states // 2
    keep = _in_order(ticks)
    kt, ks = np.asarray(ticks)[keep], np.asarray(segment)[keep]
    starts = np.flatnonzero(np.r_[True, (np.diff(kt) != 1) | (np.diff(ks) != 0)])
    out, out_ticks, out_segment, source = [], [], [], []
    for run, (a, b) in enumerate(zip(starts, [*starts[1:], len(keep)])):
        if b - a < 2 * m + 2:
            continue
        q = y[keep[a:b], :p]
        acc = np.zeros((b - a - 2 * m, p), dtype=np.float32)
        for j in range(2 * m + 1):  # oldest first, one float32 rounding per product and per sum
            acc = acc + row[j] * q[j: j + b - a - 2 * m]
        core = y[keep[a + m: b - m]]
        out.append(np.concatenate((core[:, :p], acc, core[:, p:]), axis=1))
        out_ticks.append(kt[a + m: b - m])
        out_segment.append(np.full(b - a - 2 * m, run + 1, dtype=np.int64))
        released = keep[a + 2 * m: b].copy()  # a centre k is released by the sample k + M, the first by k + M + 1
        released[0] = keep[a + 2 * m + 1]
        source.append(released)
    if not out:
        p_all = y.shape[1] + p
        return (np.zeros((0, p_all), np.float32), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
    return tuple(np.concatenate(parts) for parts in (out, out_ticks, out_segment, source))


def _in_order(ticks: np.ndarray) -> np.ndarray:
    """The indices of the ticks that increase on every earlier one (the others are dropped as out of order)."""
    ticks = np.asarray(ticks)
    earlier = np.maximum.accumulate(np.r_[np.iinfo(np.int64).min, ticks[:-1]]) if len(ticks) else ticks
    return np.flatnonzero(ticks > earlier)


def _parts(spec: DeviceSpec, y: np.ndarray, ticks: np.ndarray, segment: np.ndarray
           ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The stream as the trainer's stream sees it, in the pieces that go in between two chances to update: the
    chunks of one training tick (`chunks`), or with ``spec.velocity`` the derived samples each chunk of pushed
    samples releases (`device_velocities`; possibly none)."""
    every = round(spec.fs / spec.train_rate)
    pieces = chunks(ticks, every)
    if spec.velocity is None:
        return [(y[part], ticks[part], segment[part]) for part in pieces]
    dy, dt, ds, source = device_velocities(spec, y, ticks, segment)
    return [(dy[sel], dt[sel], ds[sel]) for sel in ((source >= part.start) & (source < part.stop) for part in pieces)]


def reference_run(spec: DeviceSpec, y: np.ndarray, ticks: np.ndarray, segment: np.ndarray,
                  seed: int | None = None) -> ReferenceRun:
    """Algorithm 1 in float32 with the C trainer's PCG32 draws: the reference of a C run.

    The stream goes in chunk by chunk (`chunks`); after each chunk the due updates
    (`torch_ude.update.due_updates`) are made once the reservoir is full, then the
    reservoir is replayed until ``spec.max_steps`` updates, all through
    `torch_ude.update.jet_update`, exactly as the C test and the C backend drive
    ``tu_trainer_push_chunk`` and ``tu_trainer_step``. For a known model that trains physical
    parameters the optimizer is `torch_ude.training.JetMatchingModule`'s: the network's flat
    weights, then ``theta`` in a group that is never decayed, the network's gradient zeroed for the
    first ``physics_first`` share of the updates (`microcontroller.headers.physics_updates`).

    Args:
        spec: the settings the C build was generated from.
        y, ticks, segment: the stream (k, n + n_u): the states, then the recorded inputs, (k,), (k,)
            (y is rounded to float32); with ``spec.velocity`` the pushed stream (k, n / 2 + n_u), whose
            velocities are derived as the device derives them (`device_velocities`).
        seed: the run seed (default ``spec.seed``).

    Returns:
        A `ReferenceRun`.
    """
    seed = spec.seed if seed is None else seed
    n = spec.field.n_states
    est = StreamEstimator(n, spec.fs, copy.deepcopy(spec.stream), seed=seed, dtype=F32, pcg32=True,
                          n_inputs=spec.field.n_inputs)
    field = copy.deepcopy(spec.field).to(F32)
    ema = None if spec.ema_decay is None else AveragedModel(field, multi_avg_fn=get_ema_multi_avg_fn(spec.ema_decay))
    ones = torch.ones(n, dtype=F32)
    loss = JetLoss(ones, ones, spec.lambda1, spec.stream.lambda2)
    groups, weights, physics_updates = field.parameters_list(), None, 0
    if field.physical:  # as JetMatchingModule: the network's flat weights, then theta in a group never decayed
        weights = flatten_parameters(field.mlp.ordered_parameters())
        field.known.theta.grad = torch.zeros_like(field.known.theta)
        groups = [{"params": [weights]}, {"params": [field.known.theta], "weight_decay": 0.0, "physical": True}]
        physics_updates = min(headers.physics_updates(spec), spec.max_steps)
    if spec.weight_decay > 0:
        opt = torch.optim.AdamW(groups, lr=spec.lr, weight_decay=spec.weight_decay, fused=True)
    else:
        opt = torch.optim.Adam(groups, lr=spec.lr, fused=True)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=spec.max_steps, eta_min=spec.lr_min) \
        if spec.cosine else torch.optim.lr_scheduler.ConstantLR(opt, factor=1.0, total_iters=0)
    gen = Pcg32(seed, STREAM_BATCH)
    every = round(spec.fs / spec.train_rate)
    updates = skipped = 0

    def update() -> None:
        nonlocal updates, skipped
        frozen = weights.grad if updates < physics_updates else None  # physics first: the network's gradient zeroed
        res = jet_update(field, loss, est.buffer, spec.batch_size, gen, opt, sched, ema, spec.grad_clip, frozen=frozen)
        skipped += res.skipped
        updates += not res.skipped

    for part_y, part_ticks, part_segment in _parts(spec, np.asarray(y, dtype=np.float32), np.asarray(ticks),
                                                   np.asarray(segment)):
        before, calibrated = est.last_tick, est.calibration is not None
        if len(part_ticks):
            est.push(torch.as_tensor(part_y, dtype=F32), torch.as_tensor(part_ticks), torch.as_tensor(part_segment))
        if not calibrated and est.calibration is not None:
            fields = [field] if ema is None else [field, ema.module]
            apply_calibration(est.calibration, fields, loss, opt, spec.weight_decay, spec.weight_decay_full_at,
                              keep_scales=spec.pretrained)
        for _ in range(due_updates(before, est.last_tick, every) if est.ready else 0):
            update()
    attempts = 0
    while est.buffer is not None and est.buffer.fill >= spec.batch_size and updates < spec.max_steps:
        update()
        attempts += 1
        if attempts > 2 * spec.max_steps:
            break
    flat = lambda f: torch.cat([p.detach().flatten() for p in f.parameters_list()]).numpy()  # noqa: E731
    final = field if ema is None else ema.module
    return ReferenceRun(est, flat(final), flat(field), updates, skipped, final)


def data_module(config: str | Path, overrides: list[str] | None = None):
    """The data module a ``torch-ude`` config builds (with CLI overrides), as ``torch-ude fit`` builds it:
    the plant or the recorded logs of `microcontroller.generate.spec_from_config`'s settings."""
    from torch_ude.cli import main

    with _quiet_cli():
        return main(["--config", str(config), *(overrides or [])], run=False).datamodule


def data_stream(dm) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A data module's whole training stream, its chunks joined: what a device fed by ``dm`` receives.

    Args:
        dm: a `torch_ude.training.StreamDataModule` (a simulated plant) or
            `torch_ude.training.RecordedDataModule` (recorded logs resampled onto ``fs``) before
            its first chunk.

    Returns:
        ``(y (k, n + n_u) float64: the states, then the recorded inputs, ticks (k,) int64, segment (k,) int64)``;
        for a position-only log (``dm.velocity_from_position``) y is (k, n / 2 + n_u): the positions, then the
        inputs, of the logs as read (each of their segments one segment id, consecutive ticks), before the
        velocities that the Python trainer's chunks carry are derived (the device derives them).
    """
    if getattr(dm, "velocity_from_position", None) is not None:
        logs = [dm.read_as_logged(path) for path in dm.files]
        segments = [seg for log in logs for seg in log.segments]
        return (np.concatenate(segments), np.arange(sum(len(seg) for seg in segments)),
                np.concatenate([np.full(len(seg), k, dtype=np.int64) for k, seg in enumerate(segments)]))
    parts = []
    while dm.live:
        c = dm.next_chunk()
        parts.append((c["y"].numpy(), c["ticks"].numpy(), c["segment"].numpy()))
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))


def golden_stream(spec: DeviceSpec, duration: float, noise: float, faults=None, seed: int | None = None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The simulated sensor stream of a trainer with these settings (`data_stream` of its data module).

    Returns:
        ``(y (k, n) float64, ticks (k,) int64, segment (k,) int64)``.
    """
    return data_stream(StreamDataModule(spec.system, spec.case, duration=duration, fs=spec.fs, noise=noise,
                                        train_rate=spec.train_rate, faults=faults,
                                        seed=spec.seed if seed is None else seed))


def physical_fit(ref: ReferenceRun, lambda1: float) -> dict:
    """The Python trainer's end-of-run statistics of a run's trained physical parameters, float64, on its sample
    buffer and its exported field (``ref.field``, the network held at its weights): the standard errors at the
    trained ``theta`` (`torch_ude.physical.physical_report`) and the refit (`refit_physical_parameters`), which
    ``tu_trainer_standard_errors`` and ``tu_trainer_refit`` compute in float32 on the same jets.

    Returns:
        ``{"se": (P,) standard errors in theta's units (the report's over the spans), "theta": (P,) refitted theta,
        "loss": (2,) |r|^2 per jet before and after the refit, "field": the refitted float64 field}``.
    """
    cal, buffer = ref.stream.calibration, ref.stream.buffer
    field = copy.deepcopy(ref.field).to(torch.float64)
    n, d = field.n_states, torch.float64
    loss = JetLoss(cal.s1[:n].to(d), cal.s2[:n].to(d), lambda1, float(cal.lambda2))
    args = jet_arguments(buffer.data[: buffer.fill].to(d), n, bool(field.n_inputs))
    report = physical_report(field, loss, *args)
    spans = field.known.spans().to(d)
    se = np.array([report[name]["standard_error"] for name in field.known.trainable_names]) / spans.numpy()
    refit = refit_physical_parameters(field, loss, *args)
    return {"se": se, "theta": field.known.theta.detach().numpy().copy(),
            "loss": np.array([refit["loss_before"], refit["loss_after"]]), "field": field}


def run_goldens(spec: DeviceSpec, y: np.ndarray, ticks: np.ndarray, segment: np.ndarray) -> dict[str, np.ndarray]:
    """The expected outcome of a whole C run on this stream (`reference_run`), keyed for the C tests; with trained
    physical parameters also their standard errors and refit (`physical_fit`)."""
    ref = reference_run(spec, np.asarray(y, dtype=np.float32), ticks, segment)
    fit = physical_fit(ref, spec.lambda1) if spec.field.physical else None
    phys = {} if fit is None else {"phys_se": fit["se"], "phys_theta": fit["theta"], "phys_loss": fit["loss"],
                                   "phys_evaluations": np.array([headers.refit_evaluations(spec)])}
    c, cal = dict(ref.stream.counters), ref.stream.calibration
    if spec.velocity is not None:  # the derivative drops (and counts) the pushed samples out of order
        c["out_of_order"] += len(ticks) - len(_in_order(ticks))
    order = ("samples", "nonfinite_samples", "out_of_order", "gaps", "long_gaps", "bridged", "windows", "nonfinite",
             "boundary", "misfit", "accepted")
    return {"run_seed": np.array([spec.seed]), "run_counters": np.array([c[k] for k in order]),
            "run_m": np.array([cal.m]), "run_updates": np.array([ref.updates]), "run_sigma": cal.sigma,
            "run_x_rms": cal.x_rms, "run_s1": cal.s1, "run_s2": cal.s2, "run_lambda2": np.array([cal.lambda2]),
            "run_weight_decay": np.array([noise_adaptive_weight_decay(cal.sigma_rel, spec.weight_decay,
                                                                      spec.weight_decay_full_at)]),
            "run_ema": ref.ema_weights, "run_raw": ref.raw_weights,
            "run_span_low": ref.stream.buffer.span()[0], "run_span_high": ref.stream.buffer.span()[1],
            **({"run_ring": _ring_tail(spec, y, ticks, segment)} if spec.velocity is not None else {}), **phys}


def _ring_tail(spec: DeviceSpec, y: np.ndarray, ticks: np.ndarray, segment: np.ndarray) -> np.ndarray:
    """The newest ``ring_len`` derived stream samples, oldest first (`device_velocities`): what the trainer's
    ring holds at the end of the stream (no derived sample is bridged: each run has its own segment id)."""
    ring_len = _sizes(spec)["RING_LEN"]
    return device_velocities(spec, np.asarray(y, dtype=np.float32), ticks, segment)[0][-ring_len:]

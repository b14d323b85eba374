"""The C trainer as a Python object: the host build of the library, called through ctypes.

`CTrainer` builds ``libtu.so`` for a `DeviceSpec` (cached by a hash of the sources and
the generated headers), allocates one ``tu_trainer`` instance in Python memory and forwards
the stream to it. It is the fast backend of ``torch-ude fit`` with the C trainer
(`microcontroller.training.CJetMatchingModule`) and what the benchmarks time. Float32, as
on the device.
"""
from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import torch

from torch_ude.field import HybridField

from .build import build
from .generate import DeviceSpec, headers_for
from .memory import build_maxima

__all__ = ["CTrainer", "report_type", "report_dict", "load_weights", "physical_parameters", "calibration_error",
           "COUNTERS", "STATUS", "CALIBRATION_FAILURES", "DEVICE_STANDARD_ERROR_NOTE"]

COUNTERS = ("samples", "nonfinite_samples", "out_of_order", "gaps", "long_gaps", "bridged", "windows", "nonfinite",
            "boundary", "misfit", "accepted", "calibration_failures", "skipped_updates")
STATUS = {0: "ok", 1: "skipped", -1: "null pointer", -2: "uninitialized", -3: "wrong channel count",
          -4: "calibration failed: no valid window", -5: "not ready", -6: "argument out of range",
          -7: "calibration failed: no complete window at the tap spacing m",
          -8: "calibration failed: a zero or non-finite scale", -9: "the instance's bytes are inconsistent",
          -10: "the configuration does not fit this build, its tables belong to another configuration, or the "
               "checkpoint was saved with another configuration"}
#: The C trainer's calibration failures (``TU_ERR_CAL_*`` in tu_status.h); each stops the trainer.
CALIBRATION_FAILURES = (-4, -7, -8)


def calibration_error(status: int, taps: int, m: int) -> ValueError:
    """The error the Python trainer raises for the same calibration failure
    (`torch_ude.calibration.calibrate`), for a C status of `CALIBRATION_FAILURES`.

    Args:
        status: the C status.
        taps: the Savitzky-Golay taps 2M + 1.
        m: the tap spacing the failed scale estimate used (the report's ``calibration.m``).
    """
    if status == -4:
        return ValueError(f"the calibration record holds no {taps} consecutive valid samples.")
    if status == -7:
        return ValueError(f"the calibration record holds no complete SG window at tap spacing m = {m} "
                          f"({(taps - 1) * m + 1} samples); lengthen the calibration phase.")
    if status == -8:
        return ValueError("calibration produced a zero or non-finite scale; the record shows no motion.")
    raise ValueError(f"C status {status} is not a calibration failure.")


def report_type(n: int, n_inputs: int = 0, channels: int | None = None) -> type[ctypes.Structure]:
    """The ctypes mirror of ``tu_report`` for ``n`` states and ``n_inputs`` recorded inputs (checked
    against ``tu_report_size``): the calibration and the input scales cover all ``n + n_inputs`` channels.
    In a build of several configurations the arrays have the build's maxima: ``n`` is ``TU_N_MAX`` and
    ``channels`` ``TU_CH_MAX`` (default ``n + n_inputs``); `report_dict` keeps a configuration's own."""
    f32n, f32c = ctypes.c_float * n, ctypes.c_float * (n + n_inputs if channels is None else channels)

    class Counters(ctypes.Structure):
        _fields_ = [(name, ctypes.c_uint64) for name in COUNTERS]

    class Calibration(ctypes.Structure):
        _fields_ = [("x_rms", f32c), ("s1", f32c), ("s2", f32c), ("sigma", f32c), ("sigma_rel", ctypes.c_float),
                    ("omega_c", ctypes.c_float), ("dt_eff", ctypes.c_float), ("snr2", ctypes.c_float),
                    ("lambda2", ctypes.c_float), ("weight_decay", ctypes.c_float), ("m", ctypes.c_int)]

    class Report(ctypes.Structure):
        _fields_ = [("counters", Counters), ("calibration", Calibration), ("calibrated", ctypes.c_int32),
                    ("fill", ctypes.c_int32), ("updates", ctypes.c_int64), ("seen", ctypes.c_uint64),
                    ("loss", ctypes.c_float), ("loss_r1", ctypes.c_float), ("loss_r2", ctypes.c_float),
                    ("grad_norm", ctypes.c_float), ("lr", ctypes.c_float), ("in_scale", f32c), ("out_scale", f32n)]

    return Report


def report_dict(rep: ctypes.Structure, n: int | None = None, channels: int | None = None) -> dict:
    """A ``tu_report`` (a `report_type` instance) as plain Python values (per-channel lists cut to a
    configuration's ``n`` states and ``channels`` channels when given)."""
    cal = rep.calibration
    out = {
        "counters": {name: int(getattr(rep.counters, name)) for name in COUNTERS},
        "calibrated": rep.calibrated == 1, "calibration_status": int(min(rep.calibrated, 0)),
        "updates": int(rep.updates), "fill": int(rep.fill),
        "seen": int(rep.seen), "loss": rep.loss, "loss_r1": rep.loss_r1, "loss_r2": rep.loss_r2,
        "grad_norm": rep.grad_norm, "lr": rep.lr, "in_scale": list(rep.in_scale), "out_scale": list(rep.out_scale),
        "calibration": None if rep.calibrated != 1 else {
            "x_rms": list(cal.x_rms), "s1": list(cal.s1), "s2": list(cal.s2), "sigma": list(cal.sigma),
            "sigma_rel": cal.sigma_rel, "omega_c": cal.omega_c, "m": int(cal.m), "dt_eff": cal.dt_eff,
            "snr2": cal.snr2, "lambda2": cal.lambda2, "weight_decay": cal.weight_decay},
    }
    if channels is not None:
        out["in_scale"] = out["in_scale"][:channels]
        for key in ("x_rms", "s1", "s2", "sigma"):
            if out["calibration"] is not None:
                out["calibration"][key] = out["calibration"][key][:channels]
    if n is not None:
        out["out_scale"] = out["out_scale"][:n]
    return out


def load_weights(field: HybridField, weights: np.ndarray, in_scale, out_scale) -> HybridField:
    """Write the C trainer's flat weights (`HybridField.parameters_list` order) and scales into ``field``
    (``in_scale``: the states' scales, then the inputs' for a field with inputs)."""
    flat = torch.as_tensor(np.asarray(weights), dtype=field.in_scale.dtype)
    if flat.numel() != field.num_parameters():
        raise ValueError(f"the C trainer holds {flat.numel()} weights; the field has {field.num_parameters()}.")
    with torch.no_grad():
        offset = 0
        for p in field.parameters_list():
            p.copy_(flat[offset: offset + p.numel()].reshape(p.shape))
            offset += p.numel()
    scales = torch.tensor(in_scale, dtype=field.in_scale.dtype)
    n = field.n_states
    field.set_scales(scales[:n], torch.tensor(out_scale, dtype=field.out_scale.dtype),
                     scales[n:] if field.n_inputs else None)
    return field


#: How to read a C trainer's standard errors (`physical_parameters`), recorded beside them.
DEVICE_STANDARD_ERROR_NOTE = ("trained by the C trainer (float32 EMA, refitted where the run exports its physics "
                              "alone); float32 Gauss-Newton standard errors on its reservoir's jets, conditional on "
                              "the network; neighbouring jets share samples, so they understate the uncertainty.")


def physical_parameters(field: HybridField, standard_errors: np.ndarray | None) -> dict | None:
    """The trained physical parameters of ``field`` as `torch_ude.physical.physical_report` lists them, with the C
    trainer's standard errors (``tu_trainer_standard_errors``: (P,) in theta's units, times each span ``s`` here;
    None: unknown, ``None`` each); None when the field trains none."""
    if not field.physical:
        return None
    known, values = field.known, field.known.values()
    spans = known.spans().double().numpy()
    out = {name: {"value": values[name], "initial": float(known.p0[i]), "low": float(known.p_low[i]),
                  "high": float(known.p_high[i]),
                  "standard_error": None if standard_errors is None else float(spans[i] * standard_errors[i])}
           for i, name in enumerate(known.trainable_names)}
    out["note"] = DEVICE_STANDARD_ERROR_NOTE
    return out


class _RefitReport(ctypes.Structure):
    _fields_ = [("loss_before", ctypes.c_float), ("loss_after", ctypes.c_float), ("evaluations", ctypes.c_int32),
                ("converged", ctypes.c_int32)]


class CTrainer:
    """One C trainer instance for ``spec`` (see ``microcontroller/include/tu_trainer.h``).

    Args:
        spec: the generator's settings (plant, network, stream, optimizer).
        seed: the PCG32 seed (default ``spec.seed``).
        build_root: folder for the generated headers and the shared library.
        image: the settings of every configuration of the build (one library, a trainer configuration
            each; ``spec`` must be one of them, by settings hash), default ``[spec]``. Instances of
            one image share its library; the instance's buffers have the image's maxima.

    Attributes:
        static_bytes: ``sizeof(tu_trainer)``, all the memory the trainer uses besides its stack.

    Raises:
        microcontroller.build.BuildError: if the library does not compile.
    """

    def __init__(self, spec: DeviceSpec, seed: int | None = None, build_root: str | Path | None = None,
                 image: list[DeviceSpec] | None = None) -> None:
        image = [spec] if image is None else list(image)
        hashes = [s.config_hash() for s in image]
        if spec.config_hash() not in hashes:
            raise ValueError(f"spec (settings hash {spec.config_hash()}) is not one of the image's configurations "
                             f"{hashes}; pass it in image.")
        self.spec = spec
        self.n = spec.field.n_states
        self.channels = self.n + spec.field.n_inputs  # the stream: the states, then the recorded inputs
        self.pushed = spec.push_channels()  # a pushed sample: the states (or only the positions), then the inputs
        self.num_params = spec.field.num_parameters()
        self.library = build(headers_for(image, build_root), "shared")
        lib = ctypes.CDLL(str(self.library))
        lib.tu_config_get.restype = ctypes.c_void_p
        lib.tu_config_get.argtypes = [ctypes.c_int]
        self._config = lib.tu_config_get(hashes.index(spec.config_hash()))
        maxima = build_maxima(image)
        f32p = np.ctypeslib.ndpointer(np.float32, flags="C_CONTIGUOUS")
        lib.tu_trainer_size.restype = lib.tu_report_size.restype = ctypes.c_size_t
        lib.tu_trainer_init.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64]
        lib.tu_trainer_restore.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        # push_chunk runs once per chunk: plain addresses (checked in push_chunk) keep its call cheap
        lib.tu_trainer_push_chunk.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                              ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
        lib.tu_trainer_steps.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
        lib.tu_trainer_weights.argtypes = [ctypes.c_void_p, ctypes.c_int, f32p, ctypes.c_int]
        lib.tu_trainer_report.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        lib.tu_trainer_span.argtypes = [ctypes.c_void_p, f32p, f32p, ctypes.c_int]
        lib.tu_trainer_ready.argtypes = [ctypes.c_void_p]
        self.num_physical = len(spec.field.known.trainable_names) if spec.field.physical else 0
        if self.num_physical:  # (declared only in a build with TU_PHYSICAL)
            lib.tu_trainer_refit.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
            lib.tu_trainer_standard_errors.argtypes = [ctypes.c_void_p, f32p, ctypes.c_int]
        self._lib = lib
        self._report_type = report_type(maxima["N"], 0, maxima["CH"])
        if ctypes.sizeof(self._report_type) != lib.tu_report_size():
            raise RuntimeError("microcontroller.ctrainer.report_type disagrees with tu_report in tu_trainer.h; "
                               "update one to match the other.")
        self.static_bytes = int(lib.tu_trainer_size())
        self._memory = ctypes.create_string_buffer(self.static_bytes)
        self._count = ctypes.c_int(0)  # the out-argument of push_chunk and steps
        self._count_at = ctypes.addressof(self._count)
        self._check(lib.tu_trainer_init(self._memory, self._config, spec.seed if seed is None else int(seed)), "init")

    def _check(self, status: int, what: str) -> int:
        if status < 0:
            raise RuntimeError(f"tu_trainer_{what} returned {status} ({STATUS.get(status, 'unknown')}).")
        return status

    def push_chunk(self, y: np.ndarray, ticks: np.ndarray, segment: np.ndarray | None = None) -> int:
        """Ingest samples (k, n + n_u): states, then recorded inputs (with ``spec.velocity`` (k, n / 2 + n_u): the
        positions, then the inputs; the trainer derives the velocities), with their ticks (k,) and segment
        ids (k,); returns the updates due.

        Raises:
            ValueError: for arrays of the wrong shape, and when the calibration fails: the C
                trainer then stops, and the message is the Python trainer's for the same cause
                (`calibration_error`).
        """
        y = np.ascontiguousarray(y, dtype=np.float32)
        k = y.shape[0]
        ticks = np.ascontiguousarray(ticks, dtype=np.int64)
        segment = np.ascontiguousarray(np.zeros(k) if segment is None else segment, dtype=np.int32)
        if y.ndim != 2 or y.shape[1] != self.pushed or ticks.shape != (k,) or segment.shape != (k,):
            raise ValueError(f"push_chunk needs y of shape (k, {self.pushed}) and ticks, segment of shape (k,); got "
                             f"{y.shape}, {ticks.shape}, {segment.shape}.")
        self._count.value = 0
        status = self._lib.tu_trainer_push_chunk(self._memory, k, ticks.ctypes.data, segment.ctypes.data,
                                                 y.ctypes.data, self.pushed, self._count_at)
        if status in CALIBRATION_FAILURES:
            raise calibration_error(status, 2 * self.spec.stream.half_width + 1, self._report_raw().calibration.m)
        self._check(status, "push_chunk")
        return self._count.value

    def steps(self, count: int) -> int:
        """Make up to ``count`` updates; returns how many were applied (the skipped ones, for a
        non-finite loss or gradient, are counted in ``report()["counters"]["skipped_updates"]``)."""
        self._count.value = 0
        status = self._lib.tu_trainer_steps(self._memory, int(count), self._count_at)
        if status not in (0, 1, -5, *CALIBRATION_FAILURES):
            self._check(status, "steps")
        return self._count.value

    def replay(self, y: np.ndarray, ticks: np.ndarray, segment: np.ndarray) -> CTrainer:
        """A whole stream as the firmware's ``replay`` trains on it (``support/tu_replay.c``), here on the host:
        chunk by chunk (the samples of one training tick, `microcontroller.golden.chunks`) with each chunk's due
        updates, then updates on the reservoir up to ``spec.max_steps``. The same sources on the same stream: the
        emulated cores train these weights to float32 rounding of the libm.

        Args:
            y, ticks, segment: the stream as `push_chunk` takes it, (k, n + n_u), (k,), (k,).

        Returns:
            This trainer, after the run (`weights`, `report`).
        """
        from .golden import chunks  # (golden imports the Python trainer's modules: only when a stream is replayed)

        for part in chunks(ticks, round(self.spec.fs / self.spec.train_rate)):
            self.steps(self.push_chunk(y[part], ticks[part], segment[part]))
        self.steps(self.spec.max_steps - self.report()["updates"])
        return self

    @property
    def ready(self) -> bool:
        """True once the reservoir is full (False before, and after a failed calibration).

        Raises:
            RuntimeError: for an instance the C library refuses (uninitialized, corrupt).
        """
        status = self._lib.tu_trainer_ready(self._memory)
        if status < 0 and status not in CALIBRATION_FAILURES:
            self._check(status, "ready")
        return status > 0

    def _report_raw(self) -> ctypes.Structure:
        rep = self._report_type()
        self._check(self._lib.tu_trainer_report(self._memory, ctypes.byref(rep)), "report")
        return rep

    def report(self) -> dict:
        """Counters, calibration (``calibration_status``: 0, or the C status of the failure that
        stopped it), update count, reservoir fill, the last update's loss terms, scales."""
        return report_dict(self._report_raw(), self.n, self.channels)

    def weights(self, ema: bool = True) -> np.ndarray:
        """The weights in `HybridField.parameters_list` order, flat float32: the EMA (or raw) ones."""
        out = np.empty(self.num_params, dtype=np.float32)
        self._check(self._lib.tu_trainer_weights(self._memory, int(ema), out, self.num_params), "weights")
        return out

    def span(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The trust envelope's span (``tu_trainer_span``): the smallest and largest value of each channel,
        states then inputs, over the value row of every jet offered to the reservoir, float32 (n + n_u,) each
        in the channels' units (+inf and -inf before the first jet, as `torch_ude.reservoir.SampleBuffer.span`);
        None for a build without an envelope (``spec.envelope`` False in every configuration)."""
        low, high = np.empty(self.channels, dtype=np.float32), np.empty(self.channels, dtype=np.float32)
        status = self._lib.tu_trainer_span(self._memory, low, high, self.channels)
        if status == -10:
            return None
        self._check(status, "span")
        return low, high

    def refit(self, max_evaluations: int) -> dict:
        """The end-of-run refit of the trained physical parameters (``tu_trainer_refit``): theta of the exported
        (EMA) weights moved to the minimum of the jet loss over the reservoir, the network held. Call it after the
        last update.

        Returns:
            ``{"loss_before", "loss_after"}`` (|r|^2 per jet), ``"evaluations"``, ``"converged"``, as
            `torch_ude.physical.refit_physical_parameters` reports them.

        Raises:
            ValueError: for a trainer without physical parameters.
            RuntimeError: before calibration, with an empty reservoir, or for a non-finite loss.
        """
        if not self.num_physical:
            raise ValueError("CTrainer.refit needs a configuration that trains physical parameters; this one trains "
                             "none (data.known.init_args.trainable).")
        rep = _RefitReport()
        self._check(self._lib.tu_trainer_refit(self._memory, int(max_evaluations), ctypes.byref(rep)), "refit")
        return {"loss_before": float(rep.loss_before), "loss_after": float(rep.loss_after),
                "evaluations": int(rep.evaluations), "converged": bool(rep.converged)}

    def standard_errors(self) -> np.ndarray | None:
        """The Gauss-Newton standard errors of theta at the exported weights (``tu_trainer_standard_errors``),
        float32 (P,) in theta's units (NaN where the jets do not determine a parameter), or None for a trainer
        without physical parameters, before calibration or with an empty reservoir."""
        if not self.num_physical:
            return None
        out = np.empty(self.num_physical, dtype=np.float32)
        status = self._lib.tu_trainer_standard_errors(self._memory, out, self.num_physical)
        if status == -5:
            return None
        self._check(status, "standard_errors")
        return out

    def state_bytes(self) -> bytes:
        """The whole instance as bytes (a checkpoint; `load_state_bytes` restores it exactly)."""
        return self._memory.raw

    def load_state_bytes(self, state: bytes) -> None:
        """Restore an instance saved by `state_bytes` from a trainer of the same build
        (``tu_trainer_restore``: every index, size and weight is checked).

        Raises:
            ValueError: for bytes of another size, or bytes the C library finds inconsistent
                (a damaged checkpoint); the instance is then uninitialized.
        """
        if len(state) != self.static_bytes:
            raise ValueError(f"the saved C trainer has {len(state)} bytes; this build's has {self.static_bytes}.")
        status = self._lib.tu_trainer_restore(self._memory, self._config, bytes(state), self.static_bytes)
        if status == -9:
            raise ValueError("the saved C trainer's bytes are inconsistent (an index, a count or a weight out of "
                             "range: a damaged checkpoint); resume from another checkpoint or start afresh.")
        if status == -10:
            raise ValueError("the saved C trainer was trained with another configuration (its settings but the "
                             f"schedule's length differ from those of {self.spec.config_hash()}); restore it into a "
                             "trainer of that configuration.")
        self._check(status, "restore")

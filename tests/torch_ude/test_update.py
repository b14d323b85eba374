"""The update's lean housekeeping is bit for bit torch's: clipping, EMA, flat buffers, whole runs."""
import copy
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

import torch_ude
import torch_ude.training.module as module_mod
import torch_ude.update as update_mod
from torch_ude import HybridField, SinglePendulum
from torch_ude.cli import main
from torch_ude.update import (ExponentialAverage, clip_grad_norm, flat_view, flatten_parameters, link_gradients,
                              optimizer_step)

CONFIG = Path(torch_ude.__file__).resolve().parents[1] / "configs" / "pendulum_case_a.yaml"


def _field(dtype: torch.dtype) -> HybridField:
    return HybridField.from_seed(SinglePendulum().known_field("A"), 3).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e3, float("inf"), float("nan")])
def test_clip_grad_norm_is_torchs_bit_for_bit(dtype, scale):
    gen = torch.Generator().manual_seed(7)
    a, b = _field(dtype).parameters_list(), _field(dtype).parameters_list()
    for p, q in zip(a, b):
        p.grad = torch.randn(p.shape, generator=gen, dtype=dtype) * scale
        q.grad = p.grad.clone()
    ours, theirs = clip_grad_norm(a, 5.0), torch.nn.utils.clip_grad_norm_(b, 5.0)
    assert torch.equal(ours, theirs) or (ours.isnan() and theirs.isnan())
    for p, q in zip(a, b):
        assert torch.equal(p.grad, q.grad) or (p.grad.isnan().all() and q.grad.isnan().all())
    if scale == 1e3:  # it clipped
        assert float(torch.linalg.vector_norm(torch.cat([p.grad.flatten() for p in a]))) == pytest.approx(5.0)


def test_flatten_parameters_makes_views_of_one_vector():
    field = _field(torch.float64)
    params = field.parameters_list()
    before = [p.detach().clone() for p in params]
    params[2].grad = torch.full_like(params[2], 3.0)
    flat = flatten_parameters(params)
    assert flat.shape == (field.num_parameters(),) and flat.grad.shape == flat.shape
    assert all(torch.equal(p, q) for p, q in zip(params, before))  # values kept
    assert torch.equal(flat_view(params), flat)
    assert flat_view([p.grad for p in params]).data_ptr() == flat.grad.data_ptr()
    assert float(params[2].grad.sum()) == 3.0 * params[2].numel() and float(params[0].grad.abs().sum()) == 0.0
    with torch.no_grad():
        flat.add_(1.0)
    assert torch.equal(params[0], before[0] + 1.0)  # the parameters see the flat vector
    field.load_state_dict({k: v * 0 for k, v in field.state_dict().items()} | {"in_scale": field.in_scale,
                                                                          "out_scale": field.out_scale})
    assert float(flat.abs().sum()) == 0.0  # a state dict load writes the flat vector
    field.zero_grad()  # as Lightning does before fitting
    assert params[0].grad is None
    link_gradients(params, flat)
    assert flat_view([p.grad for p in params]).data_ptr() == flat.grad.data_ptr()
    assert flat_view([params[1], params[0]]) is None  # not in layout order


def test_flatten_parameters_bad_input():
    a, b = torch.zeros(3, dtype=torch.float32), torch.zeros(2, dtype=torch.float64)
    with pytest.raises(ValueError, match="at least one"):
        flatten_parameters([])
    with pytest.raises(ValueError, match="twice"):
        flatten_parameters([a, a])
    with pytest.raises(ValueError, match="one dtype and device"):
        flatten_parameters([a, b])


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("decay", [0.0, 0.1])
def test_adam_on_the_flat_vector_is_per_tensor_adam_bit_for_bit(dtype, decay):
    """Fused AdamW over one flat vector steps every weight exactly as over the separate tensors."""
    fields = [_field(dtype), _field(dtype)]
    flat = flatten_parameters(fields[1].parameters_list())
    opts = [torch.optim.AdamW(fields[0].parameters_list(), lr=5e-3, weight_decay=decay, fused=True),
            torch.optim.AdamW([flat], lr=5e-3, weight_decay=decay, fused=True)]
    gen = torch.Generator().manual_seed(2)
    for _ in range(300):
        grads = [torch.randn(p.shape, generator=gen, dtype=dtype) for p in fields[0].parameters_list()]
        for field, opt in zip(fields, opts):
            field.write_grad(grads)
            clip_grad_norm(field.parameters_list(), 5.0)
            opt.step()
    for p, q in zip(*(f.parameters_list() for f in fields)):
        assert torch.equal(p, q)
    assert not torch.equal(fields[0].parameters_list()[0], _field(dtype).parameters_list()[0])  # it stepped


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("flat", [False, True])
def test_exponential_average_is_torchs_bit_for_bit(dtype, flat):
    field = _field(dtype)
    if flat:  # the trained field's weights in one vector: the average is one lerp_
        flatten_parameters(field.parameters_list())
    ours, theirs = ExponentialAverage(field, 0.995), AveragedModel(field, multi_avg_fn=get_ema_multi_avg_fn(0.995))
    assert ours.state_dict().keys() == theirs.state_dict().keys()
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for k in range(40):
            for p in field.parameters():
                p.add_(torch.randn(p.shape, generator=gen, dtype=dtype) * 0.1)
            if k == 20:  # new scales reach the average
                field.set_scales(torch.tensor([2.0, 3.0], dtype=dtype), torch.tensor([0.5, 4.0], dtype=dtype))
            ours.update_parameters(field)
            theirs.update_parameters(field)
    for (name, x), (_, y) in zip(ours.state_dict().items(), theirs.state_dict().items()):
        assert torch.equal(x, y), name
    assert int(ours.n_averaged) == 40
    assert not torch.equal(ours.module.parameters_list()[0], field.parameters_list()[0])  # it averaged
    assert torch.equal(ours.module.in_scale, field.in_scale)
    # a checkpoint of torch's EMA loads into ours
    fresh = ExponentialAverage(copy.deepcopy(field), 0.995)
    fresh.load_state_dict(theirs.state_dict())
    assert all(torch.equal(x, y) for x, y in zip(fresh.state_dict().values(), theirs.state_dict().values()))


def test_a_run_is_bit_for_bit_that_of_torchs_clipping_and_ema(tmp_path, monkeypatch):
    """A short default run, once as it is and once with torch's ``clip_grad_norm_``, ``AveragedModel``
    and ``optimizer.step()``: the trained and averaged weights are equal to the last bit."""
    args = ["fit", "--config", str(CONFIG), "--data.duration", "8", "--model.stream.capacity", "256",
            "--model.stream.calibration_s", "1.0", "--trainer.max_steps", "400", "--trainer.enable_progress_bar",
            "false", "--trainer.logger", "false", "--trainer.enable_checkpointing", "false", "--trainer.callbacks",
            "null"]

    def run(folder):
        cli = main([*args, "--trainer.default_root_dir", str(tmp_path / folder)])
        return cli.model, json.loads((tmp_path / folder / "metrics.json").read_text())

    new, new_metrics = run("new")

    def torch_clip(grads, max_norm):  # torch's clip_grad_norm_ on the gradients jet_update clips
        return torch.nn.utils.clip_grad_norm_([SimpleNamespace(grad=g) for g in grads], max_norm)

    monkeypatch.setattr(update_mod, "_clip_grads", torch_clip)
    monkeypatch.setattr(update_mod, "optimizer_step", lambda opt: opt.step())
    monkeypatch.setattr(module_mod, "ExponentialAverage",
                        lambda field, decay: AveragedModel(field, multi_avg_fn=get_ema_multi_avg_fn(decay)))
    old, old_metrics = run("old")
    assert type(old.ema) is AveragedModel and type(new.ema) is ExponentialAverage
    assert new.stats["updates"] == old.stats["updates"] == 400
    assert new.trainer.global_step == 400  # the chunk's updates are counted into Lightning's step
    params = new.field.parameters_list()  # the optimizer steps the flat vector the field's tensors view
    assert new.trainer.optimizers[0].param_groups[0]["params"] == [new._weights]
    assert flat_view(params).data_ptr() == new._weights.data_ptr()
    assert flat_view([p.grad for p in params]).data_ptr() == new._weights.grad.data_ptr()
    for x, y in zip(new.field.state_dict().values(), old.field.state_dict().values()):
        assert torch.equal(x, y)
    for x, y in zip(new.ema.state_dict().values(), old.ema.state_dict().values()):
        assert torch.equal(x, y)
    assert new_metrics["e_field"] == old_metrics["e_field"]


def _adamw(field: HybridField) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    opt = torch.optim.AdamW([flatten_parameters(field.parameters_list())], lr=5e-3, weight_decay=0.1, fused=True)
    return opt, torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=50, eta_min=5e-5)


def test_optimizer_step_is_the_optimizers_step_bit_for_bit(recwarn):
    fields = [_field(torch.float64), _field(torch.float64)]
    (opt_a, sched_a), (opt_b, sched_b) = _adamw(fields[0]), _adamw(fields[1])
    gen = torch.Generator().manual_seed(4)
    for _ in range(50):
        grads = [torch.randn(p.shape, generator=gen, dtype=torch.float64) for p in fields[0].parameters_list()]
        for field in fields:
            field.write_grad(grads)
        opt_a.step()
        optimizer_step(opt_b)
        sched_a.step()
        sched_b.step()  # no "lr_scheduler.step() before optimizer.step()" warning: the step is recorded
    assert opt_b._opt_called and not [w for w in recwarn if "lr_scheduler" in str(w.message)]
    assert torch.equal(opt_a.param_groups[0]["params"][0], opt_b.param_groups[0]["params"][0])
    assert not torch.equal(fields[1].parameters_list()[0], _field(torch.float64).parameters_list()[0])  # it stepped


def test_optimizer_step_runs_registered_hooks():
    opt, _ = _adamw(_field(torch.float64))
    calls = []
    handle = opt.register_step_post_hook(lambda *_: calls.append("post"))
    optimizer_step(opt)
    assert calls == ["post"]  # with a hook registered it goes through optimizer.step()
    handle.remove()
    glob = register_optimizer_step_pre_hook(lambda *_: calls.append("global"))
    try:
        optimizer_step(opt)
    finally:
        glob.remove()
    assert calls == ["post", "global"]
    optimizer_step(opt)  # no hooks left: the optimizer's own step
    assert calls == ["post", "global"] and int(opt.state[opt.param_groups[0]["params"][0]]["step"]) == 3

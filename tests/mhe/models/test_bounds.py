"""Softplus/sigmoid reparameterization of bounded physical parameters."""
import math

import pytest
import torch

from mhe import Bound, BoundedParameters
from mhe.models.bounds import clip_inside


@pytest.mark.parametrize("bound,value", [(Bound(5.0, 30.0), 5.579), (Bound(5.0, 30.0, log=True), 5.579),
                                         (Bound(0.0, None), 0.3),
                                         (Bound(None, 0.0), -0.083), (Bound(), -2.5)])
def test_raw_round_trip(bound, value):
    raw = bound.to_raw(value)
    assert math.isclose(float(bound.from_raw(torch.tensor(raw))), value, rel_tol=1e-13)


def test_fixed_and_identified_parameters():
    p = BoundedParameters({"a": 1.0, "b": 2.0, "c": 3.0}, {"a": Bound(0.0, 2.0)}, identify=["a", "c"])
    assert p.free_names == ("a", "c") and p.fixed_names == ("b",) and p.raw.shape == (2,)
    p.assign({"a": 1.5})
    assert [round(float(v.detach()), 12) for v in p().values()] == [1.5, 2.0, 3.0]
    with pytest.raises(ValueError, match="b is not an identified parameter"):
        p.assign({"b": 1.0})
    with pytest.raises(ValueError, match="outside its bounds"):
        p.assign({"a": 2.5})


def test_log_bound_steps_are_relative_changes():
    b = Bound(1.39e-5, 5.56e-5, log=True)
    raw = torch.tensor(b.to_raw(2.78e-5))  # the geometric midpoint: sigmoid = 1/2
    assert abs(float(raw)) < 1e-12
    ratio = float(b.from_raw(raw + 0.01) / b.from_raw(raw))
    assert math.isclose(math.log(ratio), 0.01 * 0.25 * math.log(4.0), rel_tol=1e-4)
    with pytest.raises(ValueError, match="log=True needs two bounds with 0 < lower"):
        Bound(-1.0, 1.0, log=True)


def test_bad_names_and_initial_values_are_rejected():
    with pytest.raises(ValueError, match=r"identify names unknown parameters \['z'\]"):
        BoundedParameters({"a": 1.0}, identify=["z"])
    with pytest.raises(ValueError, match="must lie strictly inside its bounds"):
        BoundedParameters({"a": 3.0}, {"a": Bound(0.0, 2.0)})


def test_clip_moves_values_strictly_inside_and_leaves_inner_ones():
    b = Bound(0.0, 2.0)
    assert b.clip(5.0) == 2.0 - 2e-6 and b.clip(-1.0) == 2e-6 and b.clip(0.5) == 0.5
    assert Bound(lower=0.0).clip(-3.0, pad=0.1) == 0.1 and Bound(upper=1.0).clip(4.0) == 1.0 - 1e-6
    assert Bound().clip(-7.0) == -7.0
    assert b.contains(b.clip(2.0)) and math.isfinite(b.to_raw(b.clip(2.0)))


def test_clip_inside_moves_values_off_the_bounds_only():
    bounds = {"a": Bound(0.0, 1.0), "b": Bound(5.0, 30.0, log=True), "c": Bound(lower=0.0)}
    assert clip_inside({"a": 0.0, "b": 17.0, "c": 0.0, "m": 3.0}, bounds, 0.01) == {"a": 0.01, "b": 17.0, "c": 0.01,
                                                                                   "m": 3.0}
    assert clip_inside({"a": 1.0, "b": 30.0, "c": 2.0}, bounds, 0.01) == {"a": 0.99, "b": 29.75, "c": 2.0}
    assert clip_inside({"a": 1.0, "b": 5.0, "c": 2.0}, bounds) == {"a": 1.0 - 1e-6, "b": 5.0 + 25e-6, "c": 2.0}


"""Export: TorchScript + JSON sidecar round trip."""
import json

import pytest
import torch

from torch_ude import SinglePendulum, __version__
from torch_ude.export import export_field, load_field
from tests.torch_ude.helpers import random_field


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_round_trip_equals_the_field_on_any_batch(tmp_path, dtype):
    field = random_field("single", "A", 1).to(dtype)
    pt, js = export_field(field, tmp_path / "run", SinglePendulum(), "a", extra={"trainer": "test"})
    module, meta = load_field(tmp_path / "run")
    for n in (1, 3, 257):
        x = torch.randn(n, 2, dtype=dtype)
        assert torch.allclose(module(x), field.evaluate(x), rtol=1e-6 if dtype == torch.float32 else 1e-14)
    assert meta["case"] == "A" and meta["layer_sizes"] == [2, 16, 16, 2] and meta["num_parameters"] == 354
    assert meta["plant"]["class_path"] == "torch_ude.systems.pendulum.SinglePendulum"
    assert meta["library_version"] == __version__ and meta["extra"] == {"trainer": "test"}
    assert meta["in_scale"] == field.in_scale.tolist() and meta["dtype"] == str(dtype)[6:]
    assert json.loads(js.read_text()) == meta and pt.name == "field.pt"


def test_loading_a_missing_export_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="export_field"):
        load_field(tmp_path)

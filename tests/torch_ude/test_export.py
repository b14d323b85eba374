"""Export: TorchScript + JSON sidecar round trip."""
import json
import re

import pytest
import torch

from torch_ude import SinglePendulum, __version__
from torch_ude.export import export_field, load_field
from tests.torch_ude.helpers import random_field, random_input_field


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


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_the_exported_program_rejects_a_wrong_shape_or_dtype_in_one_line(tmp_path, dtype):
    field = random_field("single", "A", 1).to(dtype)
    export_field(field, tmp_path, SinglePendulum(), "A")
    module, meta = load_field(tmp_path)
    other = torch.float32 if dtype == torch.float64 else torch.float64
    cases = [(torch.zeros(3, dtype=dtype), r"builtins\.ValueError: field\.pt: the states must have shape \(N, 2\); "
                                           r"got shape \[3\]\. A single state reshapes with x\.reshape\(1, -1\)\.$"),
             (torch.zeros(4, 3, dtype=dtype), r"ValueError: field\.pt: .* got shape \[4, 3\]"),
             (torch.zeros(4, 2, dtype=other), rf"builtins\.TypeError: field\.pt: the states must be {dtype} .*got "
                                              rf"{other}\. Convert them with x\.to\({dtype}\)\.$"),
             (torch.zeros(4, 2, dtype=torch.float16), r"TypeError: .*got torch\.float16\."),
             (torch.zeros(4, 2, dtype=torch.int64), r"TypeError: .*got torch\.int64\.")]
    for x, message in cases:
        with pytest.raises(torch.jit.Error) as err:
            module(x)
        assert re.search(message, str(err.value).strip().splitlines()[-1]), str(err.value)
    assert meta["dtype"] == str(dtype)[6:] and meta["torch_version"] == torch.__version__


def test_export_replaces_files_atomically(tmp_path, monkeypatch):
    field = random_field("single", "A", 1)
    export_field(field, tmp_path, SinglePendulum(), "A", extra={"run": 1})
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    def broken(self, path):
        with open(path, "wb") as f:
            f.write(b"half a file")
        raise OSError("disk full")

    monkeypatch.setattr(torch.jit.RecursiveScriptModule, "save", broken)
    with pytest.raises(OSError, match="disk full"):
        export_field(field, tmp_path, SinglePendulum(), "A", extra={"run": 2})
    # the earlier export is intact and no temporary file is left behind
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_a_field_with_the_linear_term_exports_and_its_sidecar_says_so(tmp_path):
    field = random_field("single", "A", 2, linear=True)
    export_field(field, tmp_path / "lin", SinglePendulum(), "A")
    module, meta = load_field(tmp_path / "lin")
    x = torch.randn(5, 2, dtype=torch.float64)
    assert torch.allclose(module(x), field.evaluate(x), rtol=1e-14)
    assert meta["linear"] is True and meta["num_parameters"] == 358
    export_field(random_field("single", "A", 2), tmp_path / "plain", SinglePendulum(), "A")
    assert "linear" not in load_field(tmp_path / "plain")[1]


def test_an_input_affine_field_exports_and_its_sidecar_says_so(tmp_path):
    from torch_ude.systems.controlled import TorquePendulumModel
    from torch_ude.training.recorded import RecordedPlant

    field = random_input_field("torque", 3, "affine")
    export_field(field, tmp_path, RecordedPlant(TorquePendulumModel(), ["position", "velocity"], ["torque"]),
                 "RECORDED")
    module, meta = load_field(tmp_path)
    x, u = torch.randn(5, 2, dtype=torch.float64), torch.randn(5, 1, dtype=torch.float64)
    assert torch.allclose(module(torch.cat((x, u), 1)), field.evaluate(x, u), rtol=1e-14)
    assert meta["linear"] is True and meta["input_affine"] is True
    assert meta["num_parameters"] == 16 * 2 + 16 + 16 * 16 + 16 + 2 * 16 + 2 + 2 * 3

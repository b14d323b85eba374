"""``torch-ude validate``/``test`` refuse what they cannot evaluate honestly (issue 35, item 2): no checkpoint (the
untrained initial model), or a checkpoint of another network shape, residual form, plant or case."""
import re

import pytest

from torch_ude.cli import console, main
from torch_ude.training.checkpoint_match import checkpoint_mismatch

SHORT = ["--data.duration", "8", "--model.stream.capacity", "256", "--model.stream.calibration_s", "1.0",
         "--trainer.max_steps", "20", "--trainer.enable_progress_bar", "false"]


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    folder = tmp_path_factory.mktemp("case_a")
    main(["fit", "--config", "configs/pendulum_case_a.yaml", *SHORT, "--trainer.default_root_dir", str(folder)])
    return next(folder.rglob("last.ckpt"))


def _refused(monkeypatch, capsys, pattern: str, *args: str) -> None:
    monkeypatch.setattr("sys.argv", ["torch-ude", *args])
    with pytest.raises(SystemExit) as done:
        console()
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("torch-ude: error:")]
    assert done.value.code == 2 and len(lines) == 1 and re.search(pattern, lines[0]), lines


def test_validate_without_a_checkpoint_is_refused(monkeypatch, capsys, tmp_path):
    _refused(monkeypatch, capsys, r"torch-ude validate needs --ckpt_path: without a checkpoint it would evaluate the "
                                  r"untrained initial model", "validate", "--config", "configs/pendulum_case_a.yaml",
             *SHORT, "--trainer.default_root_dir", str(tmp_path))


@pytest.mark.parametrize("change, pattern", [
    (["--model.hidden", "[32, 32]"], r"model.hidden: checkpoint \[16, 16\], config \[32, 32\]"),
    (["--model.linear", "true"], r"model.linear: checkpoint False, config True"),
    (["--data.case", "B"], r"data.case: checkpoint 'A', config 'B'"),
])
def test_validate_refuses_a_checkpoint_of_another_model(ckpt, monkeypatch, capsys, tmp_path, change, pattern):
    _refused(monkeypatch, capsys, rf"the checkpoint .*last.ckpt holds another model than this config describes "
                                  rf"\(.*{pattern}", "validate", "--config", "configs/pendulum_case_a.yaml", *SHORT,
             "--trainer.default_root_dir", str(tmp_path), "--trainer.logger", "false", "--ckpt_path", str(ckpt),
             *change)


def test_the_double_pendulum_config_is_another_plant_and_the_own_config_matches(ckpt):
    import yaml
    current = yaml.safe_load(open("configs/double_pendulum_case_a.yaml"))
    assert any(d.startswith("data.system: checkpoint torch_ude.systems.SinglePendulum") or
               d.startswith("data.system: checkpoint torch_ude.systems.pendulum.SinglePendulum")
               for d in checkpoint_mismatch(ckpt, current))
    own = yaml.safe_load((ckpt.parent.parent / "config.yaml").read_text())
    assert checkpoint_mismatch(ckpt, own) == []

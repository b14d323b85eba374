"""What a user sees of a default ``torch-ude fit``: the progress bar, warnings, the run folder."""
import warnings
from pathlib import Path

import pytest
import yaml
from lightning.pytorch.callbacks import TQDMProgressBar

import torch_ude
from torch_ude.cli import KNOWN_NOTICES, main, quiet_known_notices
from torch_ude.training import UpdateProgressBar

REPO = Path(torch_ude.__file__).resolve().parents[1]
CONFIG = REPO / "configs" / "pendulum_case_a.yaml"
# a short default run: replay chunks of 25 updates, progress bar and logger as configured
SHORT = ["--data.duration", "8", "--model.stream.capacity", "256", "--model.stream.calibration_s", "1.0",
         "--trainer.max_steps", "300", "--trainer.callbacks.init_args.every_n_updates", "100"]


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    """One short run from a scratch working directory, with ``--trainer.default_root_dir`` only."""
    cwd, root = tmp_path_factory.mktemp("cwd"), tmp_path_factory.mktemp("root") / "run"
    mp = pytest.MonkeyPatch()
    mp.chdir(cwd)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")  # every warning, each time ...
            warnings.filterwarnings("ignore", category=DeprecationWarning)  # ... but as Python, outside __main__
            cli = main(["fit", "--config", str(CONFIG), *SHORT, "--trainer.default_root_dir", str(root)])
    finally:
        mp.undo()
    return cli, caught, cwd, root


def test_progress_bar_counts_updates_to_max_steps(default_run):
    cli = default_run[0]
    bar = cli.trainer.progress_bar_callback
    assert type(bar) is UpdateProgressBar
    assert cli.model.stats["updates"] == 300
    # Lightning's own bar counted training steps: fewer than 300, since a replay chunk makes 25 updates
    assert bar.train_progress_bar.total == 300 and bar.train_progress_bar.n == 300


def test_default_run_prints_no_third_party_warning(default_run):
    caught = default_run[1]
    third_party = [f"{w.filename}:{w.lineno}: {w.category.__name__}: {w.message}" for w in caught
                   if "site-packages" in w.filename and "args parameter is intended" not in str(w.message)
                   or issubclass(w.category, FutureWarning)]  # (that one: pytest's own sys.argv)
    assert third_party == []


def test_quiet_known_notices_is_narrow():
    """The filters drop only the listed notices: the same text from another module, or another
    deprecation from the listed module, still shows."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with quiet_known_notices():
            for category, _, module in KNOWN_NOTICES:
                warnings.warn_explicit("something else is deprecated", category, "x.py", 1, module=module)
            warnings.warn_explicit("`isinstance(treespec, LeafSpec)` is deprecated", FutureWarning, "x.py", 1,
                                   module="someone_else")
            warnings.warn_explicit("`isinstance(treespec, LeafSpec)` is deprecated", FutureWarning, "x.py", 1,
                                   module="lightning.pytorch.utilities._pytree")
    assert len(caught) == len(KNOWN_NOTICES) + 1


def test_default_root_dir_holds_every_output(default_run):
    cli, _, cwd, root = default_run
    assert list(cwd.iterdir()) == []  # nothing in the working directory (no runs/...)
    assert Path(cli.trainer.logger.log_dir).is_relative_to(root)
    names = {p.name for p in root.rglob("*") if p.is_file()}
    assert {"field.pt", "field.json", "metrics.json", "config.yaml", "hparams.yaml", "last.ckpt"} <= names
    assert any(n.startswith("events.out.tfevents.") for n in names)
    assert next(root.rglob("events.out.tfevents.*")).parent == root / "tensorboard" / "version_0"


def test_logger_follows_default_root_dir_over_a_pinned_save_dir(tmp_path, monkeypatch):
    """A config written before the link (``save_dir`` pinned) still parses, and its logs follow
    ``default_root_dir``; with no ``default_root_dir`` they go to the working directory."""
    config = yaml.safe_load(CONFIG.read_text())
    config["trainer"]["logger"]["init_args"]["save_dir"] = str(tmp_path / "pinned")
    old = tmp_path / "old.yaml"
    old.write_text(yaml.safe_dump(config))
    cli = main(["--config", str(old), "--trainer.default_root_dir", str(tmp_path / "asked")], run=False)
    assert Path(cli.trainer.logger.log_dir) == tmp_path / "asked" / "tensorboard" / "version_0"
    del config["trainer"]["default_root_dir"]
    old.write_text(yaml.safe_dump(config))
    monkeypatch.chdir(tmp_path)
    cli = main(["--config", str(old)], run=False)
    assert Path(cli.trainer.logger.save_dir) == tmp_path


def test_a_progress_bar_named_in_the_config_is_kept(tmp_path):
    cli = main(["--config", str(CONFIG), "--trainer.default_root_dir", str(tmp_path), "--trainer.callbacks+",
                "lightning.pytorch.callbacks.TQDMProgressBar", "--trainer.callbacks.refresh_rate", "7"], run=False)
    bars = [c for c in cli.trainer.callbacks if isinstance(c, TQDMProgressBar)]
    assert len(bars) == 1 and bars[0].refresh_rate == 7


def test_a_resumed_run_starts_the_bar_at_the_checkpoints_update(default_run, tmp_path):
    ckpt = next(default_run[3].rglob("last.ckpt"))
    cli = main(["fit", "--config", str(CONFIG), *SHORT, "--trainer.max_steps", "400", "--trainer.default_root_dir",
                str(tmp_path), "--ckpt_path", str(ckpt)])
    bar = cli.trainer.progress_bar_callback.train_progress_bar
    assert cli.model.stats["updates"] == 400
    assert (bar.initial, bar.n, bar.total) == (300, 400, 400)

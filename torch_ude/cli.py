"""The ``torch-ude`` console script: LightningCLI over every trainer of the project.

``torch-ude fit --config configs/pendulum_case_a.yaml [--data.noise 0.02] [--seed_everything 3]``
trains; ``validate`` and ``test`` evaluate a checkpoint (``--ckpt_path``). The model
and the data module are chosen in YAML by ``class_path``, so any importable
LightningModule / LightningDataModule (and any `System` plant) works unchanged.

Errors: a config file that is empty, not text or not YAML, and a checkpoint
(``--ckpt_path``) that is missing or truncated, are reported in one line naming the file. An error raised by the project's own code (a bad setting, a run that
failed) is printed first, as one line ``torch-ude: error: <message>``, and the script
exits with status 2; set ``TORCH_UDE_TRACEBACK=1`` to see the full traceback instead.
Argument-parsing errors keep jsonargparse's message (also status 2).

Every output of a run goes under ``trainer.default_root_dir`` (the working directory
when unset): the TensorBoard logger's ``save_dir`` is linked to it
(`TorchUdeCLI`), so ``--trainer.default_root_dir DIR`` moves the logs and checkpoints
with the run's files; a ``save_dir`` given in a config or on the command line is
replaced by it. The progress bar counts updates (`UpdateProgressBar`), and the
third-party notices a default run would print (`KNOWN_NOTICES`) are silenced while
the CLI runs.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import warnings
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import lightning as L
import yaml
from lightning.pytorch.callbacks import TQDMProgressBar
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI
from lightning.pytorch.utilities.warnings import PossibleUserWarning

from .training.progress import UpdateProgressBar

__all__ = ["main", "console", "check_files", "user_error", "TorchUdeCLI", "KNOWN_NOTICES", "quiet_known_notices",
           "log_dir_of"]

#: Exception types whose message, raised by the project's code, is the whole story for a user.
USER_ERRORS = (ValueError, TypeError, KeyError, FileNotFoundError, RuntimeError, FloatingPointError)
_PACKAGES = ("torch_ude", "baselines", "mhe", "microcontroller")


def _values(args: list[str], *flags: str) -> list[str]:
    """The values given to any of ``flags`` in ``args`` (``--flag value`` or ``--flag=value``)."""
    found = [value for flag, value in zip(args, args[1:]) if flag in flags]
    return found + [a.split("=", 1)[1] for a in args if a.split("=", 1)[0] in flags and "=" in a]


def check_files(args: list[str]) -> None:
    """Check the config files and the checkpoint named in ``args`` before any work.

    A ``--config``/``-c`` value that is not an existing file (an inline YAML string, a
    missing path) is left to jsonargparse; a ``--ckpt_path`` of Lightning's keywords
    (``last``, ``best``, ``hpc``, ``registry``) or ``null`` to Lightning.

    Raises:
        ValueError: for a config file that is not UTF-8 text, not YAML, empty (or only
            comments) or not a mapping of settings, and for a checkpoint that does not
            exist or is not a complete checkpoint file; the message names the file.
    """
    for name in _values(args, "--ckpt_path"):
        if name in ("last", "best", "hpc", "registry", "null") or name.startswith("registry:"):
            continue
        if not Path(name).is_file():
            raise ValueError(f"the checkpoint {name} given as --ckpt_path does not exist; pass the path of a .ckpt "
                             f"file, e.g. <run folder>/.../checkpoints/last.ckpt.")
        if not zipfile.is_zipfile(name):
            raise ValueError(f"the checkpoint {name} is not a complete checkpoint file (it is truncated or corrupt); "
                             f"resume from another one, e.g. the periodic step=N.ckpt beside it.")
    for name in _values(args, "--config", "-c"):
        path = Path(name)
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise ValueError(f"the config file {name} is not a text (YAML) file: byte {err.object[err.start]:#04x} "
                             f"at position {err.start} is not UTF-8; pass a YAML file such as "
                             f"configs/pendulum_case_a.yaml.") from None
        try:
            content = yaml.safe_load(text)
        except yaml.YAMLError as err:
            where = getattr(err, "problem_mark", None)
            at = f" at line {where.line + 1}, column {where.column + 1}" if where is not None else ""
            problem = getattr(err, "problem", None) or str(err).splitlines()[0]
            raise ValueError(f"the config file {name} is not valid YAML{at}: {problem}.") from None
        if content is None:
            raise ValueError(f"the config file {name} is empty (or holds only comments); put the run's settings "
                             f"in it, e.g. start from configs/pendulum_case_a.yaml.")
        if not isinstance(content, dict):
            raise ValueError(f"the config file {name} must hold a mapping of settings (key: value lines); it holds "
                             f"a {type(content).__name__}.")


#: Third-party warnings a default run prints, as ``(category, message regex, module regex)``:
#: Lightning's two notices that ``training_step(dataloader_iter)`` is experimental (the
#: streaming modules consume the stream chunk by chunk through it on purpose), and torch's
#: deprecation of ``LeafSpec`` that Lightning's own ``_pytree`` helper triggers.
KNOWN_NOTICES: tuple[tuple[type[Warning], str, str], ...] = (
    (PossibleUserWarning, r"You are using the `dataloader_iter` step flavor",
     r"lightning\.pytorch\.trainer\.configuration_validator"),
    (UserWarning, r"Found `dataloader_iter` argument in the `\w+`", r"lightning\.pytorch\.loops\.utilities"),
    (FutureWarning, r"`isinstance\(treespec, LeafSpec\)` is deprecated", r"lightning\.pytorch\.utilities\._pytree"),
)


@contextmanager
def quiet_known_notices() -> Iterator[None]:
    """Silence exactly the warnings of `KNOWN_NOTICES` (each by category, message and the
    module that raises it) inside the block; every other warning is shown as before."""
    with warnings.catch_warnings():
        for category, message, module in KNOWN_NOTICES:
            warnings.filterwarnings("ignore", message=message, category=category, module=module)
        yield


def log_dir_of(default_root_dir: str | None) -> str:
    """The logger's ``save_dir`` for a run folder: ``default_root_dir``, or the working
    directory when it is unset (Lightning's own default for the run folder)."""
    return os.getcwd() if default_root_dir is None else str(default_root_dir)


class TorchUdeCLI(LightningCLI):
    """`LightningCLI` with the run folder in charge of every output.

    * ``trainer.logger.init_args.save_dir`` is linked to ``trainer.default_root_dir``
      (`log_dir_of`), so the TensorBoard logs (and the checkpoints under them) follow
      ``--trainer.default_root_dir``.
    * Lightning's default `TQDMProgressBar` is replaced by `UpdateProgressBar` (same
      refresh rate), which counts updates; a progress bar named in the config is kept.
    """

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        """Link the logger's ``save_dir`` to ``trainer.default_root_dir``."""
        parser.link_arguments("trainer.default_root_dir", "trainer.logger.init_args.save_dir", compute_fn=log_dir_of)

    def instantiate_trainer(self, **kwargs) -> L.Trainer:
        """Lightning's trainer, with `UpdateProgressBar` in place of the `TQDMProgressBar` Lightning
        adds by default (not of one the config names)."""
        config = self.config_init[self.subcommand] if self.subcommand else self.config_init
        configured = config["trainer"].get("callbacks") or []
        configured = {id(c) for c in (configured if isinstance(configured, list) else [configured])}
        trainer = super().instantiate_trainer(**kwargs)  # (the trainer may extend the config's list in place)
        bar = trainer.progress_bar_callback
        if type(bar) is TQDMProgressBar and id(bar) not in configured:
            trainer.callbacks[trainer.callbacks.index(bar)] = UpdateProgressBar(bar.refresh_rate, bar._leave)
        return trainer


def main(args: list[str] | None = None, run: bool = True) -> LightningCLI:
    """Run the CLI.

    Args:
        args: command-line arguments (default ``sys.argv[1:]``).
        run: run the subcommand (False: only parse and instantiate).

    Returns:
        The `TorchUdeCLI` instance (its ``trainer``, ``model`` and ``datamodule``); the
        warnings of `KNOWN_NOTICES` are silenced while it runs.

    Raises:
        ValueError: for a file `check_files` rejects; any error of the
            components or the run propagates unchanged.
    """
    check_files(sys.argv[1:] if args is None else args)
    with quiet_known_notices():
        return TorchUdeCLI(
            L.LightningModule, L.LightningDataModule, subclass_mode_model=True, subclass_mode_data=True,
            seed_everything_default=0, save_config_kwargs={"overwrite": True}, args=args, run=run,
        )


def _ours(filename: str) -> bool:
    """Whether a source file belongs to one of the project's packages."""
    path = Path(filename).resolve()
    for name in _PACKAGES:
        spec = importlib.util.find_spec(name)
        for root in (spec.submodule_search_locations or []) if spec is not None else []:
            if path.is_relative_to(Path(root).resolve()):
                return True
    return False


def user_error(exc: BaseException) -> BaseException | None:
    """The error to report in one line: the outermost of ``exc`` and the errors it was raised
    from (jsonargparse wraps constructor errors) that is a `USER_ERRORS` type raised in the
    project's code; None if there is none."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        if isinstance(exc, USER_ERRORS) and tb is not None and _ours(tb.tb_frame.f_code.co_filename):
            return exc
        exc = exc.__cause__ if exc.__cause__ is not None or exc.__suppress_context__ else exc.__context__
    return None


def console() -> None:
    """Entry point of the ``torch-ude`` script: exit status 0 on success, 2 on an error.

    A `user_error` is printed as ``torch-ude: error: <message>`` without the traceback
    unless the environment sets ``TORCH_UDE_TRACEBACK=1``.
    """
    try:
        main()
    except USER_ERRORS as exc:
        err = user_error(exc)
        if err is None or os.environ.get("TORCH_UDE_TRACEBACK", "") not in ("", "0"):
            raise
        message = err.args[0] if isinstance(err, KeyError) and len(err.args) == 1 else err
        print(f"torch-ude: error: {message}", file=sys.stderr)
        print("torch-ude: (set TORCH_UDE_TRACEBACK=1 to see the traceback)", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    console()

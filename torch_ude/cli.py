"""The ``torch-ude`` console script: LightningCLI over every trainer of the project.

``torch-ude fit --config configs/pendulum_case_a.yaml [--data.noise 0.02] [--seed_everything 3]``
trains; ``validate`` and ``test`` evaluate a checkpoint (``--ckpt_path``); ``torch-ude score RUN
--files A.csv ...`` scores a trained model on any recorded logs (`torch_ude.score`). The model
and the data module are chosen in YAML by ``class_path``, so any importable
LightningModule / LightningDataModule (and any `System` plant) works unchanged.

Errors: a config file that is empty, not text or not YAML, and a checkpoint
(``--ckpt_path``) that is missing or truncated, are reported in one line naming the file. An
error raised by the project's own code (a bad setting, a run that failed), or by a file reader
it calls (`_READERS`: NumPy, SciPy, zipfile, csv, ...), is printed as one line
``torch-ude: error: <message>``, and the script exits with status 2; set
``TORCH_UDE_TRACEBACK=1`` to see the full traceback instead. An argument jsonargparse cannot
parse is one line too: the dotted setting and the innermost reason
(`torch_ude.training.overrides.short_parse_error`), not the usage and the tree of subtypes.

Command-line overrides behave as the same setting in a YAML file
(`torch_ude.training.overrides`): a nested value holding null, NaN or infinity is passed on as
that value (not as the string ``'None'``), and a class changed on the command line
(``--data.known.class_path OtherModel``) gets its own defaults, not the settings given for the
class it replaces (a note names what was not passed on).

The run folder of ``fit`` (`torch_ude.training.run_folder`): a run holds a lock on its folder
(``.torch-ude.lock``, released when the process ends however it ends), so a second run into
a folder in use is refused in one line. Every run checkpoints periodically: where the config
names no checkpoint callback, Lightning's default one is replaced by
`torch_ude.training.PeriodicCheckpoint` every ``checkpoint_every`` updates of the module (1000;
PEM-MHE: every iteration), and ``trainer.enable_checkpointing: false`` is warned about. When
the folder holds a killed run (``metrics.json`` says ``"running"`` and no process holds the
lock), the same command says so and resumes from its newest complete checkpoint; ``--fresh``
starts over instead, and a command whose settings differ from the killed run's (other than
``trainer.max_steps``) is an error naming them.

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
import json
import os
import pickle
import shlex
import sys
import time
import warnings
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import lightning as L
import yaml
from jsonargparse import ArgumentError
from lightning.pytorch.callbacks import ModelCheckpoint, TQDMProgressBar
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI
from lightning.pytorch.utilities.warnings import PossibleUserWarning

from .field import HybridField
from .training.callbacks import PeriodicCheckpoint
from .training.checkpoint_match import checkpoint_mismatch
from .training.overrides import nest_override_values, reset_changed_classes, short_parse_error
from .training.progress import UpdateProgressBar
from .training.run_folder import RunFolderLock, checkpoint_step, killed_run, resume_point, settings_differ

__all__ = ["main", "fit_config", "jet_matching_run", "console", "check_files", "user_error", "one_line",
           "TorchUdeCLI", "KNOWN_NOTICES", "quiet_known_notices", "log_dir_of", "RESUME_ENV"]

#: Exception types whose message, raised by the project's code, is the whole story for a user.
USER_ERRORS = (ValueError, TypeError, KeyError, FileNotFoundError, RuntimeError, FloatingPointError)
_PACKAGES = ("torch_ude", "baselines", "mhe", "microcontroller")
#: Errors a file reader raises for a file it cannot read (a truncated archive, a short file).
READ_ERRORS = (*USER_ERRORS, OSError, EOFError, zipfile.BadZipFile, pickle.UnpicklingError, IndexError)
#: Third-party modules that read files: their errors, raised under the project's code, are a
#: bad file (named in the message by the project's frame), not a bug.
_READERS = ("numpy", "scipy.io", "zipfile", "csv", "json", "pickle", "yaml", "torch.serialization", "pandas.io")
#: Environment variable through which the first process hands the checkpoint it resumes from to
#: the processes a DDP launcher starts with the same command line.
RESUME_ENV = "TORCH_UDE_RESUME_FROM"


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
            comments), not a mapping of settings or naming a ``class_path`` in a module of this
            repository that does not exist (a run saved before a module moved), and for a checkpoint that does not
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
        for where, class_path in _class_paths(content):
            module = class_path.rpartition(".")[0]
            if module.partition(".")[0] in ("mhe", "torch_ude", "baselines") and not _importable(module):
                raise ValueError(f"the config file {name} names {class_path} at {where}, and there is no module "
                                 f"{module} (a run saved before mhe/ was put in rooms names the old paths); name the "
                                 f"class by its module today (docs/mhe.md lists where each module is), e.g. as "
                                 f"the configs in configs/ do.")


def _class_paths(content: object, where: str = "") -> Iterator[tuple[str, str]]:
    """Every ``class_path`` value in a parsed config, with the dotted key that holds it."""
    if isinstance(content, dict):
        if isinstance(content.get("class_path"), str):
            yield where or "the top", content["class_path"]
        for key, value in content.items():
            yield from _class_paths(value, f"{where}.{key}" if where else str(key))
    elif isinstance(content, list):
        for i, value in enumerate(content):
            yield from _class_paths(value, f"{where}[{i}]")


def _importable(module: str) -> bool:
    """Whether ``module`` exists (its parents are imported to look, the module itself is not)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


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


def _secondary_process() -> bool:
    """Whether this process was started by a DDP launcher for a rank other than the first."""
    return os.environ.get("LOCAL_RANK", "0") != "0" or os.environ.get("NODE_RANK", "0") != "0"


def _note(message: str) -> None:
    """One line to the user on stderr, prefixed like the errors."""
    print(f"torch-ude: {message}", file=sys.stderr)


class TorchUdeCLI(LightningCLI):
    """`LightningCLI` with the run folder in charge of every output.

    * ``trainer.logger.init_args.save_dir`` is linked to ``trainer.default_root_dir``
      (`log_dir_of`), so the TensorBoard logs (and the checkpoints under them) follow
      ``--trainer.default_root_dir``.
    * Lightning's default `TQDMProgressBar` is replaced by `UpdateProgressBar` (same
      refresh rate), which counts updates; a progress bar named in the config is kept.
    * Lightning's default `ModelCheckpoint` is replaced by `PeriodicCheckpoint` every
      ``model.checkpoint_every`` updates (1000 where the module does not say); a checkpoint
      callback named in the config is kept.
    * ``fit`` locks its run folder and resumes a killed run there (module docstring);
      ``--fresh`` starts over.
    * A class changed on the command line takes its own defaults (`reset_changed_classes`).
    """

    def __init__(self, *args, **kwargs) -> None:
        self._folder_lock: RunFolderLock | None = None
        try:
            super().__init__(*args, **kwargs)
        finally:
            if self._folder_lock is not None:
                self._folder_lock.release()

    def init_parser(self, **kwargs) -> LightningArgumentParser:
        """Lightning's parser, raising its errors (`main` words them in one line) instead of printing the usage."""
        kwargs.setdefault("exit_on_error", False)
        return super().init_parser(**kwargs)

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        """Link the logger's ``save_dir`` to ``trainer.default_root_dir``; add ``--fresh``."""
        parser.link_arguments("trainer.default_root_dir", "trainer.logger.init_args.save_dir", compute_fn=log_dir_of)
        parser.add_argument("--fresh", action="store_true",
                            help="(fit) start over in a run folder whose earlier run was killed, instead of resuming "
                                 "it from its newest checkpoint.")

    def parse_arguments(self, parser: LightningArgumentParser, args) -> None:
        """Lightning's parse, then a class changed on the command line gets its own defaults."""
        super().parse_arguments(parser, args)
        argv = sys.argv[1:] if args is None else args
        if not isinstance(argv, (list, tuple)):
            return
        sub = self.config.get("subcommand")
        config = self.config[sub] if sub else self.config

        def parse_prefix(prefix: list[str]):
            try:
                parsed = parser.parse_args(prefix + ([sub] if sub and sub not in prefix else []))
            except (ArgumentError, SystemExit):
                return None
            return parsed[sub] if sub else parsed

        for note in reset_changed_classes(config, list(argv), parse_prefix):
            _note(note)

    def before_instantiate_classes(self) -> None:
        """For ``fit``: lock the run folder and, when it holds a killed run, resume it (module docstring).
        For ``validate`` and ``test``: refuse to run without a checkpoint, or with one of another model
        (`torch_ude.training.checkpoint_match`)."""
        if self.subcommand in ("validate", "test"):
            self._check_checkpoint(self.subcommand)
        if self.subcommand != "fit":
            return
        config = self.config["fit"]
        if _secondary_process():
            config["ckpt_path"] = config.get("ckpt_path") or os.environ.get(RESUME_ENV) or None
            return
        folder = Path(log_dir_of(config["trainer"].get("default_root_dir")))
        lock = RunFolderLock(folder)
        previous = lock.read()  # the last holder's record: a killed run's, if one was killed
        self._folder_lock = lock.acquire(shlex.join(["torch-ude", *sys.argv[1:]]))
        given = config.get("ckpt_path")
        if given:
            if Path(given).is_file():  # (not one of Lightning's keywords): the run's lineage, see resume_point
                lock.record(resumed_from=str(given))
            return
        if not killed_run(folder):
            return
        left = f"the run in {folder} did not finish (its metrics.json says \"running\" and no process holds the folder)"
        ckpt = resume_point(folder, previous)
        if config.get("fresh"):
            _note(f"{left}; --fresh: starting over" + (f" (its checkpoints stay, the newest is {ckpt})." if ckpt else "."))
            return
        if ckpt is None:
            _note(f"{left} and left no complete checkpoint: starting over.")
            return
        saved = ckpt.parent.parent / "config.yaml"
        if saved.is_file():
            current = yaml.safe_load(self._parser("fit").dump(config, skip_none=False))
            differ = settings_differ(yaml.safe_load(saved.read_text(encoding="utf-8")) or {}, current)
            if differ:
                raise ValueError(
                    f"{left}, but this command's settings differ from that run's in {', '.join(differ)} (its settings "
                    f"are in {saved}); rerun its command to resume it, add --fresh to start over in this folder, or "
                    f"give this run its own folder with --trainer.default_root_dir.")
        step = checkpoint_step(ckpt)
        _note(f"{left}: resuming from {ckpt}" + (f" at update {step}" if step is not None else "") +
              "; add --fresh to start over instead.")
        config["ckpt_path"] = str(ckpt)
        lock.record(resumed_from=str(ckpt))
        os.environ[RESUME_ENV] = str(ckpt)

    def _parse_ckpt_path(self) -> None:
        """Lightning replaces the model's settings by the checkpoint's here; keep the command's first, so that
        `_check_checkpoint` can refuse a config of another model instead of ignoring it silently."""
        sub = self.config.get("subcommand")
        if sub in ("validate", "test"):
            self._requested_model = yaml.safe_load(self._parser(sub).dump(self.config[sub], skip_none=False)).get("model")
        super()._parse_ckpt_path()

    def _check_checkpoint(self, sub: str) -> None:
        """Raise a one-line `ValueError` for ``validate``/``test`` without ``--ckpt_path`` (the untrained initial
        model would be scored) or with a checkpoint whose model the config does not describe."""
        config = self.config[sub]
        ckpt = config.get("ckpt_path")
        if not ckpt:
            raise ValueError(f"torch-ude {sub} needs --ckpt_path: without a checkpoint it would evaluate the untrained "
                             f"initial model; pass a run's checkpoint (<run folder>/.../checkpoints/last.ckpt), or score "
                             f"a trained run on any log with torch-ude score RUN --files ...")
        if not Path(ckpt).is_file():
            return  # (Lightning's keywords: last, best, ...)
        current = yaml.safe_load(self._parser(sub).dump(config, skip_none=False))
        current["model"] = getattr(self, "_requested_model", None) or current.get("model")
        differ = checkpoint_mismatch(ckpt, current)
        if differ:
            raise ValueError(f"the checkpoint {ckpt} holds another model than this config describes ({'; '.join(differ)});"
                             f" evaluate it with the config it was trained with, or train one with this config.")

    def instantiate_trainer(self, **kwargs) -> L.Trainer:
        """Lightning's trainer, with `UpdateProgressBar` in place of the `TQDMProgressBar` and `PeriodicCheckpoint` in
        place of the `ModelCheckpoint` Lightning adds by default (not of ones the config names)."""
        config = self.config_init[self.subcommand] if self.subcommand else self.config_init
        configured = config["trainer"].get("callbacks") or []
        configured = {id(c) for c in (configured if isinstance(configured, list) else [configured])}
        trainer = super().instantiate_trainer(**kwargs)  # (the trainer may extend the config's list in place)
        bar = trainer.progress_bar_callback
        if type(bar) is TQDMProgressBar and id(bar) not in configured:
            trainer.callbacks[trainer.callbacks.index(bar)] = UpdateProgressBar(bar.refresh_rate, bar._leave)
        default = [c for c in trainer.callbacks if type(c) is ModelCheckpoint and id(c) not in configured]
        for c in default:
            every = int(getattr(self.model, "checkpoint_every", 1000))
            trainer.callbacks[trainer.callbacks.index(c)] = PeriodicCheckpoint(every_n_updates=every)
        if self.subcommand == "fit" and not trainer.checkpoint_callbacks:
            _note("trainer.enable_checkpointing is false: this run saves no checkpoint, so a killed run cannot resume; "
                  "drop that setting to checkpoint periodically.")
        return trainer


def main(args: list[str] | None = None, run: bool = True) -> LightningCLI | dict:
    """Run the CLI (``score``: `torch_ude.score.main`, which returns its result dictionary).

    Args:
        args: command-line arguments (default ``sys.argv[1:]``); nested overrides holding null,
            NaN or infinity are rewritten first (`torch_ude.training.overrides.nest_override_values`).
        run: run the subcommand (False: only parse and instantiate; no run-folder lock).

    Returns:
        The `TorchUdeCLI` instance (its ``trainer``, ``model`` and ``datamodule``); the
        warnings of `KNOWN_NOTICES` are silenced while it runs.

    Raises:
        ValueError: for a file `check_files` rejects, and for an argument that cannot be parsed
            (one line: the setting and the reason); any error of the components or the run
            propagates unchanged.
        RuntimeError: (`torch_ude.training.run_folder.FolderInUseError`) for a run folder in use.
    """
    given = sys.argv[1:] if args is None else list(args)
    if given[:1] == ["score"]:  # not a Lightning subcommand: its own parser (torch_ude.score)
        from .score import main as score_main
        return score_main(given[1:])
    check_files(given)
    nested = nest_override_values(given)
    saved_argv = sys.argv
    if args is None and nested != given:
        sys.argv = [sys.argv[0], *nested]  # (LightningCLI warns when given both args and sys.argv)
    try:
        with quiet_known_notices():
            return TorchUdeCLI(
                L.LightningModule, L.LightningDataModule, subclass_mode_model=True, subclass_mode_data=True,
                seed_everything_default=0, save_config_kwargs={"overwrite": True},
                args=None if args is None else nested, run=run,
            )
    except ArgumentError as err:
        command = next((a for a in nested if a in ("fit", "validate", "test", "predict")), "fit")
        raise ValueError(f"{short_parse_error(str(err))}; fix this setting in the config or on the command line "
                         f"(torch-ude {command} --help lists the settings and their types).") from None
    finally:
        sys.argv = saved_argv


def fit_config(config: str | Path, root: str | Path, seed: int, overrides: Sequence[str] = (),
               reuse: bool = False) -> dict:
    """Run ``torch-ude fit`` in-process on a config and return the run's ``metrics.json``.

    The run writes its outputs and TensorBoard logs to ``root`` (``trainer.default_root_dir`` and the
    logger's ``save_dir``), without a progress bar.

    Args:
        config: path of the YAML config.
        root: run folder.
        seed: ``seed_everything`` value (stream and initial weights).
        overrides: further command-line arguments, e.g. ``["--data.noise", "0.02"]``.
        reuse: return the ``metrics.json`` of a run already in ``root`` instead of training again.

    Returns:
        The run's metrics (``e_field``, ``wall_s``, ... as `torch_ude.training` writes them).

    Raises:
        ValueError, RuntimeError: as `main`.
    """
    root = Path(root)
    if reuse and (root / "metrics.json").is_file():
        return json.loads((root / "metrics.json").read_text())
    main(["fit", "--config", str(config), "--seed_everything", str(seed), "--trainer.enable_progress_bar", "false",
          "--trainer.default_root_dir", str(root), "--trainer.logger.init_args.save_dir", str(root), *overrides])
    return json.loads((root / "metrics.json").read_text())


def jet_matching_run(config: str | Path, seed: int,
                     folder: str | Path) -> tuple[dict, L.LightningDataModule, HybridField]:
    """Run ``torch-ude fit`` in-process on a jet-matching config, without logger or progress bar, and keep the run.

    Args:
        config: path of the YAML config (e.g. ``configs/dfki_pendulum.yaml``).
        seed: ``seed_everything`` value (stream and initial weights).
        folder: the run folder (``trainer.default_root_dir``).

    Returns:
        The run's ``metrics.json`` with ``process_wall_s`` (s, the whole call) added, its data module (the
        logs read as the config says) and the field it exported (the EMA field with its envelope, or its
        physics alone where the residual check rejected it).

    Raises:
        ValueError, RuntimeError: as `main`.
    """
    start = time.perf_counter()
    cli = main(["fit", "--config", str(config), "--seed_everything", str(seed), "--trainer.logger", "false",
                "--trainer.enable_progress_bar", "false", "--trainer.default_root_dir", str(folder)])
    metrics = json.loads((Path(folder) / "metrics.json").read_text())
    metrics["process_wall_s"] = time.perf_counter() - start
    return metrics, cli.datamodule, cli.model.exported


def _ours(filename: str) -> bool:
    """Whether a source file belongs to one of the project's packages."""
    path = Path(filename).resolve()
    for name in _PACKAGES:
        spec = importlib.util.find_spec(name)
        for root in (spec.submodule_search_locations or []) if spec is not None else []:
            if path.is_relative_to(Path(root).resolve()):
                return True
    return False


def _frames(exc: BaseException) -> list:
    """The frames of ``exc``'s traceback, outermost first."""
    out, tb = [], exc.__traceback__
    while tb is not None:
        out.append(tb.tb_frame)
        tb = tb.tb_next
    return out


def _reader_failure(exc: BaseException) -> bool:
    """Whether ``exc`` was raised by a third-party file reader (`_READERS`) that the project's code called."""
    frames = _frames(exc)
    if not frames or not isinstance(exc, READ_ERRORS) or _ours(frames[-1].f_code.co_filename):
        return False
    module = str(frames[-1].f_globals.get("__name__", ""))
    return any(module == r or module.startswith(r + ".") for r in _READERS) and \
        any(_ours(f.f_code.co_filename) for f in frames)


def user_error(exc: BaseException) -> BaseException | None:
    """The error to report in one line: the outermost of ``exc`` and the errors it was raised
    from (jsonargparse wraps constructor errors) that is a `USER_ERRORS` type raised in the
    project's code, or a `READ_ERRORS` type raised by a file reader the project's code called
    (`_READERS`); None if there is none."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        frames = _frames(exc)
        if isinstance(exc, USER_ERRORS) and frames and _ours(frames[-1].f_code.co_filename):
            return exc
        if _reader_failure(exc):
            return exc
        exc = exc.__cause__ if exc.__cause__ is not None or exc.__suppress_context__ else exc.__context__
    return None


def one_line(exc: BaseException) -> str:
    """The line `console` prints for a `user_error`: its message; for a reader's error, also the file the
    project's code was reading (its ``path``, ``file`` or ``filename``), the reader and the fix."""
    if not _reader_failure(exc):
        return str(exc.args[0] if isinstance(exc, KeyError) and len(exc.args) == 1 else exc)
    frames = _frames(exc)
    caller = [f for f in frames if _ours(f.f_code.co_filename)][-1]
    names = [caller.f_locals.get(k) for k in ("path", "file", "filename", "name")]
    where = next((f"the file {n}" for n in names if isinstance(n, (str, Path))), "a file")
    reader = frames[-1].f_globals.get("__name__") or "a reader"
    module = caller.f_globals.get("__name__") or Path(caller.f_code.co_filename).stem
    return (f"{where} could not be read ({module}.{caller.f_code.co_name} called {reader}, "
            f"which raised {type(exc).__name__}: {exc}); check that the file is complete and of the format the "
            f"setting expects.")


def console() -> None:
    """Entry point of the ``torch-ude`` script: exit status 0 on success, 2 on an error.

    A `user_error` is printed as ``torch-ude: error: <message>`` (`one_line`) without the
    traceback unless the environment sets ``TORCH_UDE_TRACEBACK=1``.
    """
    try:
        main()
    except READ_ERRORS as exc:
        err = user_error(exc)
        if err is None or os.environ.get("TORCH_UDE_TRACEBACK", "") not in ("", "0"):
            raise
        print(f"torch-ude: error: {one_line(err)}", file=sys.stderr)
        print("torch-ude: (set TORCH_UDE_TRACEBACK=1 to see the traceback)", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    console()

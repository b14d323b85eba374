"""The run folder of ``torch-ude fit``: one run at a time, and a killed run found and resumed.

Two runs writing into one folder overwrite each other's outputs (``field.pt``, ``metrics.json``)
without an error, and a run killed by ``kill -9``, a power cut or an out-of-memory killer
leaves ``metrics.json`` saying ``"running"`` with nobody running. Both are told apart by a lock:

* `RunFolderLock` takes an exclusive ``fcntl.flock`` on ``<folder>/.torch-ude.lock`` for the
  whole run. The operating system drops the lock when the process ends, however it ends
  (exit, exception, SIGKILL), so a lock that cannot be taken always belongs to a live process:
  a second run into the folder is refused with `FolderInUseError`, naming the folder, the
  holder and the fix. The file stays behind (unlocked); its content only names the holder.
* A folder whose lock could be taken but whose ``metrics.json`` says ``"running"`` holds a run
  that was killed (`killed_run`). Its newest complete checkpoint (`newest_checkpoint`) is
  where the CLI resumes (`torch_ude.cli`), unless ``--fresh`` asks to start over or the new
  command's settings differ from the killed run's (`settings_differ`). Only the killed run's
  own checkpoints count: those written since its ``metrics.json`` said ``"running"`` (an
  earlier, finished run's ``last.ckpt`` in the folder is not where it stood), and the one it
  had itself resumed from, which the lock file records (`RunFolderLock.record`), so a run killed
  twice, the second time before its first checkpoint, still resumes where it stood.

Only Python's standard library and ``torch.load`` (to read a checkpoint's update count) are
used; the CLI decides what to do with the answers.
"""
from __future__ import annotations

import datetime
import json
import os
import socket
import zipfile
from pathlib import Path

import torch

__all__ = ["LOCK_FILE", "FolderInUseError", "RunFolderLock", "killed_run", "newest_checkpoint", "checkpoint_step",
           "settings_differ", "resume_point"]

LOCK_FILE = ".torch-ude.lock"

try:  # POSIX; elsewhere the folder is not locked (docs/usage.md says so)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None


class FolderInUseError(RuntimeError):
    """Another live process holds the run folder's lock."""


class RunFolderLock:
    """An exclusive lock on a run folder, held from `acquire` until `release` or the process's end.

    Args:
        folder: the run folder (``trainer.default_root_dir``); created if missing.
    """

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.path = self.folder / LOCK_FILE
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """True between a successful `acquire` and `release`."""
        return self._fd is not None

    def acquire(self, command: str = "") -> RunFolderLock:
        """Take the lock and write who holds it (process id, host, start time, ``command``).

        Returns:
            ``self``.

        Raises:
            FolderInUseError: if another process (or another lock in this one) holds it.
        """
        if self._fd is not None:
            return self
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise FolderInUseError(
                    f"the run folder {self.folder} is in use by another torch-ude run ({self.holder()}); wait for "
                    f"it to end, or give this run its own folder with --trainer.default_root_dir.") from None
        holder = {"pid": os.getpid(), "host": socket.gethostname(),
                  "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"), "command": command}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(holder) + "\n").encode(), 0)
        self._fd = fd
        return self

    def read(self) -> dict:
        """What the lock file says of its (last) holder; empty if there is none or it is unreadable."""
        try:
            info = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return info if isinstance(info, dict) else {}

    def holder(self) -> str:
        """Who holds (or last held) the lock, in words, from the lock file."""
        info = self.read()
        try:
            return f"process {info['pid']} on {info['host']}, started {info['started']}"
        except KeyError:
            return "a process that has not yet written its name"

    def record(self, **fields: object) -> None:
        """Add ``fields`` (JSON values) to the lock file's record of this holder (e.g. ``resumed_from``).

        Raises:
            RuntimeError: if the lock is not held.
        """
        if self._fd is None:
            raise RuntimeError("record() needs the lock held; acquire() it first.")
        info = {**self.read(), **fields}
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, (json.dumps(info) + "\n").encode(), 0)

    def release(self) -> None:
        """Drop the lock (the file stays, unlocked); nothing if it is not held."""
        if self._fd is None:
            return
        if fcntl is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None


def killed_run(folder: str | Path) -> bool:
    """Whether ``folder`` holds a run that did not end: its ``metrics.json`` says ``"running"``.

    Call it with the folder's lock held: then no live run owns the folder, so a ``"running"``
    status was left by a run that was killed. An unreadable ``metrics.json`` (cut short by a
    full disk) counts as killed too: every run writes it atomically, so only a foreign write
    can break it.
    """
    path = Path(folder) / "metrics.json"
    if not path.is_file():
        return False
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("status") == "running"
    except (OSError, ValueError, AttributeError):
        return True


def _checkpoints(folder: Path) -> list[Path]:
    """The ``*.ckpt`` files under ``folder``, leaving out any subfolder that is a run folder of its own (it
    holds a ``metrics.json`` or a lock file): another run's checkpoints are not this run's."""
    out = []
    for root, dirs, files in os.walk(folder):
        here = Path(root)
        dirs[:] = [d for d in dirs if not ((here / d / "metrics.json").exists() or (here / d / LOCK_FILE).exists())]
        out += [here / f for f in files if f.endswith(".ckpt")]
    return out


def newest_checkpoint(folder: str | Path, since: float | None = None, also: str | Path | None = None) -> Path | None:
    """The most recently written complete checkpoint (``*.ckpt``) under ``folder``, or None.

    A checkpoint whose write was cut short by the kill is not a complete ZIP archive (its
    central directory, written last, is missing) and is passed over for the one before it. A
    subfolder that is another run's folder is not searched.

    Args:
        folder: the run folder.
        since: consider only checkpoints written at or after this time (``os.stat`` mtime).
        also: one more candidate whatever its time (the checkpoint the run resumed from).
    """
    found = []
    candidates = _checkpoints(Path(folder)) + ([Path(also)] if also else [])
    for path in candidates:
        real = path.resolve()
        if not (real.is_file() and zipfile.is_zipfile(real)):
            continue
        mtime = real.stat().st_mtime
        if since is None or mtime >= since or path == Path(also or ""):
            found.append((mtime, path.name == "last.ckpt", str(path)))
    return Path(max(found)[2]) if found else None


def resume_point(folder: str | Path, previous: dict) -> Path | None:
    """Where a killed run in ``folder`` stood: its newest complete checkpoint (module doc), or None.

    Args:
        folder: the run folder, whose ``metrics.json`` says ``"running"`` (`killed_run`).
        previous: the lock file's record of the killed run (`RunFolderLock.read`, before this
            process took the lock), whose ``resumed_from`` is the checkpoint that run resumed from.
    """
    started = (Path(folder) / "metrics.json").stat().st_mtime
    return newest_checkpoint(folder, since=started, also=previous.get("resumed_from"))


def checkpoint_step(path: str | Path) -> int | None:
    """The update count (``global_step``) a Lightning checkpoint was saved at, or None if unreadable."""
    try:
        return int(torch.load(path, map_location="cpu", weights_only=True, mmap=True)["global_step"])
    except Exception:  # any unreadable checkpoint: the caller's message then gives no count
        return None


#: Settings a resumed run may change: where it resumes from, whether it starts over, the
#: iteration limit (extending a run; `torch_ude.training.resume`), and what only watches the run
#: (callbacks, the progress bar, how often it logs), not what it computes.
RESUMABLE_CHANGES = ("ckpt_path", "fresh", "trainer.max_steps", "trainer.callbacks", "trainer.enable_progress_bar",
                     "trainer.log_every_n_steps")


def settings_differ(saved: dict, current: dict, allowed: tuple[str, ...] = RESUMABLE_CHANGES) -> list[str]:
    """The dotted keys whose values differ between two run configs (``config.yaml`` as dicts).

    Args:
        saved: the killed run's config (the ``config.yaml`` Lightning saved beside its checkpoints).
        current: the config of the command that is about to run.
        allowed: keys that may differ (and everything under them).

    Returns:
        The differing keys, sorted; empty if the command is the killed run's.
    """
    def flat(node: object, prefix: str = "") -> dict[str, object]:
        if isinstance(node, dict):
            out: dict[str, object] = {}
            for key, value in node.items():
                out.update(flat(value, f"{prefix}{key}."))
            return out if out or not prefix else {prefix[:-1]: {}}
        return {prefix[:-1]: node}

    a, b, missing = flat(saved), flat(current), object()
    keep = [k for k in sorted(set(a) | set(b)) if not any(k == p or k.startswith(p + ".") for p in allowed)]
    return [k for k in keep if a.get(k, missing) != b.get(k, missing)]

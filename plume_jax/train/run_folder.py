"""Output folders of ``train`` and ``sweep``: nothing is replaced silently.

A command writes into a folder only if it is new or empty, or if the user
said what to do with what is there: ``--resume`` (continue the run in it)
or ``--overwrite`` (delete the outputs this command writes, then start
afresh; other files are left alone). The check runs before anything is
written, compiled or trained.
"""

from __future__ import annotations

import datetime as dt
import os
import pathlib
import platform
import shutil
from typing import Any, Iterable

from plume_jax.core.errors import StateError, ValidationError

#: The lock file of a run or sweep folder (:class:`FolderLock`).
LOCK_NAME = ".plume_jax.lock"
#: Where a resume from an older checkpoint moves the run's later state.
SUPERSEDED = "superseded"


def check_out_dir(out: pathlib.Path, *, overwrite: bool, resuming_here: bool = False,
                  command: str = "train") -> None:
    """``ValidationError`` (naming ``--out``) unless ``out`` may be written:
    it does not exist, is an empty folder, is the folder of the run being
    resumed (``resuming_here``), or ``overwrite`` is set."""
    if out.exists() and not out.is_dir():
        raise ValidationError.for_parameter("--out", str(out), "a folder (this is a file)")
    if resuming_here:
        if overwrite:
            raise ValidationError.for_parameter(
                "--overwrite", True, f"not set when resuming in the run's own folder {out} "
                "(it would delete the checkpoint being resumed)")
        return
    if overwrite or not out.exists():
        return
    entries = sorted(p.name for p in out.iterdir() if p.name != LOCK_NAME)
    if entries:
        shown = ", ".join(entries[:4]) + (", ..." if len(entries) > 4 else "")
        hint = (f"continue the run there with --resume {out}, " if command == "train" else "")
        raise ValidationError.for_parameter(
            "--out", str(out), f"a new or empty folder: it holds {len(entries)} entries "
            f"({shown}); {hint}replace the outputs of plume-jax {command} there with "
            "--overwrite, or choose another folder")


def clear_outputs(out: pathlib.Path, names: Iterable[str]) -> list[str]:
    """Delete the entries ``names`` (files or folders) of ``out`` that
    exist (a name with ``*`` in it that is no entry itself: every entry it
    matches); returns the names deleted."""
    removed = []
    for pattern in names:
        exact = out / pattern
        for path in (sorted(out.glob(pattern)) if "*" in pattern and not (
                exact.exists() or exact.is_symlink()) else [exact]):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
            else:
                continue
            removed.append(path.name)
    return removed


def make_out_dir(out: pathlib.Path) -> None:
    """Create ``out``; ``ValidationError`` naming ``--out`` if that fails."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValidationError.for_parameter(
            "--out", str(out), f"a folder that can be created ({exc.strerror or exc})") from None


class FolderLock:
    """An exclusive lock on a run or sweep folder for one process:
    ``fcntl.flock`` on the folder itself, while ``folder/.plume_jax.lock``
    names the holder (PID, host, command, start) for the others' message.

    A second ``train`` / ``sweep`` on the same folder gets a ``StateError``
    naming the holder's PID instead of interleaving its writes. The kernel
    releases the lock when the holder ends, however it ends (kill -9
    included), so a lock is never stale; a holder file a killed process left
    is only information, replaced by the next holder and removed on release.
    ``folder`` is created if needed (and removed again on :meth:`release` if
    this lock created it and it is still empty). Where ``fcntl`` does not
    exist (Windows) the folder is not locked.
    """

    def __init__(self, folder: pathlib.Path, command: str):
        self.folder = folder
        self.created = not folder.exists()
        make_out_dir(folder)
        self.path = folder / LOCK_NAME
        self.fd: int | None = None
        try:
            import fcntl
        except ImportError:  # no flock (Windows): the folder is not locked
            return
        self.fd = os.open(folder, os.O_RDONLY)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self.fd)
            self.fd = None
            try:
                holder = self.path.read_text(errors="replace")[:300].strip() or "unknown"
            except OSError:
                holder = "unknown"
            raise StateError(
                f"{folder} is in use by another plume-jax process ({holder}): wait for it to "
                "finish or stop it (its lock ends with it), or use another folder") from None
        try:
            self.path.write_text(
                f"pid {os.getpid()} on {platform.node()}, plume-jax {command}, since "
                f"{dt.datetime.now().isoformat(timespec='seconds')}\n")
        except OSError:
            pass  # a read-only folder: the lock holds; the run's own checks will say why

    def release(self) -> None:
        """Release the lock (idempotent)."""
        if self.fd is None:
            if self.created and self.folder.is_dir() and not any(self.folder.iterdir()):
                self.folder.rmdir()
            return
        import fcntl

        self.path.unlink(missing_ok=True)
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
        self.fd = None
        if self.created and not any(self.folder.iterdir()):
            self.folder.rmdir()

    def __enter__(self) -> "FolderLock":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def check_writable_logdir(folder: pathlib.Path, name: str = "tensorboard",
                          parameter: str = "run.tensorboard") -> None:
    """``ValidationError`` unless ``folder/name`` is (or can be made) a real
    folder this process can write: checked before a run changes anything, so
    an unwritable log folder never fails a run half-way through its resume."""
    path = folder / name
    allowed = (f"a writable folder {path} for the event files (it {{}}); fix it, or set "
               f"{parameter}: false")
    if path.is_symlink():
        raise ValidationError.for_parameter(parameter, True, allowed.format("is a symbolic link"))
    if path.exists() and not path.is_dir():
        raise ValidationError.for_parameter(parameter, True, allowed.format("is a file"))
    target = path if path.exists() else folder
    if target.exists() and not os.access(target, os.W_OK | os.X_OK):
        raise ValidationError.for_parameter(parameter, True, allowed.format("is not writable"))
    if path.exists():
        try:
            probe = path / f".write-probe-{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise ValidationError.for_parameter(
                parameter, True, allowed.format(f"cannot be written: {exc.strerror or exc}")
            ) from None


def set_aside_later_state(out: pathlib.Path, update: int, checkpoint: pathlib.Path,
                          rows: list[dict[str, Any]]) -> pathlib.Path | None:
    """Before a run folder resumes from ``checkpoint`` at ``update`` while it
    holds a later state (kept checkpoints past ``update``, or a
    ``checkpoint/`` further on): move that later state aside, whole, to
    ``out/superseded/after_update_<N>-<time>/`` — the metrics (a full copy),
    the later kept checkpoints and ``checkpoint/`` (moved), the policy and
    summary (copied) — and make ``checkpoint/`` the resumed one. Every step
    is a copy or an atomic rename, so a kill at any moment loses nothing.
    Returns the folder written, or None when there was no later state (a
    run resumed from its own latest checkpoint keeps its folder)."""
    from plume_jax.train.checkpoint import checkpoint_update

    kept_dir = out / "checkpoints"
    later = sorted(p for p in kept_dir.glob("update_*") if p.name[7:].isdigit()
                   and int(p.name[7:]) > update) if kept_dir.is_dir() else []
    current = out / "checkpoint"
    current_later = False
    if current.is_dir() and current.resolve() != checkpoint.resolve():
        try:
            current_later = checkpoint_update(current) > update  # runner.msgpack's own
        except ValidationError:
            current_later = True  # damaged: keep it aside rather than lose it
    if not later and not current_later:
        return None
    stamp = dt.datetime.now().strftime("%Y%m%dT%H%M%S")
    dest = out / SUPERSEDED / f"after_update_{update:08d}-{stamp}"
    n = 1
    while dest.exists():
        n += 1
        dest = out / SUPERSEDED / f"after_update_{update:08d}-{stamp}-{n}"
    dest.mkdir(parents=True)
    for name in ("metrics.jsonl", "metrics.csv", "summary.json", "evaluations.jsonl"):
        if (out / name).is_file():
            shutil.copy2(out / name, dest / name)
    for name in ("policy", "best"):
        if (out / name).is_dir():
            shutil.copytree(out / name, dest / name)
    if later:
        (dest / "checkpoints").mkdir()
        for folder in later:
            os.replace(folder, dest / "checkpoints" / folder.name)
    if current_later:
        fresh = out / ".checkpoint.resumed"
        if fresh.exists():
            shutil.rmtree(fresh)
        source = dest / "checkpoints" / checkpoint.name if checkpoint.parent == kept_dir \
            and not checkpoint.exists() else checkpoint
        shutil.copytree(source, fresh)
        os.replace(current, dest / "checkpoint")
        os.replace(fresh, current)
    (dest / "README.txt").write_text(
        f"This run was resumed from update {update} ({checkpoint}) while it held a later "
        f"state; that later state was moved here, whole, instead of being deleted.\n"
        f"Metrics rows of updates after {update}: "
        f"{sum(1 for r in rows if int(r.get('update', 0)) > update)}.\n")
    return dest

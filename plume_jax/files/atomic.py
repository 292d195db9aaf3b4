"""The one atomic file writer (layer 0): every file the package keeps as a
record (run folder metadata, checkpoints, metrics tables, evaluation
reports and figures, scoreboard records, dataset records) goes through
:func:`atomic_write`. Exports written to a path the user names
(``save_config``, ``save_movie``, videos, PNGs) are written in place.

The content goes to a uniquely named temporary file in the target's folder
(hidden: ``.NAME.tmp-*``), is flushed and fsynced, renamed onto the target
with ``os.replace`` (a reader sees the old file or the new one, whole, and
a kill leaves at most the temporary file, which the next write does not
trip over), and the folder is fsynced so that the rename survives a power
loss. On any error or interrupt the temporary file is removed and the
target is as it was.
"""

from __future__ import annotations

import os
import pathlib
import re
import secrets
from typing import Any, Callable, Union

#: What :func:`atomic_write` writes: bytes, text (UTF-8), or a function that
#: writes the temporary file at the path it is given.
Content = Union[bytes, str, Callable[[pathlib.Path], Any]]
#: What a temporary file's name holds after ``.<target name>`` (then the
#: writer's pid and a random tag).
TEMPORARY_INFIX = ".tmp-"
#: A temporary file's whole name (:func:`is_temporary`).
_TEMPORARY_NAME = re.compile(r"^\..+" + re.escape(TEMPORARY_INFIX) + r"[A-Za-z0-9_]+$")


def fsync_folder(folder: str | os.PathLike) -> None:
    """Make the renames in ``folder`` durable (where folders can be opened:
    not on Windows)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def new_folder(parent: str | os.PathLike, prefix: str) -> pathlib.Path:
    """Create and return a folder ``parent/<prefix><random hex>`` that did not
    exist (a folder a killed process left under the same name is never
    reused), with the mode a plain ``os.mkdir`` gives: the umask applies
    (``tempfile.mkdtemp`` would make it 0700). ``parent`` is made if missing."""
    parent = pathlib.Path(parent)
    parent.mkdir(parents=True, exist_ok=True)
    while True:
        path = parent / f"{prefix}{secrets.token_hex(4)}"
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue


def _fsync_file(path: pathlib.Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _temporary(path: pathlib.Path) -> pathlib.Path:
    """A new hidden temporary file name beside ``path``
    (``.<name>`` + :data:`TEMPORARY_INFIX` + pid and a random tag)."""
    return path.with_name(f".{path.name}{TEMPORARY_INFIX}{os.getpid()}_{secrets.token_hex(4)}")


def _write_temporary(path: pathlib.Path, content: Content) -> pathlib.Path:
    """``content`` written, flushed and fsynced to a new temporary file beside
    ``path`` (the folder made if missing); returns it. On any error it is
    removed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temporary(path)
    # created here, exclusively, with the mode a new file gets (0o666 less the umask)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        if callable(content):
            os.close(fd)
            fd = -1
            content(tmp)
            _fsync_file(tmp)
        else:
            data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
            with os.fdopen(fd, "wb") as f:
                fd = -1
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
    except BaseException:
        if fd >= 0:
            os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def atomic_write(path: str | os.PathLike, content: Content) -> pathlib.Path:
    """Write ``content`` to ``path`` whole or not at all (module docstring):
    ``bytes``, ``str`` (written as UTF-8) or ``content(tmp)``, a function
    that writes the file at the temporary path ``tmp`` (matplotlib's
    ``savefig``, pyarrow, ``json.dump`` into ``open(tmp, "w")``, ...). The
    folder is made if missing; the file gets the mode a new file gets (the
    umask applies). Returns ``path``."""
    path = pathlib.Path(path)
    tmp = _write_temporary(path, content)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_folder(path.parent)
    return path


def atomic_create(path: str | os.PathLike, content: Content) -> bool:
    """Write ``content`` to ``path`` whole, only if no file is there: ``True``
    when this call created it, ``False`` when one already was (left as it
    is; another process may have made it a moment before). Of several
    processes creating one path at once exactly one gets ``True`` and the
    others find its file whole: the content is written beside it, then
    hard-linked in (``os.link`` fails on an existing name). Where the
    filesystem has no hard links, an atomic rename onto a path still absent
    (two processes racing there may both get ``True``)."""
    path = pathlib.Path(path)
    tmp = _write_temporary(path, content)
    try:
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        except OSError:  # no hard links on this filesystem
            if path.exists():
                return False
            os.replace(tmp, path)
        fsync_folder(path.parent)
        return True
    finally:
        tmp.unlink(missing_ok=True)


def is_temporary(name: str) -> bool:
    """Whether a file name is one of this module's temporary files (a write
    in progress, or one a kill interrupted)."""
    return _TEMPORARY_NAME.match(name) is not None


__all__ = ["Content", "TEMPORARY_INFIX", "atomic_create", "atomic_write", "fsync_folder",
           "is_temporary", "new_folder"]

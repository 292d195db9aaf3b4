"""Output folders of ``train`` and ``sweep``: nothing is replaced silently.

A command writes into a folder only if it is new or empty, or if the user
said what to do with what is there: ``--resume`` (continue the run in it)
or ``--overwrite`` (delete the outputs this command writes, then start
afresh; other files are left alone). The check runs before anything is
written, compiled or trained.
"""

from __future__ import annotations

import pathlib
import shutil
from typing import Iterable

from plume_jax.errors import ValidationError


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
    entries = sorted(p.name for p in out.iterdir())
    if entries:
        shown = ", ".join(entries[:4]) + (", ..." if len(entries) > 4 else "")
        hint = (f"continue the run there with --resume {out}, " if command == "train" else "")
        raise ValidationError.for_parameter(
            "--out", str(out), f"a new or empty folder: it holds {len(entries)} entries "
            f"({shown}); {hint}replace the outputs of plume-jax {command} there with "
            "--overwrite, or choose another folder")


def clear_outputs(out: pathlib.Path, names: Iterable[str]) -> list[str]:
    """Delete the entries ``names`` (files or folders) of ``out`` that
    exist; returns the names deleted."""
    removed = []
    for name in names:
        path = out / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
        else:
            continue
        removed.append(name)
    return removed


def make_out_dir(out: pathlib.Path) -> None:
    """Create ``out``; ``ValidationError`` naming ``--out`` if that fails."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValidationError.for_parameter(
            "--out", str(out), f"a folder that can be created ({exc.strerror or exc})") from None

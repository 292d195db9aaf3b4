"""Helpers shared by the ``plume-jax`` subcommands: the default output
folder and checks of output paths made before any long work starts
(``--set NAME=VALUE`` is read by :func:`plume_jax.settings.parse_overrides`)."""

from __future__ import annotations

import os
import pathlib

from plume_jax.core.errors import ValidationError


def default_out(config: str) -> str:
    """``runs/<config file stem>``; for a file named ``best_config.yaml``
    (what ``plume-jax tune`` writes into its study folder),
    ``runs/<its folder's name>_best``, so that two studies' best configs
    do not train into the same folder (``runs/tune_a/best_config.yaml`` ->
    ``runs/tune_a_best``)."""
    from plume_jax.train.tune.report import BEST_CONFIG  # the name tune writes

    path = pathlib.Path(config)
    study = path.resolve().parent.name if path.name == BEST_CONFIG else ""
    return str(pathlib.Path("runs") / (f"{study}_best" if study else path.stem))


def check_output_folder(path: str, option: str) -> str:
    """Create the folder ``path`` (and its parents) now, and check that files
    can be written in it, so that a bad ``--out`` fails before any long work.

    Raises:
        ValidationError: naming ``option``.
    """
    import tempfile

    if os.path.exists(path) and not os.path.isdir(path):
        raise ValidationError.for_parameter(option, path, "a folder (this is an existing file)")
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as error:
        raise ValidationError.for_parameter(
            option, path, f"a folder that can be created and written ({error.strerror or error})"
        ) from None
    return path


def check_output_file(path: str, option: str, suffixes: tuple[str, ...] | None = None) -> str:
    """Check, before any long work, that the file ``path`` can be written: its
    folder exists and is writable, ``path`` is not a folder, and (when
    ``suffixes`` is given) it ends in one of them.

    Raises:
        ValidationError: naming ``option``.
    """
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ValidationError.for_parameter(option, path, "a file name (this is a folder)")
    if suffixes is not None and os.path.splitext(path)[1].lower() not in suffixes:
        raise ValidationError.for_parameter(option, path,
                                            f"a file name ending in one of {list(suffixes)}")
    if not os.path.isdir(folder):
        raise ValidationError.for_parameter(option, path,
                                            f"a file in an existing folder ({folder} does not exist)")
    if not os.access(folder, os.W_OK):
        raise ValidationError.for_parameter(option, path,
                                            f"a file in a writable folder ({folder} is not)")
    return path

"""What plume_jax ships beside its code, found in one place: the repository's
``configs/`` folder (the example training, sweep and tuning configs, the
presets' config files, the evaluation scenarios and the zoo of trained agents).

A source checkout (``git clone``, then ``pip install -e .``) has it at
``<checkout>/configs``. A wheel carries a copy of it at
``plume_jax/data/configs`` (``setup.py`` copies it in when the wheel is
built; the repository's own ``configs/`` stays where it is). Every lookup asks
:func:`configs_root`: the checkout's folder first, then the installed copy.

``plume-jax configs`` (:func:`copy_configs`) writes the shipped folder out as
``./configs``, so that the docs' commands (``--config configs/...``) run
verbatim outside a checkout.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil

from plume_jax.core.errors import ValidationError

#: The folder that holds the ``plume_jax`` package: a checkout's root when
#: plume_jax runs from a checkout, ``site-packages`` when it was installed.
_PACKAGE_PARENT = pathlib.Path(__file__).resolve().parents[2]
#: The checkout's ``configs/`` (absent from an installed wheel).
CHECKOUT_CONFIGS = _PACKAGE_PARENT / "configs"
#: The copy a wheel carries (absent from a checkout).
INSTALLED_CONFIGS = pathlib.Path(__file__).resolve().parents[1] / "data" / "configs"
#: A scenario name: the stem of a shipped scenario file (``singh2023_constant``;
#: ``-`` and ``_`` are read alike, so the scenario's own ``name:``,
#: ``singh2023-constant``, names it too).
SCENARIO_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


def _in_checkout() -> bool:
    """Whether plume_jax runs from a source checkout: ``pyproject.toml`` and
    ``configs/`` beside the package (a ``configs`` folder some other
    distribution put into ``site-packages`` is not ours)."""
    return (_PACKAGE_PARENT / "pyproject.toml").is_file() and CHECKOUT_CONFIGS.is_dir()


def configs_root() -> pathlib.Path:
    """The shipped ``configs/`` folder: the checkout's when plume_jax runs
    from one, else the installed copy (``plume_jax/data/configs``). When
    neither exists (a wheel built without it), the installed copy's path, so
    that a caller's error names where it was looked for."""
    return CHECKOUT_CONFIGS if _in_checkout() else INSTALLED_CONFIGS


def shipped_path(*parts: str) -> pathlib.Path:
    """``configs/<parts...>`` of :func:`configs_root`, e.g.
    ``shipped_path("zoo")`` or ``shipped_path("scenarios",
    "singh2023_constant.yaml")`` (the path; it may not exist)."""
    return configs_root().joinpath(*parts)


def describe_root() -> str:
    """Where the shipped configs come from, for messages."""
    if _in_checkout():
        return f"the checkout's {CHECKOUT_CONFIGS}"
    return f"the installed package's {INSTALLED_CONFIGS}"


def _scenario_key(name: str) -> str:
    return name.replace("-", "_").lower()


def scenario_names() -> dict[str, pathlib.Path]:
    """Every shipped scenario by name (the file's stem), ``configs/scenarios``
    and its sub-folders (``recorded/``), sorted by name."""
    folder = shipped_path("scenarios")
    found: dict[str, pathlib.Path] = {}
    if folder.is_dir():
        for path in sorted(folder.rglob("*.yaml")):
            found.setdefault(path.stem, path)
    return dict(sorted(found.items()))


def scenario_path(name: str, parameter: str = "--scenario") -> pathlib.Path:
    """The shipped scenario file named ``name`` (``singh2023_constant``,
    or its ``name:`` ``singh2023-constant``).

    Raises:
        ValidationError: (parameter ``parameter``) not a shipped scenario's
            name, with the closest names and every name.
    """
    known = scenario_names()
    wanted = _scenario_key(name)
    for stem, path in known.items():
        if _scenario_key(stem) == wanted:
            return path
    from plume_jax.settings.schema import did_you_mean

    raise ValidationError.for_parameter(
        parameter, name, f"a scenario YAML file, a folder of them, or the name of a scenario "
        f"shipped in {describe_root()}/scenarios{did_you_mean(name, list(known))}: one of "
        f"{list(known) or 'none (that folder is missing)'}")


def is_scenario_name(text: str) -> bool:
    """Whether ``text`` is written as a scenario name (no folder, no
    ``.yaml``), not as a path."""
    return bool(SCENARIO_NAME.fullmatch(text))


def copy_configs(destination: str | os.PathLike) -> pathlib.Path:
    """Copy the shipped ``configs/`` folder to ``destination`` (a path that
    does not exist yet), whole or not at all: it is copied beside it under a
    temporary name, then renamed into place. Returns ``destination``.

    Raises:
        ValidationError: (parameter ``--out``) ``destination`` exists, or
            no shipped configs folder.
    """
    destination = pathlib.Path(destination)
    source = configs_root()
    if not source.is_dir():
        raise ValidationError.for_parameter(
            "--out", str(destination), f"a copy of the shipped configs, but there is none at "
            f"{source} (reinstall plume-jax from a wheel or a source checkout)")
    if os.path.lexists(destination):
        raise ValidationError.for_parameter(
            "--out", str(destination), "a path that does not exist yet (nothing was written; "
            "move it away or name another --out)")
    from plume_jax.files.atomic import fsync_folder, new_folder

    parent = destination.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = new_folder(parent, f".{destination.name}.")
    try:
        shutil.copytree(source, staging / "configs")
        os.replace(staging / "configs", destination)
        fsync_folder(parent)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return destination


__all__ = ["CHECKOUT_CONFIGS", "INSTALLED_CONFIGS", "configs_root", "copy_configs",
           "describe_root", "is_scenario_name", "scenario_names", "scenario_path",
           "shipped_path"]

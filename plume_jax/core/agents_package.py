"""The top-level ``agents`` package that ships with plume_jax, checked.

plume_jax installs two import names: ``plume_jax`` and ``agents`` (the
baseline agents, a top-level package by design). ``agents`` is a common
name: Python imports the first one on ``sys.path``, and the current folder
or the running script's folder comes first. plume_jax's own modules call
:func:`check_agents_package` before importing from ``agents``, so another
``agents`` module found first stops them with an :class:`ImportError` that
names both files, instead of running someone else's code.
"""

from __future__ import annotations

import importlib
import pathlib
import sys


def expected_agents_init() -> pathlib.Path:
    """``agents/__init__.py`` next to the ``plume_jax`` package that is running
    (site-packages for an install, the checkout for an editable one)."""
    return pathlib.Path(__file__).resolve().parents[2] / "agents" / "__init__.py"


def check_agents_package() -> None:
    """Import ``agents`` and raise :class:`ImportError` unless it is the package
    that ships with this plume_jax. Cheap after the first call (the module is
    cached in ``sys.modules``)."""
    module = sys.modules.get("agents") or importlib.import_module("agents")
    found = getattr(module, "__file__", None)
    expected = expected_agents_init()
    if found is None or pathlib.Path(found).resolve() != expected:
        raise ImportError(
            f"the module named 'agents' was imported from {found or module!r}, not from "
            f"plume_jax's baseline agents package ({expected}); another 'agents' module "
            "comes first on sys.path (a local agents.py or agents/ in the current or the "
            "script's folder, or an earlier sys.path entry). Rename that module, run from "
            "another folder, or start Python with -P (PYTHONSAFEPATH=1) so the current "
            "folder is not searched first.")

"""Every dotted ``plume_jax.x.y`` name that README.md and docs/*.md write
resolves: the longest prefix that is a module imports, and the rest are
attributes of it (issue 55, item 6: modules moved, and code written against
the docs' ``plume_jax.legacy_step`` raised ``ModuleNotFoundError``).

A few dotted names in the docs are not Python paths but identifiers of file
formats; each is listed with the source file that writes it, so the list
cannot outlive them.
"""

from __future__ import annotations

import importlib
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: ``plume_jax.a.b...`` not inside a longer name, a file path (``/``) or a
#: file name (``plume_jax.egg-info``).
DOTTED = re.compile(r"(?<![\w./-])plume_jax(?:\.[A-Za-z_]\w*)+(?![\w/-])")
#: Dotted names the docs use as format identifiers, and the file that writes each.
NOT_PYTHON_PATHS = {
    "plume_jax.capture": "plume_jax/files/capture_files.py",         # run.json's "schema"
    "plume_jax.capture_schema": "plume_jax/files/capture_files.py",  # Parquet metadata key
}


def _named() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for page in PAGES:
        text = page.read_text()
        for match in DOTTED.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.setdefault(match.group(0), []).append(f"{page.relative_to(ROOT)}:{line}")
    return found


NAMED = _named()


def resolve(name: str) -> str | None:
    """None when ``name`` resolves, else what is missing."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            obj = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name is not None and not module_name.startswith(error.name):
                raise  # the module exists but one of its own imports is missing
            continue
        for depth, attribute in enumerate(parts[cut:], start=cut):
            if not hasattr(obj, attribute):
                return f"no module {'.'.join(parts[:depth + 1])}, and " \
                       f"{'.'.join(parts[:depth])} has no attribute {attribute!r}"
            obj = getattr(obj, attribute)
        return None
    return "no such module"


def test_the_docs_name_module_paths():
    assert "plume_jax.envs.legacy_step.LegacyStepWrapper" in NAMED  # the README names it
    assert len(NAMED) > 50


@pytest.mark.parametrize("name", sorted(set(NAMED) - set(NOT_PYTHON_PATHS)))
def test_every_plume_jax_path_in_the_docs_resolves(name):
    missing = resolve(name)
    assert missing is None, f"{name} ({', '.join(NAMED[name])}): {missing}"


def test_a_moved_module_path_is_caught():
    """The check fails on what issue 55 found: the path before the move."""
    assert resolve("plume_jax.legacy_step.LegacyStepWrapper") is not None
    assert resolve("plume_jax.types") is not None
    assert resolve("plume_jax.envs.legacy_step.LegacyStepWrapper") is None
    assert DOTTED.findall("`plume_jax.egg-info`, `plume_jax/files/x.py`, "
                          "`plume_jax.checkpoint/3`") == []


@pytest.mark.parametrize("name", sorted(NOT_PYTHON_PATHS))
def test_format_identifiers_the_docs_name_are_written_by_the_code(name):
    assert name in NAMED, f"the docs no longer name {name}: drop it from NOT_PYTHON_PATHS"
    assert f'"{name}"' in (ROOT / NOT_PYTHON_PATHS[name]).read_text()

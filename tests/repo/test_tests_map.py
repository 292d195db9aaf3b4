"""tests/README.md maps every test file to what it tests (issue 56, item 6):
one table row per ``tests/**/test_*.py``, naming the module(s) under
``plume_jax/`` or ``agents/`` (or the page, script or config) it checks. A
test file added or renamed without its row, or a module renamed under a
row that still names it, fails here. Read from the files, nothing imported."""

from __future__ import annotations

import re

from tests.docs_blocks import ROOT

MAP = ROOT / "tests" / "README.md"
#: A row: ``| `tests/<area>/test_x.py` | `path`, `path` |``.
_ROW = re.compile(r"^\| `(tests/[^`]+)` \| (.+) \|\s*$", re.M)


def rows(text: str) -> list[tuple[str, list[str]]]:
    """``(test file, [paths it names])`` for each row of the map, in order."""
    return [(test, re.findall(r"`([^`]+)`", cell)) for test, cell in _ROW.findall(text)]


def test_every_test_file_has_one_row_and_every_row_a_test_file():
    mapped = [test for test, _ in rows(MAP.read_text())]
    actual = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py"))
    doubled = sorted({t for t in mapped if mapped.count(t) > 1})
    assert not doubled, f"tests/README.md lists these test files twice: {doubled}"
    assert sorted(mapped) == actual, (
        f"tests/README.md: no row for {sorted(set(actual) - set(mapped))}; "
        f"rows for missing files {sorted(set(mapped) - set(actual))}")


def test_every_path_the_map_names_exists():
    missing = [(test, path) for test, paths in rows(MAP.read_text()) for path in paths
               if not (ROOT / path).exists()]
    assert not missing, f"tests/README.md names paths that do not exist: {missing}"
    empty = [test for test, paths in rows(MAP.read_text()) if not paths]
    assert not empty, f"tests/README.md rows that name nothing they test: {empty}"


def test_the_row_reader_sees_rows_and_their_paths():
    """The checks above hold by reading rows; a row of the map's form is read
    whole, and text that is not a row is not."""
    text = ("| `tests/x/test_a.py` | `plume_jax/a.py`, `agents/b.py` |\n"
            "| test file | what it tests |\n"
            "`tests/x/test_b.py`: prose, not a row\n")
    assert rows(text) == [("tests/x/test_a.py", ["plume_jax/a.py", "agents/b.py"])]

"""The docs home page's "Where to start" table and the README's length.

Regression (issue 44): the table had no row for recorded datasets, the zoo,
the scoreboard, captures or adding an algorithm, and the README had grown
to 326 lines of reference a new user scrolls past."""

from __future__ import annotations

import re

import pytest
from tests.docs_blocks import ROOT

pytest.importorskip("pymdownx", reason="pymdownx (the docs extra) slugifies headings")


def _anchors(page: str) -> set[str]:
    """The heading anchors of docs/<page> as the site makes them (mkdocs.yml:
    pymdownx.slugs.slugify, lower case)."""
    from pymdownx.slugs import slugify

    slug = slugify(case="lower")
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    return {slug(re.sub(r"^#+\s*", "", line).replace("`", ""), "-")
            for line in text.splitlines() if line.startswith("#")}


def test_where_to_start_has_rows_for_datasets_zoo_scoreboard_captures_and_algorithms():
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    table = index.split("## Where to start", 1)[1].split("\n## ", 1)[0]
    for wanted in ("plumes.md#registered-datasets-plume-jax-data",
                   "agents.md#the-zoo-trained-agents-by-name", "(scoreboard.md)",
                   "agents.md#captured-trajectories",
                   "training.md#algorithms-one-interface-adding-one"):
        assert wanted in table, wanted
    for page, anchor in re.findall(r"\(([a-z_]+\.md)#([a-z0-9-]+)\)", table):
        assert anchor in _anchors(page), f"{page}#{anchor}"


def test_the_readme_is_at_most_300_lines():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines; move reference into docs/"

"""mkdocs hooks (mkdocs.yml ``hooks:``) for the documentation site.

``BENCHMARKS.md`` and ``CHANGELOG.md`` sit at the repository root, outside
``docs/``; the guides link them as ``../BENCHMARKS.md`` so the links work on
GitHub. These hooks publish the two files as the pages ``benchmarks.md`` and
``changelog.md`` and rewrite those links to point at them, leaving the
sources unchanged; the root pages' own ``docs/X`` links (right on GitHub,
from the root) become ``X`` there. They also drop the ``test=NAME`` word from a code
fence's info string (``tests/docs_blocks.py`` reads it to run the block;
Markdown renderers other than GitHub's refuse the fence with it).
"""

from __future__ import annotations

import pathlib
import re

from mkdocs.structure.files import File

ROOT = pathlib.Path(__file__).resolve().parents[2]
#: repository-root file -> the page it becomes on the site
ROOT_PAGES = {"BENCHMARKS.md": "benchmarks.md", "CHANGELOG.md": "changelog.md"}
_ROOT_LINK = re.compile(r"\]\(\.\./(" + "|".join(re.escape(n) for n in ROOT_PAGES) + r")")
_DOCS_LINK = re.compile(r"\]\(docs/")
_TEST_TAG = re.compile(r"^(\s*```\w+) test=[\w-]+[ \t]*$", flags=re.M)


def on_files(files, config):
    for name, page in ROOT_PAGES.items():
        files.append(File.generated(config, page, content=(ROOT / name).read_text()))
    return files


def on_page_markdown(markdown, page, config, files):
    markdown = _TEST_TAG.sub(r"\1", markdown)
    if page.file.src_uri in ROOT_PAGES.values():
        markdown = _DOCS_LINK.sub("](", markdown)
    return _ROOT_LINK.sub(lambda m: "](" + ROOT_PAGES[m.group(1)], markdown)

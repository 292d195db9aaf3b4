"""The Python code blocks of README.md and docs/*.md, for the tests that run them.

A block opens with ```` ```python ```` and runs as written in
``tests/docs/test_docs.py`` (the blocks of one page in order, in one namespace).
A block that needs a fixture or smaller sizes opens with
```` ```python test=NAME ```` instead (renderers read only the first word) and
is run by the dedicated test that ``tests/docs/test_docs.py`` names for ``NAME``.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"^```python([^\n]*)\n(.*?)^```", flags=re.S | re.M)


@dataclasses.dataclass(frozen=True)
class Block:
    page: pathlib.Path
    line: int
    tag: str | None
    code: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: pathlib.Path) -> list[Block]:
    """Every ```python block of ``page``, in order."""
    text = page.read_text()
    out = []
    for match in _FENCE.finditer(text):
        info = match.group(1).strip()
        tag = None
        if info:
            found = re.fullmatch(r"test=([\w-]+)", info)
            if found is None:
                raise ValueError(f"{page}: unknown code block info {info!r}; "
                                 "use ```python or ```python test=NAME")
            tag = found.group(1)
        out.append(Block(page, text.count("\n", 0, match.start()) + 1, tag, match.group(2)))
    return out


def all_blocks() -> list[Block]:
    return [b for page in PAGES for b in blocks(page)]


def tagged(tag: str) -> list[str]:
    """The code of every block tagged ``test=tag``, in page order."""
    found = [b.code for b in all_blocks() if b.tag == tag]
    if not found:
        raise LookupError(f"no ```python test={tag} block in README.md or docs/")
    return found

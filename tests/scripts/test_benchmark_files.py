"""The benchmark write-ups name only files that ship with the repository.

Regression: benchmarks/farrell_sweep/README.md described its figures
(periodic_success.png, the curves of every member) while .gitignore's
``*.png`` kept them out of every commit, so a clone had none of them. Each
file a write-up names (a relative link, or a backticked file name) must be in
the checkout: next to the write-up, in one of its subfolders, or at that path
from the repository root. CI tests a clean clone, where an ignored file is
absent."""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
WRITE_UPS = sorted((ROOT / "benchmarks").rglob("*.md"))
FILE_NAME = re.compile(r"^[\w./-]+\.(png|json|jsonl|csv|md|yaml|npz|parquet)$")
LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\s]+)`")


def named_files(text: str) -> set[str]:
    """Relative file names in a write-up: link targets (no URL, no anchor)
    and backticked names with a file extension and no placeholder."""
    names = {t for t in LINK.findall(text) if "://" not in t and not t.startswith("#")}
    names |= {t for t in CODE.findall(text) if FILE_NAME.match(t)}
    return {n.split("#")[0] for n in names}


def found(name: str, folder: pathlib.Path) -> bool:
    return ((folder / name).exists() or (ROOT / name).exists()
            or any(folder.rglob(pathlib.PurePath(name).name)))


def test_the_pattern_finds_links_and_backticked_file_names():
    text = "![fig](a.png) see `b/c.json`, `configs/x_<name>.yaml`, `plume-jax sweep`, [u](http://x)"
    assert named_files(text) == {"a.png", "b/c.json"}


@pytest.mark.parametrize("write_up", WRITE_UPS, ids=[str(p.relative_to(ROOT)) for p in WRITE_UPS])
def test_every_file_a_benchmark_write_up_names_is_in_the_checkout(write_up):
    missing = sorted(n for n in named_files(write_up.read_text())
                     if not found(n, write_up.parent))
    assert not missing, f"{write_up.relative_to(ROOT)} names files that are not in the checkout"
    if (ROOT / ".git").exists() and shutil.which("git"):  # in a work tree: none is ignored
        folder_files = [str(p.relative_to(ROOT)) for p in write_up.parent.rglob("*")
                        if p.is_file()]
        ignored = subprocess.run(["git", "check-ignore", "--no-index", *folder_files], cwd=ROOT,
                                 capture_output=True, text=True).stdout.split()
        assert not ignored, f"git ignores these files beside {write_up.relative_to(ROOT)}"

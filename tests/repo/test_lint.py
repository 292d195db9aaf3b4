"""The linter passes: ``ruff check`` over the repository with the rules of
``[tool.ruff.lint]`` in pyproject.toml (well under a second).

ruff comes with the ``test`` extra; where it is not installed the test is
skipped. Run it by hand with ``ruff check .`` from the repository root.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.docs_blocks import ROOT

pytest.importorskip("ruff", reason="ruff (the test extra) is not installed")


def test_ruff_check_passes():
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"ruff check found problems:\n{result.stdout}{result.stderr}"


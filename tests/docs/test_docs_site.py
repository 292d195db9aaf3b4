"""The documentation site (mkdocs.yml) builds with warnings as errors.

``mkdocs build --strict`` fails on a broken link or anchor between pages and on
an API page naming a function, class or docstring parameter that no longer
exists, so a rename breaks this test, not the reader. Needs the ``docs`` extra
(``pip install -e ".[docs]"``, part of the README's test command, so CI builds
the site); about 10 s on the 2-core development machine.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.docs_blocks import ROOT

pytest.importorskip("mkdocs", reason="the docs extra is not installed")
pytest.importorskip("mkdocstrings", reason="the docs extra is not installed")


def test_docs_site_builds_strict(tmp_path):
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, result.stderr[-4000:]
    assert (site / "index.html").is_file()
    reference = (site / "api" / "env" / "index.html").read_text()
    assert "plume_jax.envs.presets.make" in reference, "the API page lost make()"
    assert (site / "benchmarks" / "index.html").is_file()

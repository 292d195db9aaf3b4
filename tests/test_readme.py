"""The README's commands and quick start work as written."""

from __future__ import annotations

import pathlib
import re

from docs_blocks import tagged

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


def test_ci_runs_exactly_the_readme_test_command():
    test_command = _blocks("bash")[1].strip()
    ci_lines = [ln for ln in (ROOT / ".ci" / "run").read_text().splitlines()
                if ln.strip() and not ln.startswith("#")]
    assert ci_lines[-1].strip() == test_command


def test_readme_setup_command_runs_the_demo():
    assert _blocks("bash")[0].strip() == "pip install -e . && plume-jax demo"


def test_quick_start_runs():
    code = tagged("quickstart")[0]
    namespace: dict = {}
    exec(compile(code.replace("4096", "64").replace("1000", "50"), "README quick start", "exec"),
         namespace)
    assert namespace["obs3"].shape == (3, 1)
    assert namespace["rewards"].shape == (50, 64)

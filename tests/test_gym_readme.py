"""The README's "Gymnasium and Stable-Baselines3" examples run as written."""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _section_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Gymnasium and Stable-Baselines3", 1)[1]
    section = re.split(r"\n## ", section, maxsplit=1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_readme_gymnasium_examples_run(tmp_path, monkeypatch):
    pytest.importorskip("stable_baselines3")
    pytest.importorskip("imageio")
    blocks = _section_blocks()
    assert len(blocks) == 3
    monkeypatch.chdir(tmp_path)  # the video example writes files
    namespace: dict = {}
    for i, code in enumerate(blocks):
        code = code.replace("model.learn(30_000)", "model.learn(2_000)")  # the API, not the result
        exec(compile(code, f"README gymnasium block {i}", "exec"), namespace)
    assert namespace["frame"].shape == (128, 128, 3)
    assert namespace["info"]["agent_xy"] == (2, 30)
    assert namespace["model"].num_timesteps >= 2_000
    assert (tmp_path / "episode.gif").stat().st_size > 0
    assert (tmp_path / "batch.gif").stat().st_size > 0

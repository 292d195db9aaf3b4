"""The examples of docs/gymnasium.md run as written (SB3 for fewer steps)."""

from __future__ import annotations

import pytest

from tests.docs_blocks import tagged


def test_docs_gymnasium_examples_run(tmp_path, monkeypatch):
    pytest.importorskip("stable_baselines3")
    pytest.importorskip("imageio")
    blocks = tagged("gymnasium-examples")
    assert len(blocks) == 3
    monkeypatch.chdir(tmp_path)  # the video example writes files
    namespace: dict = {}
    for i, code in enumerate(blocks):
        code = code.replace("model.learn(30_000)", "model.learn(2_000)")  # the API, not the result
        exec(compile(code, f"docs/gymnasium.md block {i}", "exec"), namespace)
    assert namespace["frame"].shape == (128, 128, 3)
    assert namespace["info"]["agent_xy"] == (2, 30)
    assert namespace["model"].num_timesteps >= 2_000
    assert (tmp_path / "episode.gif").stat().st_size > 0
    assert (tmp_path / "batch.gif").stat().st_size > 0

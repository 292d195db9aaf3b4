"""Hostile zoo folders and the zoo listing (issue 42.8, issue 44.4): a
version folder that is not a plain ASCII number is skipped, never crashes
unrelated agents and is never read as another version; ``plume-jax list
--zoo`` shows the entries."""

from __future__ import annotations

import shutil

import pytest

from agents import zoo
from plume_jax import ValidationError

SHIPPED = zoo.ZOO_ROOT / "gaussian-mlp" / "1"


@pytest.fixture
def hostile_zoo(tmp_path, monkeypatch):
    """A zoo with ``gaussian-mlp@1`` and, under it and under an entry
    ``toy``, trained copies named ``²``, ``01`` and ``١`` (an Arabic-Indic one)."""
    root = tmp_path / "zoo"
    shutil.copytree(SHIPPED, root / "gaussian-mlp" / "1")
    for name in ("²", "01", "١"):
        shutil.copytree(SHIPPED, root / "gaussian-mlp" / name)
        shutil.copytree(SHIPPED, root / "toy" / name)
    monkeypatch.setenv(zoo.ZOO_ENV, str(root))
    return root


def test_a_zoo_folder_named_superscript_two_does_not_break_evaluate_of_random_walk(hostile_zoo):
    import plume_jax
    from agents import agent_names, make_agent
    from plume_jax.cli.evaluate import parse_agent_choices

    assert "random_walk" in agent_names()
    assert parse_agent_choices(["random_walk"], [])[0].label == "random_walk"
    env, _ = plume_jax.make("PlumeNav-Gaussian-v0")
    assert make_agent("random_walk", env) is not None
    assert zoo.resolve("zoo:gaussian-mlp").version == 1


def test_zoo_versions_01_and_arabic_one_are_not_listed_or_loaded_as_version_1(hostile_zoo):
    assert zoo.references() == ["zoo:gaussian-mlp", "zoo:gaussian-mlp@1"]
    assert [(e.name, e.version) for e in zoo.entries()] == [("gaussian-mlp", 1)]
    for version in ("01", "١", "²"):
        with pytest.raises(ValidationError, match=r"a trained version of zoo entry "
                           r"'gaussian-mlp': one of \['zoo:gaussian-mlp@1'\]"):
            zoo.resolve(f"zoo:gaussian-mlp@{version}")
    with pytest.raises(ValidationError, match=r"naming a trained zoo entry"):
        zoo.resolve("zoo:toy")  # only badly named folders: not an entry


def test_publishing_beside_a_superscript_two_folder_picks_the_next_plain_version(hostile_zoo):
    from plume_jax.scoreboard.zoo_publish import pick_version

    assert pick_version(hostile_zoo / "gaussian-mlp") == 2
    assert pick_version(hostile_zoo / "toy") == 1

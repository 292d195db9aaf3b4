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
    headline = shutil.ignore_patterns("seeds")  # the entry's own policy, not its seeds'
    shutil.copytree(SHIPPED, root / "gaussian-mlp" / "1", ignore=headline)
    for name in ("²", "01", "١"):
        shutil.copytree(SHIPPED, root / "gaussian-mlp" / name, ignore=headline)
        shutil.copytree(SHIPPED, root / "toy" / name, ignore=headline)
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


# -- issue 44.4: the zoo can be listed and recorded ------------------------------

def test_plume_jax_list_zoo_shows_name_version_preset_success_and_seeds(hostile_zoo, capsys):
    from plume_jax import cli

    assert cli.main(["list", "--zoo"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"zoo {hostile_zoo} (1 trained versions")
    assert lines[1].split() == ["agent", "preset", "success", "episodes", "eval", "seed",
                                "train", "seed", "seeds"]
    assert lines[2].split() == ["zoo:gaussian-mlp@1", "PlumeNav-Gaussian-v0", "0.987", "1000",
                                "1000003", "0", "0"]
    assert len(lines) == 3  # ², 01 and ١ are not versions


def test_plume_jax_list_zoo_without_a_zoo_folder_is_a_one_line_error(tmp_path, monkeypatch,
                                                                      capsys):
    from plume_jax import cli

    monkeypatch.setenv(zoo.ZOO_ENV, str(tmp_path / "missing"))
    assert cli.main(["list", "--zoo"]) == 2
    err = capsys.readouterr().err
    assert "PLUME_JAX_ZOO" in err and err.count("\n") == 1


@pytest.fixture(scope="module")
def imageio():
    return pytest.importorskip("imageio", reason="the video extra is not installed")


def test_record_takes_a_zoo_agent_and_stops_at_the_episode_end_not_max_steps(imageio, tmp_path,
                                                                            capsys):
    """``record zoo:gaussian-mlp`` was refused; a policy's 68-step episode
    was written as max_steps + 1 = 1001 frames."""
    from plume_jax import cli

    out = tmp_path / "zoo.gif"
    assert cli.main(["record", "zoo:gaussian-mlp@1", "--out", str(out), "--scale", "1",
                     "--episodes", "2"]) == 0
    printed = capsys.readouterr().out.splitlines()
    steps = [int(line.split(", ")[1].split()[0]) for line in printed[:2]]
    assert all("reached the source" in line for line in printed[:2]), printed
    frames = max(steps) + 1
    assert printed[2] == f"wrote {out} ({frames} frames)" and frames < 1001
    assert len(imageio.mimread(out)) == frames


def test_record_takes_an_sb3_zip_with_a_preset(imageio, tmp_path, capsys):
    pytest.importorskip("stable_baselines3")
    import plume_jax
    from plume_jax import cli
    from plume_jax.gym.sb3 import PlumeSB3VecEnv
    from stable_baselines3 import PPO

    small = ["--set", "grid_size=[12, 12]", "--set", "sigma=3.0", "--set", "max_steps=8"]
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[12, 12], sigma=3.0,
                                 max_steps=8)
    model = PPO("MlpPolicy", PlumeSB3VecEnv(env, params, num_envs=2, seed=0), n_steps=8,
                batch_size=16, seed=0, device="cpu")
    model.save(tmp_path / "ppo.zip")
    out = tmp_path / "sb3.gif"
    assert cli.main(["record", str(tmp_path / "ppo.zip"), "--out", str(out)]) == 2
    assert "--preset" in capsys.readouterr().err  # an SB3 model records no env
    assert cli.main(["record", str(tmp_path / "ppo.zip"), "--out", str(out), "--preset",
                     "PlumeNav-Gaussian-v0", *small, "--episodes", "2", "--scale", "1"]) == 0
    printed = capsys.readouterr().out.splitlines()
    steps = [int(line.split(", ")[1].split()[0]) for line in printed[:2]]
    assert printed[2] == f"wrote {out} ({max(steps) + 1} frames)"
    assert len(imageio.mimread(out)) == max(steps) + 1

"""An SB3 model runs as an agent: through the stateful protocol on a
PlumeGymEnv, and batched through `plume-jax evaluate`."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

pytest.importorskip("stable_baselines3")

import plume_jax  # noqa: E402
from agents import Agent  # noqa: E402
from agents.sb3 import SB3Agent  # noqa: E402
from plume_jax import cli  # noqa: E402

SMALL = {"grid_size": [16, 16], "sigma": 4.0, "max_steps": 20}


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    from stable_baselines3 import PPO

    from plume_jax.gym.sb3 import PlumeSB3VecEnv

    env, params = plume_jax.make("PlumeNav-Gaussian-v0", **SMALL)
    model = PPO("MlpPolicy", PlumeSB3VecEnv(env, params, num_envs=4, seed=0), n_steps=8,
                batch_size=32, seed=0, device="cpu")
    path = tmp_path_factory.mktemp("sb3") / "ppo_gaussian.zip"
    model.save(path)
    return path, model


def test_sb3_agent_follows_the_protocol_and_matches_predict(saved_model):
    path, model = saved_model
    agent = SB3Agent.load(str(path))
    assert isinstance(agent, Agent)
    obs = np.asarray([[0.3], [0.9]], np.float32)
    expected, _ = model.predict(obs, deterministic=True)
    np.testing.assert_array_equal(agent.act_batch(obs), expected)
    agent.reset()
    assert agent.act(obs[0]) == int(expected[0])


def test_sb3_agent_drives_a_gymnasium_episode(saved_model):
    from plume_jax.gym import PlumeGymEnv

    env, params = plume_jax.make("PlumeNav-Gaussian-v0", **SMALL)
    gym_env = PlumeGymEnv(env, params)
    agent = SB3Agent.load(str(saved_model[0]))
    obs, _ = gym_env.reset(seed=0)
    agent.reset()
    for _ in range(20):
        obs, reward, terminated, truncated, _ = gym_env.step(agent.act(obs))
        if terminated or truncated:
            break
    assert terminated or truncated


def test_evaluate_runs_an_sb3_model_batched(saved_model, tmp_path):
    scenario = tmp_path / "sb3.yaml"
    scenario.write_text(yaml.safe_dump({
        "name": "sb3_small", "env": {"preset": "PlumeNav-Gaussian-v0", "overrides": SMALL},
        "agent": {"name": "sb3", "params": {"path": str(saved_model[0])}}, "episodes": 8}))
    assert cli.main(["evaluate", "--scenario", str(scenario), "--out", str(tmp_path / "o")]) == 0
    report = json.loads((tmp_path / "o" / "sb3_small__sb3.json").read_text())
    assert report["metrics"]["episodes"] == 8


def test_unknown_sb3_algorithm_is_rejected(saved_model):
    with pytest.raises(plume_jax.ValidationError, match="algorithm"):
        SB3Agent.load(str(saved_model[0]), algorithm="NotAnAlgo")


def test_sb3_model_on_an_env_with_other_actions_is_refused(saved_model):
    """The model was trained with 5 actions on one concentration reading; the
    Poisson preset has 4 actions."""
    from agents import make_agent

    env, _ = plume_jax.make("PlumeNav-Poisson-v0")
    with pytest.raises(plume_jax.ValidationError) as excinfo:
        make_agent("sb3", env, path=str(saved_model[0]))
    assert excinfo.value.parameter == "actions"
    oriented, _ = plume_jax.make("PlumeNav-GaussianOriented-v0", grid_size=[16, 16])
    with pytest.raises(plume_jax.ValidationError) as excinfo:
        make_agent("sb3", oriented, path=str(saved_model[0]))
    assert excinfo.value.parameter == "sensor"  # two antennae, not one reading


@pytest.mark.parametrize("damage", ["missing", "not a zip"])
def test_missing_or_broken_sb3_model_files_are_refused_naming_the_path(tmp_path, damage):
    from agents import make_agent

    env, _ = plume_jax.make("PlumeNav-Gaussian-v0", **SMALL)
    path = tmp_path / "model.zip"
    if damage == "not a zip":
        path.write_bytes(b"this is not a model")
    with pytest.raises(plume_jax.ValidationError) as excinfo:
        make_agent("sb3", env, path=str(path))
    assert excinfo.value.parameter == "path" and str(path) in str(excinfo.value)

"""The PettingZoo ParallelEnv adapter over a multi-agent env."""

from __future__ import annotations

import numpy as np
import pytest

pettingzoo = pytest.importorskip("pettingzoo")

import plume_jax  # noqa: E402
from plume_jax import StateError, ValidationError  # noqa: E402
from plume_jax.envs.multi_agent import MultiAgentPlumeEnv  # noqa: E402


@pytest.fixture(scope="module")
def multi():
    from plume_jax.gym.pettingzoo_env import PlumeParallelEnv

    env, _ = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[16, 16], sigma=4.0, goal_radius=1.5,
                            max_steps=30)
    return PlumeParallelEnv, MultiAgentPlumeEnv.from_env(env, num_agents=3, collisions=True)


def test_passes_the_pettingzoo_parallel_api_test(multi):
    from pettingzoo.test import parallel_api_test

    cls, env = multi
    parallel_api_test(cls(env), num_cycles=150)


def test_invalid_action_names_the_agent_and_changes_nothing(multi):
    cls, env = multi
    pz = cls(env)
    obs, _ = pz.reset(seed=0)
    before = pz.state().copy()
    with pytest.raises(ValidationError, match="agent_1"):
        pz.step({"agent_0": 1, "agent_1": 17, "agent_2": 0})
    np.testing.assert_array_equal(pz.state(), before)
    with pytest.raises(ValidationError, match="agent_9"):
        pz.step({"agent_9": 1})


def test_seeded_resets_repeat_and_agents_leave_when_they_arrive(multi):
    cls, env = multi
    a, b = cls(env), cls(env)
    obs_a, _ = a.reset(seed=4)
    obs_b, _ = b.reset(seed=4)
    for name in a.possible_agents:
        np.testing.assert_array_equal(obs_a[name], obs_b[name])
    steps = 0
    while a.agents:
        actions = {name: 0 for name in a.agents}
        _, rewards, terms, truncs, _ = a.step(actions)
        assert set(rewards) == set(terms) == set(truncs)
        steps += 1
    assert steps == 30  # noop everyone: nobody arrives, all truncated at max_steps
    with pytest.raises(StateError):
        a.step({})


def test_close_then_reset_raises(multi):
    cls, env = multi
    pz = cls(env, render_mode="rgb_array")
    pz.reset(seed=1)
    frame = pz.render()
    assert frame.dtype == np.uint8 and frame.shape == (64, 64, 3)
    pz.close()
    with pytest.raises(StateError):
        pz.reset(seed=1)


def test_rejects_a_single_agent_env():
    from plume_jax.gym.pettingzoo_env import PlumeParallelEnv

    env, _ = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[16, 16], sigma=4.0)
    with pytest.raises(ValidationError, match="MultiAgentPlumeEnv"):
        PlumeParallelEnv(env)


def test_is_success_is_in_the_info_of_the_step_an_agent_leaves(multi):
    """As in the Gymnasium env: ``is_success`` (goal reached) on the last step of
    each agent's episode, nowhere else (it was missing from the PettingZoo infos)."""
    cls, env = multi
    pz = cls(env)
    _, infos = pz.reset(seed=1)
    source = np.asarray(env.default_params.plume.source, float)
    ids = env.action_ids
    ended = {}
    while pz.agents:
        actions = {}
        for name in pz.agents:  # step towards the source, x first
            dx, dy = source - np.asarray(infos[name]["agent_xy"], float)
            actions[name] = ids["move_east" if dx > 0.5 else "move_west" if dx < -0.5 else
                                "move_north" if dy > 0.5 else "move_south" if dy < -0.5 else
                                "noop"]
        live = list(pz.agents)
        _, _, terms, truncs, infos = pz.step(actions)
        for name in live:
            if terms[name] or truncs[name]:
                ended[name] = (terms[name], infos[name]["is_success"])
            else:
                assert "is_success" not in infos[name]
    assert set(ended) == set(pz.possible_agents)
    assert any(success for _, success in ended.values()), "no agent arrived: test the env"
    assert all(success is terminated for terminated, success in ended.values())

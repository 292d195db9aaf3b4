"""PlumeEnv behaviour: spaces, info, goal test, termination, truncation,
invalid actions inside jit, auto-reset."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import plume_jax
from plume_jax.envs.plume_env import INFO_KEYS
from plume_jax.core.types import AgentState


@pytest.fixture(scope="module")
def fixed_env():
    """Fixed start 3 cells east of the goal disk (source (15, 15), radius 2)."""
    return plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[32, 32], sigma=6.0, goal_radius=2.0,
                          max_steps=5, start={"type": "fixed", "position": [20, 15]})


def test_quick_start_from_the_issue(default_env):
    env, params = default_env
    obs, state = env.reset(jax.random.key(0), params)
    obs, state, reward, terminated, truncated, info = env.step(
        jax.random.key(1), state, env.action_ids["move_east"], params)
    assert obs.shape == (1,) and obs.dtype == jnp.float32
    batch_obs, batch_state = jax.vmap(env.reset, in_axes=(0, None))(
        jax.random.split(jax.random.key(0), 4096), params)
    assert batch_obs.shape == (4096, 1)
    assert batch_state.agent.position.shape == (4096, 2)


def test_spaces(small_env):
    env, params = small_env
    assert env.action_space(params).n == 5
    space = env.observation_space(params)
    assert space.shape == (1,)
    assert env.num_actions == 5


def test_info_has_fixed_keys_and_types(small_env):
    env, params = small_env
    obs, state = env.reset(jax.random.key(0), params)
    out = env.step(jax.random.key(1), state, 1, params)
    info = out[5]
    assert set(info) == set(INFO_KEYS)
    assert info["step_count"].dtype == jnp.int32
    assert info["goal_reached"].dtype == jnp.bool_
    assert info["agent_xy"].shape == (2,)
    np.testing.assert_array_equal(np.asarray(info["goal_location"]), np.asarray(info["source_location"]))
    for flag in out[3:5]:
        assert flag.dtype == jnp.bool_ and flag.shape == ()


def test_move_east_moves_one_cell_east(fixed_env):
    env, params = fixed_env
    _, state = env.reset(jax.random.key(0), params)
    _, state, *_ = env.step(jax.random.key(1), state, env.action_ids["move_east"], params)
    np.testing.assert_array_equal(np.asarray(state.agent.position), [21.0, 15.0])
    _, state, *_ = env.step(jax.random.key(2), state, env.action_ids["move_north"], params)
    np.testing.assert_array_equal(np.asarray(state.agent.position), [21.0, 16.0])


def test_reaching_goal_terminates_and_rewards_once(fixed_env):
    env, params = fixed_env
    _, state = env.reset(jax.random.key(0), params)
    west = env.action_ids["move_west"]
    _, state, reward, terminated, truncated, info = env.step(jax.random.key(1), state, west, params)
    assert not bool(terminated) and float(reward) == 0.0  # distance 4 > 2
    _, state, reward, terminated, truncated, info = env.step(jax.random.key(2), state, west, params)
    assert not bool(terminated)  # distance 3
    _, state, reward, terminated, truncated, info = env.step(jax.random.key(3), state, west, params)
    # distance exactly 2 == goal_radius: reached (<=)
    assert bool(terminated) and bool(info["goal_reached"]) and not bool(truncated)
    assert float(reward) == 1.0 and float(info["total_reward"]) == 1.0
    assert float(info["distance_to_goal"]) == pytest.approx(2.0)
    assert float(info["discount"]) == 0.0
    # auto-reset: the returned state is a fresh episode at the fixed start
    np.testing.assert_array_equal(np.asarray(state.agent.position), [20.0, 15.0])
    assert int(state.step_count) == 0 and int(state.episode_count) == 2
    assert float(state.total_reward) == 0.0


def test_truncation_at_max_steps(fixed_env):
    env, params = fixed_env
    obs, state = env.reset(jax.random.key(0), params)
    noop = env.action_ids["noop"]
    for t in range(1, 6):
        _, state, reward, terminated, truncated, info = env.step(jax.random.key(t), state, noop, params)
        assert bool(truncated) == (t == 5)
        assert not bool(terminated)
    assert int(info["step_count"]) == 5
    assert int(state.step_count) == 0 and int(state.episode_count) == 2


def test_final_observation_describes_the_episode_that_ended(fixed_env):
    env, params = fixed_env
    _, state = env.reset(jax.random.key(0), params)
    west = env.action_ids["move_west"]
    for t in range(3):
        obs, state, _, terminated, _, info = env.step(jax.random.key(t), state, west, params)
    assert bool(terminated)
    expected_final = float(np.exp(-4.0 / (2 * 36.0)))  # at (17, 15), 2 cells from source
    assert float(info["final_observation"][0]) == pytest.approx(expected_final, rel=1e-6)
    assert float(obs[0]) == pytest.approx(float(np.exp(-25.0 / 72.0)), rel=1e-6)  # back at (20, 15)


@pytest.mark.parametrize("bad_action", [5, -1, 99, 2.0, 1.5])
def test_invalid_action_in_jit_is_noop_and_flagged(fixed_env, bad_action):
    env, params = fixed_env
    _, state = env.reset(jax.random.key(0), params)
    step = jax.jit(env.step)
    obs, new_state, reward, terminated, truncated, info = step(jax.random.key(1), state, bad_action, params)
    assert not bool(info["action_valid"])
    assert int(info["executed_action"]) == env.action_ids["noop"]
    np.testing.assert_array_equal(np.asarray(new_state.agent.position), np.asarray(state.agent.position))
    assert np.all(np.isfinite(np.asarray(obs)))


def test_invalid_actions_in_a_vmapped_batch_affect_only_their_env(fixed_env):
    env, params = fixed_env
    keys = jax.random.split(jax.random.key(0), 3)
    _, states = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    actions = jnp.asarray([env.action_ids["move_east"], 17, -3], jnp.int32)
    _, new, _, _, _, info = jax.vmap(env.step, in_axes=(0, 0, 0, None))(keys, states, actions, params)
    np.testing.assert_array_equal(np.asarray(info["action_valid"]), [True, False, False])
    np.testing.assert_array_equal(np.asarray(new.agent.position[:, 0]), [21.0, 20.0, 20.0])


def test_agent_is_clamped_at_the_grid_edge():
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[8, 8], sigma=2.0,
                                 goal_radius=1.0, start={"type": "fixed", "position": [0, 7]})
    _, state = env.reset(jax.random.key(0), params)
    for t, name in enumerate(["move_west", "move_north", "move_west"]):
        _, state, *_ = env.step(jax.random.key(t), state, env.action_ids[name], params)
        np.testing.assert_array_equal(np.asarray(state.agent.position), [0.0, 7.0])


def test_episode_counter_counts_episodes(small_env):
    env, params = small_env
    _, state = env.reset(jax.random.key(0), params)
    assert int(state.episode_count) == 1
    step = jax.jit(env.step)
    episodes_ended = 0
    for t in range(130):
        _, state, _, terminated, truncated, _ = step(jax.random.key(t), state, 0, params)
        episodes_ended += int(terminated | truncated)
    assert episodes_ended == 2  # noop for 130 steps: truncated at 60 and 120
    assert int(state.episode_count) == 3


class _CountingPlume(plume_jax.plumes.GaussianPlume):
    """A Gaussian plume whose ``init`` and ``reinit`` leave different marks."""

    def init(self, key, params):
        return jnp.asarray(1, jnp.int32)

    def reinit(self, key, plume_state, params):
        return plume_state + 100

    def advance(self, key, plume_state, params):
        return plume_state


def test_auto_reset_uses_cheap_reinit_not_init(small_env):
    env, params = small_env
    marked = plume_jax.PlumeEnv(env.grid, _CountingPlume(), env.sensor, env.actions, env.reward,
                                env.start, params, {})
    _, state = marked.reset(jax.random.key(0), params)
    assert int(state.plume) == 1
    for t in range(60):  # noop until truncation at step 60
        _, state, _, _, truncated, _ = marked.step(jax.random.key(t), state, 0, params)
    assert bool(truncated)
    assert int(state.plume) == 101  # reinit(previous plume), never init


def test_step_accepts_none_params_as_defaults(small_env):
    env, params = small_env
    obs, state = env.reset(jax.random.key(0))
    out_default = env.step(jax.random.key(1), state, 3)
    out_explicit = env.step(jax.random.key(1), state, 3, params)
    np.testing.assert_array_equal(np.asarray(out_default[0]), np.asarray(out_explicit[0]))


def test_observation_is_concentration_at_agent(small_env):
    env, params = small_env
    obs, state = env.reset(jax.random.key(3), params)
    expected = env.plume.concentration(state.plume, state.agent.position, env.grid, params.plume)
    assert float(obs[0]) == pytest.approx(float(expected))


def test_uniform_start_covers_grid_outside_goal(small_env):
    env, params = small_env
    _, states = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(jax.random.key(0), 4000), params)
    pos = np.asarray(states.agent.position)
    assert np.all(pos == np.round(pos))
    assert pos.min() == 0.0 and pos.max() == 31.0
    d = np.linalg.norm(pos - np.asarray(params.plume.source), axis=1)
    assert np.all(d > float(params.goal_radius))
    # roughly uniform: each quadrant gets about a quarter
    quadrants = np.histogram2d(pos[:, 0], pos[:, 1], bins=2, range=[[0, 32], [0, 32]])[0]
    assert np.all(np.abs(quadrants / 4000 - 0.25) < 0.04)
    headings = np.asarray(states.agent.heading)
    assert set(np.round(headings / (np.pi / 2)).astype(int)) == {0, 1, 2, 3}


def test_agent_state_helper():
    agent = AgentState.at([1, 2], 0.5)
    assert agent.position.dtype == jnp.float32 and agent.heading.dtype == jnp.float32


def test_num_actions_of_a_continuous_action_model_is_its_dimension():
    # regression: num_actions read `.n` and raised AttributeError for Box actions
    env, _ = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[16, 16], sigma=4.0,
                            actions="continuous")
    assert env.num_actions == 2
    assert env.describe()["action_space"]["type"] == "box"

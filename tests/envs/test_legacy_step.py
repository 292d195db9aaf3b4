"""``LegacyStepWrapper``: code written for gymnax 0.x's five-value ``step``
(PureJaxRL's ``ppo.py`` and its wrappers) runs on plume_jax (the README once
said it ran "unchanged", but it unpacks five values and plume_jax returns six)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import plume_jax
from plume_jax.envs.legacy_step import LegacyStepWrapper

NUM_ENVS, NUM_STEPS = 8, 40


@pytest.fixture(scope="module")
def env_and_params():
    return plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[12, 12], max_steps=15)


def test_purejaxrl_style_loop_runs_on_the_five_value_step(env_and_params):
    """A PureJaxRL-shaped loop: vmapped reset and step in a ``lax.scan``, random
    actions, episode returns kept with ``(1 - done)`` masks as its LogWrapper
    does; they must agree with the env's own ``total_reward`` of each ended episode."""
    env, params = env_and_params
    env = LegacyStepWrapper(env)
    reset_keys = jax.random.split(jax.random.key(0), NUM_ENVS)
    _, state = jax.vmap(env.reset, in_axes=(0, None))(reset_keys, params)
    n = env.action_space(params).n

    def body(carry, key):
        state, episode_return = carry
        k_act, k_step = jax.random.split(key)
        action = jax.random.randint(k_act, (NUM_ENVS,), 0, n)
        step_keys = jax.random.split(k_step, NUM_ENVS)
        obs, state, reward, done, info = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
            step_keys, state, action, params)
        episode_return = episode_return + reward
        returned = episode_return * done
        episode_return = episode_return * (1 - done)
        return (state, episode_return), (done, returned, info)

    keys = jax.random.split(jax.random.key(1), NUM_STEPS)
    _, (done, returned, info) = jax.jit(
        lambda k: jax.lax.scan(body, (state, jnp.zeros(NUM_ENVS)), k))(keys)
    assert done.dtype == jnp.bool_ and done.any(), "no episode ended: the done path went untested"
    np.testing.assert_array_equal(done, info["terminated"] | info["truncated"])
    np.testing.assert_allclose(returned[done], info["total_reward"][done], rtol=1e-6)
    assert "final_observation" in info


def test_the_wrapper_passes_everything_else_through(env_and_params):
    env, params = env_and_params
    wrapped = LegacyStepWrapper(env)
    assert wrapped.action_ids == env.action_ids and wrapped.num_actions == env.num_actions
    assert wrapped.observation_space(params).shape == env.observation_space(params).shape
    assert wrapped.default_params is env.default_params

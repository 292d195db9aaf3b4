"""Code that other people wrote against gymnax, run on plume_jax (issue 44,
items 8, 9 and 10b): gymnax's own ``RolloutWrapper`` and Gym wrappers, and the
deep copy that rejax makes of its env."""

from __future__ import annotations

import copy
import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnax.experimental import RolloutWrapper
from gymnax.wrappers.gym import GymnaxToGymWrapper, GymnaxToVectorGymWrapper

import plume_jax
from plume_jax.envs.legacy_step import LegacyStepWrapper

MAX_STEPS = 12


@pytest.fixture(scope="module")
def env_and_params():
    return plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[12, 12], max_steps=MAX_STEPS)


def test_rollout_wrapper_with_no_step_count_reads_max_steps_in_episode(env_and_params):
    """gymnax's ``RolloutWrapper(env=env)`` takes its length from
    ``params.max_steps_in_episode``; it failed with an ``AttributeError``."""
    env, params = env_and_params
    rollout = RolloutWrapper(env=env, env_params=params)
    assert int(rollout.num_env_steps) == MAX_STEPS
    obs, action, reward, next_obs, done, cum_return = rollout.single_rollout(
        jax.random.key(0), None)
    assert obs.shape == (MAX_STEPS, *env.observation_space(params).shape)
    # an episode of at most MAX_STEPS steps ends within the rollout (goal or time limit)
    assert done.shape == (MAX_STEPS,) and bool(done.any())
    assert cum_return.shape == (1,) and np.isfinite(cum_return).all()


def test_max_steps_in_episode_is_max_steps_without_a_second_leaf(env_and_params):
    """The alias follows ``max_steps`` through ``replace``, a sweep's stacked
    params and ``vmap``, and adds nothing to the pytree a checkpoint stores."""
    _, params = env_and_params
    assert params.max_steps_in_episode is params.max_steps
    assert "max_steps_in_episode" not in {f.name for f in dataclasses.fields(params)}
    assert len(jax.tree.leaves(params)) == len(jax.tree.leaves(params.replace(max_steps=7)))
    assert int(params.replace(max_steps=7).max_steps_in_episode) == 7
    stacked = jax.tree.map(lambda *xs: jnp.stack(xs), params, params.replace(max_steps=7))
    np.testing.assert_array_equal(stacked.max_steps_in_episode, [MAX_STEPS, 7])
    read = jax.vmap(lambda p: p.max_steps_in_episode * 1)(stacked)
    np.testing.assert_array_equal(read, [MAX_STEPS, 7])


def test_legacy_step_wrapper_can_be_deep_copied(env_and_params):
    """rejax deep-copies its env; gymnax's ``__getattr__`` proxy recursed while
    ``copy`` asked the half-built copy for ``__setstate__``."""
    env, params = env_and_params
    wrapped = LegacyStepWrapper(env)
    copied = copy.deepcopy(wrapped)
    assert isinstance(copied, LegacyStepWrapper) and copied is not wrapped
    assert copied._env == env and copied.action_names == env.action_names
    obs, state = copied.reset(jax.random.key(0), params)
    out = copied.step(jax.random.key(1), state, 0, params)
    assert len(out) == 5
    with pytest.raises(AttributeError):
        copied.no_such_attribute  # noqa: B018  (the env's own AttributeError comes through)


def test_a_rejax_shaped_evaluation_runs_on_a_deep_copied_legacy_env(env_and_params):
    """What rejax 0.1.3 does with an env (read from its source; rejax itself is
    not a dependency): deep-copy its config, jit an evaluation with the env as
    a static argument, and loop five-value steps while ``length <
    env_params.max_steps_in_episode`` and not done."""
    env, params = env_and_params
    config = copy.deepcopy({"env": LegacyStepWrapper(env), "env_params": params})

    @functools.partial(jax.jit, static_argnames=("env",))
    def evaluate(rng, env, env_params):
        def step(carry):
            rng, state, _, length, total = carry
            rng, rng_act, rng_step = jax.random.split(rng, 3)
            action = env.action_space(env_params).sample(rng_act)
            _, state, reward, done, _ = env.step(rng_step, state, action, env_params)
            return rng, state, done, length + 1, total + reward

        _, state = env.reset(rng, env_params)
        carry = (rng, state, jnp.asarray(False), jnp.asarray(0), jnp.asarray(0.0))
        carry = jax.lax.while_loop(
            lambda c: (c[3] < env_params.max_steps_in_episode) & ~c[2], step, carry)
        return carry[3], carry[4]

    length, _ = evaluate(jax.random.key(3), config["env"], config["env_params"])
    assert 1 <= int(length) <= MAX_STEPS


def test_gymnax_to_gym_wrapper_takes_a_one_element_observation(env_and_params):
    """``GymnaxToGymWrapper`` converted the observation space with ``float()``
    on a 1-D JAX array and failed ("Only scalar arrays can be converted")."""
    env, params = env_and_params
    assert env.observation_space(params).shape == (1,)
    gym_env = GymnaxToGymWrapper(env, params)
    assert gym_env.observation_space.shape == (1,)
    assert gym_env.action_space.n == env.num_actions
    obs, _ = gym_env.reset(seed=0)
    assert gym_env.observation_space.contains(np.asarray(obs))
    obs, reward, terminated, truncated, _ = gym_env.step(0)
    assert gym_env.observation_space.contains(np.asarray(obs))
    # the gymnax space itself still samples and checks one-element observations
    space = env.observation_space(params)
    assert space.sample(jax.random.key(0)).shape == (1,)
    assert bool(space.contains(jnp.asarray([0.5], jnp.float32)))


def test_gymnax_vector_gym_wrapper_does_not_apply_to_the_frozen_env(env_and_params):
    """Documented, not fixed (docs/gymnasium.md): gymnax's vector wrapper
    assigns over the env's ``reset``; the env is frozen because jit hashes it."""
    env, params = env_and_params
    with pytest.raises(dataclasses.FrozenInstanceError):
        GymnaxToVectorGymWrapper(env, num_envs=2, params=params)


def test_state_space_says_why_it_is_not_provided(env_and_params):
    env, params = env_and_params
    with pytest.raises(NotImplementedError, match="eval_shape"):
        env.state_space(params)

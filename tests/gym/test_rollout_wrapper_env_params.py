"""gymnax's documented override ``RolloutWrapper(env=env, env_params={...})``
on plume_jax (issue 55: ``{'max_steps_in_episode': 50}`` failed with chex's
``ValueError: __init__() got unexpected kwargs``). ``EnvParams.replace``
takes gymnax's name for ``max_steps`` and refuses any other unknown name in
one line naming the fields it accepts."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnax.experimental import RolloutWrapper

import plume_jax
from plume_jax.core.errors import ValidationError


@pytest.fixture(scope="module")
def env_and_params():
    return plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[12, 12], max_steps=30)


def test_rollout_wrapper_takes_gymnaxs_max_steps_in_episode_override(env_and_params):
    env, params = env_and_params
    rollout = RolloutWrapper(env=env, env_params={"max_steps_in_episode": 5})
    assert int(rollout.num_env_steps) == 5
    assert int(rollout.env_params.max_steps) == 5
    assert rollout.env_params.max_steps.dtype == params.max_steps.dtype == jnp.int32
    obs, action, reward, next_obs, done, cum_return = rollout.single_rollout(
        jax.random.key(0), None)
    assert obs.shape == (5, *env.observation_space(params).shape)
    assert bool(done.any())  # within 5 steps: the goal, or the overridden time limit


def test_the_gymnax_name_is_max_steps(env_and_params):
    _, params = env_and_params
    by_alias = params.replace(max_steps_in_episode=7)
    by_field = params.replace(max_steps=7)
    assert jax.tree.structure(by_alias) == jax.tree.structure(params)
    for a, b in zip(jax.tree.leaves(by_alias), jax.tree.leaves(by_field)):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    assert by_alias.max_steps.dtype == jnp.int32 and by_alias.max_steps_in_episode == 7


def test_arrays_and_traced_values_pass_through(env_and_params):
    _, params = env_and_params
    batch = jax.vmap(lambda m: params.replace(max_steps_in_episode=m).max_steps)(
        jnp.arange(1, 4, dtype=jnp.int32))
    assert batch.tolist() == [1, 2, 3]
    assert params.replace(goal_radius=jnp.float32(3.0)).goal_radius == 3.0


@pytest.mark.parametrize("changes, named, allowed", [
    ({"max_step": 50}, "max_step=50", "max_steps_in_episode (gymnax's name for max_steps)"),
    ({"sigma": 3.0}, "sigma=3.0", "plume_jax.make(id, sigma=...)"),
    ({"max_steps_in_episode": 0}, "max_steps_in_episode=0", "an integer in [1, 2147483647]"),
    ({"max_steps_in_episode": 2.5}, "max_steps_in_episode=2.5", "an integer in"),
    ({"max_steps": True}, "max_steps=True", "an integer in"),
    ({"max_steps_in_episode": 5, "max_steps": 6}, "max_steps_in_episode=5",
     "either max_steps_in_episode (gymnax's name) or max_steps, not both"),
])
def test_other_names_and_bad_values_are_one_line_naming_what_is_accepted(
        env_and_params, changes, named, allowed):
    env, params = env_and_params
    with pytest.raises(ValidationError) as caught:
        RolloutWrapper(env=env, env_params=changes)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{named} is invalid: expected")
    assert allowed in message
    if "max_step" in changes or "sigma" in changes:
        assert "'goal_radius', 'max_steps']" in message  # every field named
    assert int(params.max_steps) == 30  # nothing applied

"""The env is a frozen dataclass of its static parts: identity by value,
``dataclasses.replace``, the static ``structure`` a sweep compares, the
multi-agent env as a subclass, and the named keys and results of a step."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import plume_jax
from plume_jax.core.autoreset import Transition, step_then_reset
from plume_jax.envs.plume_env import PlumeEnv
from plume_jax.envs.multi_agent import MultiAgentPlumeEnv
from plume_jax.starts import FixedStart, FixedStartParams

OVERRIDES = {"grid_size": [16, 16], "sigma": 4.0, "goal_radius": 1.5, "max_steps": 20}


@pytest.fixture(scope="module")
def core():
    return plume_jax.make("PlumeNav-Gaussian-v0", **OVERRIDES)


def test_env_is_a_frozen_dataclass_of_its_static_parts(core):
    env, params = core
    assert dataclasses.is_dataclass(env)
    assert [f.name for f in dataclasses.fields(env)] == [
        "grid", "plume", "sensor", "actions", "reward", "start", "default_params", "settings",
        "transition_gradients"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        env.grid = None
    assert env.default_params is params  # gymnax's property, now a field


def test_equal_by_value_not_by_array_identity(core):
    env, params = core
    rebuilt, rebuilt_params = plume_jax.make("PlumeNav-Gaussian-v0", **OVERRIDES)
    assert rebuilt_params.plume.sigma is not params.plume.sigma
    assert rebuilt == env and hash(rebuilt) == hash(env)
    # default params take part by value: another sigma is another env
    other = dataclasses.replace(env, default_params=params.replace(
        plume=params.plume.replace(sigma=jnp.asarray(5.0, jnp.float32))))
    assert other != env
    # settings are informational
    assert dataclasses.replace(env, settings={"note": "x"}) == env


def test_replace_swaps_a_component_and_the_result_steps(core):
    env, params = core
    fixed_params = params.replace(start=FixedStartParams(
        position=jnp.asarray([3.0, 4.0], jnp.float32), heading=jnp.zeros((), jnp.float32)))
    fixed = dataclasses.replace(env, start=FixedStart(), default_params=fixed_params)
    assert isinstance(fixed, PlumeEnv) and fixed != env
    assert fixed.plume is env.plume and fixed.grid == env.grid
    _, state = fixed.reset(jax.random.key(0))
    np.testing.assert_array_equal(np.asarray(state.agent.position), [3.0, 4.0])


def test_missing_default_params_is_refused(core):
    env, _ = core
    with pytest.raises(TypeError, match="default_params"):
        PlumeEnv(env.grid, env.plume, env.sensor, env.actions, env.reward, env.start)


def test_structure_ignores_default_params_only(core):
    env, params = core
    other_sigma, _ = plume_jax.make("PlumeNav-Gaussian-v0", **{**OVERRIDES, "sigma": 7.0})
    assert other_sigma != env and other_sigma.structure == env.structure
    other_grid, _ = plume_jax.make("PlumeNav-Gaussian-v0", **{**OVERRIDES, "grid_size": [16, 17]})
    assert other_grid.structure != env.structure


def test_multi_agent_env_extends_the_env_with_keyword_fields(core):
    env, _ = core
    multi = MultiAgentPlumeEnv.from_env(env, num_agents=3, collisions=1)
    assert isinstance(multi, PlumeEnv) and isinstance(multi, MultiAgentPlumeEnv)
    assert multi.collisions is True  # normalised to a bool
    assert all(getattr(multi, f.name) == getattr(env, f.name)
               for f in dataclasses.fields(PlumeEnv) if f.name != "default_params")
    assert multi != env and multi.structure != env.structure
    assert dataclasses.replace(multi, num_agents=3) == multi
    assert dataclasses.replace(multi, num_agents=4) != multi
    assert multi.describe()["num_agents"] == 3 and env.describe()["num_agents"] == 1
    with pytest.raises(plume_jax.ValidationError, match="num_agents"):
        dataclasses.replace(multi, num_agents=0)


def test_step_returns_a_named_transition_equal_to_step_then_reset(core):
    env, params = core
    _, state = env.reset(jax.random.key(0), params)
    out = env.step(jax.random.key(1), state, 1, params)
    assert isinstance(out, Transition)
    obs, new_state, reward, terminated, truncated, info = out  # still a 6-tuple
    assert out.reward is reward and out.info is info
    same = jax.jit(lambda k, s: step_then_reset(env, k, k, s, 1, params))(jax.random.key(1),
                                                                          state)
    for a, b in zip(jax.tree.leaves(out), jax.tree.leaves(same)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_step_and_reset_keys_are_disjoint_named_streams():
    key = jax.random.key(3)
    step_keys, reset_keys = PlumeEnv.step_keys(key), PlumeEnv.reset_keys(key)
    assert step_keys._fields == ("plume", "action", "sensor")
    assert reset_keys._fields == ("plume", "start", "sensor")
    data = [tuple(np.asarray(jax.random.key_data(k))) for k in (*step_keys, *reset_keys)]
    assert len(set(data)) == 6
    assert data[0] == tuple(np.asarray(jax.random.key_data(jax.random.fold_in(key, 0))))
    assert data[3] == tuple(np.asarray(jax.random.key_data(jax.random.fold_in(key, 3))))

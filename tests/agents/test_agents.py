"""Agent protocols, baseline decision rules on hand-made observations,
functional/stateful agreement, and lookup by name."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import plume_jax
from agents import (Agent, BilateralChemotaxisPolicy, CastAndSurgePolicy, FunctionalPolicy,
                    KlinotaxisPolicy, RandomWalkPolicy, StatefulAgent, make_agent)
from plume_jax import ValidationError

KEY = jax.random.key(0)


@pytest.fixture(scope="module")
def grid_env():
    return plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[24, 24], sigma=5.0, max_steps=80)


@pytest.fixture(scope="module")
def oriented_env():
    return plume_jax.make("PlumeNav-GaussianOriented-v0", grid_size=[24, 24], sigma=5.0,
                          max_steps=80)


@pytest.fixture(scope="module")
def windy_env():
    sensor = {"type": "composite", "sensors": [{"type": "concentration"},
                                               {"type": "wind", "frame": "world"}]}
    return plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[24, 24], sigma=5.0, max_steps=80,
                          sensor=sensor, wind_speed=1.0, wind_direction=0.0)


# -- protocols ---------------------------------------------------------------

def test_stateful_adapter_satisfies_the_agent_protocol(grid_env):
    env, _ = grid_env
    agent = StatefulAgent(KlinotaxisPolicy.for_env(env), seed=0)
    assert isinstance(agent, Agent)


def test_a_stateful_agents_seed_above_2_32_keeps_its_high_bits(grid_env):
    # jax.random.key keeps a seed's low 32 bits: 2**32 + 3 used to be seed 3
    from plume_jax.core.seeding import seed_key
    env, _ = grid_env
    policy = RandomWalkPolicy.for_env(env)
    big, small = StatefulAgent(policy, seed=2**32 + 3), StatefulAgent(policy, seed=3)
    assert not np.array_equal(jax.random.key_data(big._key), jax.random.key_data(small._key))
    expected = jax.random.split(seed_key(2**32 + 3))[0]  # what reset() left of the stream
    np.testing.assert_array_equal(jax.random.key_data(big._key), jax.random.key_data(expected))


@pytest.mark.parametrize("seed", [-1, 2**63, True, 1.5])
def test_a_stateful_agents_bad_seed_is_one_clear_error(grid_env, seed):
    env, _ = grid_env
    with pytest.raises(ValidationError, match=r"seed=.*an integer in \[0, 2\*\*63\)"):
        StatefulAgent(RandomWalkPolicy.for_env(env), seed=seed)


def test_objects_without_reset_or_act_are_not_agents():
    class OnlyAct:
        def act(self, obs):
            return 0

    class OnlyReset:
        def reset(self):
            pass

    assert not isinstance(OnlyAct(), Agent)
    assert not isinstance(OnlyReset(), Agent)
    assert not isinstance(object(), FunctionalPolicy)


@pytest.mark.parametrize("name", ["random_walk", "klinotaxis", "chemotaxis"])
def test_baselines_are_functional_policies_that_jit_and_vmap(name, grid_env, oriented_env):
    env, _ = oriented_env if name == "chemotaxis" else grid_env
    policy = make_agent(name, env)
    assert isinstance(policy, FunctionalPolicy)
    carry = jax.vmap(policy.init)(jax.random.split(KEY, 8))
    obs = jnp.zeros((8,) + env.observation_space().shape, jnp.float32)
    actions, _ = jax.jit(jax.vmap(policy.act))(carry, obs, jax.random.split(KEY, 8))
    assert actions.shape == (8,) and actions.dtype == jnp.int32
    assert all(0 <= int(a) < env.num_actions for a in actions)


def test_functional_and_stateful_forms_agree(grid_env):
    env, _ = grid_env
    policy = KlinotaxisPolicy.for_env(env)
    agent = StatefulAgent(policy, seed=3)
    observations = [np.asarray([c], np.float32) for c in (0.1, 0.2, 0.15, 0.3, 0.3, 0.4)]
    stateful = [agent.act(o) for o in observations]
    key = jax.random.key(3)
    key, k = jax.random.split(key)
    carry = policy.init(k)
    functional = []
    for o in observations:
        key, k = jax.random.split(key)
        action, carry = policy.act(carry, jnp.asarray(o), k)
        functional.append(int(action))
    assert stateful == functional


# -- decision rules ------------------------------------------------------------

def test_klinotaxis_runs_while_rising_and_tumbles_when_falling(grid_env):
    env, _ = grid_env
    policy = KlinotaxisPolicy.for_env(env)
    east = env.action_ids["move_east"]
    carry = policy.init(KEY).replace(last_concentration=jnp.asarray(0.2), last_action=jnp.asarray(east))
    action, _ = policy.act(carry, jnp.asarray([0.3]), KEY)
    assert int(action) == east
    moves = {env.action_ids[m] for m in ("move_north", "move_south", "move_east", "move_west")}
    tumbles = {int(policy.act(carry, jnp.asarray([0.1]), k)[0]) for k in jax.random.split(KEY, 64)}
    assert tumbles == moves  # a tumble picks any of the four moves, never noop


def test_random_walk_never_picks_noop(grid_env):
    env, _ = grid_env
    policy = RandomWalkPolicy.for_env(env)
    picks = {int(policy.act((), None, k)[0]) for k in jax.random.split(KEY, 200)}
    assert picks == set(range(1, 5))


def test_chemotaxis_oriented_turns_toward_the_stronger_antenna_then_moves(oriented_env):
    env, _ = oriented_env
    policy = BilateralChemotaxisPolicy.for_env(env)
    ids = env.action_ids
    carry = policy.init(KEY)
    action, carry = policy.act(carry, jnp.asarray([0.5, 0.2]), KEY)
    assert int(action) == ids["turn_left"]
    action, carry = policy.act(carry, jnp.asarray([0.2, 0.5]), KEY)
    assert int(action) == ids["forward"]  # never two turns in a row
    action, carry = policy.act(carry, jnp.asarray([0.2, 0.5]), KEY)
    assert int(action) == ids["turn_right"]
    carry = carry.replace(turned=jnp.asarray(False))
    action, _ = policy.act(carry, jnp.asarray([0.4, 0.4]), KEY)
    assert int(action) == ids["forward"]


def test_chemotaxis_on_cardinal_moves_turns_relative_to_its_own_heading(grid_env):
    env, _ = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[24, 24], sigma=5.0,
                            sensor={"type": "antennae"})
    policy = BilateralChemotaxisPolicy.for_env(env)
    ids = env.action_ids
    carry = policy.init(KEY).replace(heading=jnp.asarray(0), known=jnp.asarray(True))  # east
    action, carry = policy.act(carry, jnp.asarray([0.6, 0.3]), KEY)  # left stronger
    assert int(action) == ids["move_north"]
    action, carry = policy.act(carry, jnp.asarray([0.3, 0.6]), KEY)  # now right stronger
    assert int(action) == ids["move_east"]


def test_cast_and_surge_surges_on_detection_then_casts_with_growing_legs(windy_env):
    env, _ = windy_env
    policy = CastAndSurgePolicy.for_env(env, threshold=0.1, surge_steps=1, cast_steps=2, growth=2)
    ids = env.action_ids
    # world-frame wind blowing east (+x): upwind is west, crosswind north/south
    smell = jnp.asarray([0.5, 1.0, 0.0])
    nothing = jnp.asarray([0.0, 1.0, 0.0])
    carry = policy.init(KEY).replace(side=jnp.asarray(1))
    action, carry = policy.act(carry, smell, KEY)
    assert int(action) == ids["move_west"]
    action, carry = policy.act(carry, nothing, KEY)  # 1 step of persistence
    assert int(action) == ids["move_west"]
    sequence = []
    for _ in range(2 + 4 + 6):
        action, carry = policy.act(carry, nothing, KEY)
        sequence.append(int(action))
    left, right = ids["move_south"], ids["move_north"]  # side +1 = 90° CCW of upwind (west) = south
    assert sequence == [left] * 2 + [right] * 4 + [left] * 6


def test_cast_and_surge_with_wind_relative_actions():
    env, _ = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[24, 24], sigma=5.0,
                            actions={"type": "surge_cast"}, wind_speed=1.0)
    policy = CastAndSurgePolicy.for_env(env)
    action, _ = policy.act(policy.init(KEY), jnp.asarray([0.9]), KEY)
    assert int(action) == env.action_ids["surge"]


# -- lookup --------------------------------------------------------------------

def test_agents_that_need_a_sense_the_env_lacks_say_so(grid_env):
    env, _ = grid_env
    with pytest.raises(ValidationError, match="antenna_0"):
        make_agent("chemotaxis", env)
    with pytest.raises(ValidationError, match="wind_east"):
        make_agent("cast_and_surge", env)


def test_unknown_agent_and_parameter(grid_env):
    env, _ = grid_env
    with pytest.raises(ValidationError, match="agent='nope'"):
        make_agent("nope", env)
    with pytest.raises(ValidationError, match="agent.speed"):
        make_agent("klinotaxis", env, speed=3)

"""Multi-agent env: shapes, per-agent invalid actions, determinism, the
num_agents=1 equivalence, arrivals, done modes, collisions, observe_others,
batched policies."""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import plume_jax
from agents import PerAgentPolicy, StatefulAgent, make_agent
from plume_jax import ValidationError
from plume_jax.evaluate.rollout import rollout
from plume_jax.envs.multi_agent import MultiAgentPlumeEnv
from plume_jax.render.frames import render_state
from plume_jax.core.types import Grid


@pytest.fixture(scope="module")
def base():
    return plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[16, 16], sigma=4.0, goal_radius=1.5,
                          max_steps=30)


def _multi(base, n, **kw):
    env, _ = base
    return MultiAgentPlumeEnv.from_env(env, num_agents=n, **kw)


@pytest.mark.parametrize("n", [1, 3])  # one agent, and several (no count is special)
def test_shapes_and_dtypes(base, n):
    env = _multi(base, n)
    params = env.default_params
    obs, state = env.reset(jax.random.key(0), params)
    assert obs.shape == (n, 1) and obs.dtype == jnp.float32
    assert state.agent.position.shape == (n, 2)
    obs, state, reward, terminated, truncated, info = env.step(
        jax.random.key(1), state, jnp.zeros(n, jnp.int32), params)
    assert reward.shape == (n,) and reward.dtype == jnp.float32
    assert terminated.shape == (n,) and truncated.shape == (n,)
    assert terminated.dtype == jnp.bool_ and info["done"].shape == ()
    assert info["action_valid"].shape == (n,) and info["executed_action"].shape == (n,)
    assert env.observation_space(params).shape == (n, 1)


def test_one_agent_equals_the_single_agent_env_step_for_step(base):
    single, params = base
    multi = _multi(base, 1)
    obs_s, s = single.reset(jax.random.key(3), params)
    obs_m, m = multi.reset(jax.random.key(3), params)
    np.testing.assert_array_equal(np.asarray(obs_s), np.asarray(obs_m[0]))
    episodes = 0
    for t in range(100):  # crosses several auto-resets (30-step limit)
        k = jax.random.key(1000 + t)
        action = (t * 7) % 5
        out_s = single.step(k, s, action, params)
        out_m = multi.step(k, m, jnp.asarray([action]), params)
        np.testing.assert_array_equal(np.asarray(out_s[1].agent.position),
                                      np.asarray(out_m[1].agent.position[0]))
        np.testing.assert_array_equal(np.asarray(out_s[0]), np.asarray(out_m[0][0]))
        assert float(out_s[2]) == float(out_m[2][0])
        assert bool(out_s[3]) == bool(out_m[3][0]) and bool(out_s[4]) == bool(out_m[4][0])
        episodes += int(out_s[3] | out_s[4])
        s, m = out_s[1], out_m[1]
    assert episodes >= 3


def test_invalid_action_is_noop_for_that_agent_only(base):
    env = _multi(base, 3)
    params = env.default_params
    _, state = env.reset(jax.random.key(0), params)
    east = env.action_ids["move_east"]
    actions = jnp.asarray([east, 99, east], jnp.int32)
    # env.step is jitted: the program test_shapes_and_dtypes[3] compiled
    _, new, _, _, _, info = env.step(jax.random.key(1), state, actions, params)
    np.testing.assert_array_equal(np.asarray(info["action_valid"]), [True, False, True])
    assert int(info["executed_action"][1]) == env.action_ids["noop"]
    np.testing.assert_array_equal(np.asarray(new.agent.position[1]), np.asarray(state.agent.position[1]))
    for i in (0, 2):
        expected = min(float(state.agent.position[i, 0]) + 1, 15.0)
        assert float(new.agent.position[i, 0]) == expected


def test_same_key_same_trajectory(base):
    env = _multi(base, 4, collisions=True)
    params = env.default_params

    def run():
        _, state = env.reset(jax.random.key(5), params)
        out = []
        for t in range(10):
            _, state, reward, *_ = env.step(jax.random.key(t), state, jnp.full(4, t % 5), params)
            out.append(np.asarray(state.agent.position))
        return np.stack(out)

    assert run().tobytes() == run().tobytes()


def _placed(env, params, positions):
    _, state = env.reset(jax.random.key(0), params)
    agents = state.agent.replace(position=jnp.asarray(positions, jnp.float32))
    return state.replace(agent=agents)


def test_arrived_agents_stay_put_and_done_modes(base):
    single, params = base  # source (7, 7), goal radius 1.5
    for mode, done_after_first in (("all", False), ("any", True)):
        env = _multi(base, 2, done_mode=mode)
        state = _placed(env, params, [[9, 7], [2, 2]])
        west = env.action_ids["move_west"]
        _, state2, reward, terminated, _, info = env.step(
            jax.random.key(1), state, jnp.asarray([west, west]), params)
        np.testing.assert_array_equal(np.asarray(terminated), [True, False])
        assert float(reward[0]) == 1.0 and float(reward[1]) == 0.0
        assert bool(info["done"]) is done_after_first
        if mode == "all":
            # the arrived agent's further actions are noops and earn nothing
            _, state3, reward, terminated, _, info = env.step(
                jax.random.key(2), state2, jnp.asarray([west, west]), params)
            np.testing.assert_array_equal(np.asarray(state3.agent.position[0]), [8.0, 7.0])
            assert int(info["executed_action"][0]) == env.action_ids["noop"]
            assert float(reward[0]) == 0.0 and bool(terminated[0])
            assert int(info["num_arrived"]) == 1


def test_collisions_resolved_in_agent_order(base):
    _, params = base
    env = _multi(base, 3, collisions=True)
    state = _placed(env, params, [[2, 2], [3, 2], [2, 4]])
    east, north, south = (env.action_ids[n] for n in ("move_east", "move_north", "move_south"))
    # agent 0 -> (3,2) is taken by agent 1 (not yet moved): blocked.
    # agent 1 -> (3,3) free: moves. agent 2 -> (2,3) free: moves.
    _, new, _, _, _, info = env.step(jax.random.key(1), state, jnp.asarray([east, north, south]),
                                     params)
    np.testing.assert_array_equal(np.asarray(new.agent.position), [[2, 2], [3, 3], [2, 3]])
    np.testing.assert_array_equal(np.asarray(info["blocked"]), [True, False, False])
    # two agents aiming at one free cell: the lower index wins
    state = _placed(env, params, [[5, 5], [7, 5], [12, 12]])
    _, new, _, _, _, info = env.step(jax.random.key(2), state, jnp.asarray(
        [east, env.action_ids["move_west"], 0]), params)
    np.testing.assert_array_equal(np.asarray(new.agent.position[:2]), [[6, 5], [7, 5]])


def _sequential_collisions(old, moved):
    """The reference rule, one agent after another (what the env did before
    its vectorised resolution): agent i keeps its old cell if its target is
    where an earlier agent ended up or where a later agent still is."""
    positions, blocked = old.copy(), np.zeros(len(old), bool)
    for i in range(len(old)):
        target = np.round(moved[i])
        taken = any(np.array_equal(np.round(positions[j]), target)
                    for j in range(len(old)) if j != i)
        positions[i] = old[i] if taken else moved[i]
        blocked[i] = taken
    return positions, blocked


@pytest.fixture(scope="module")
def resolve_jitted(base):
    env = _multi(base, 12, collisions=True)

    agents = env.reset(jax.random.key(0), env.default_params)[1].agent

    @jax.jit
    def resolve(old, moved):
        resolved, blocked = env._resolve_collisions(agents.replace(position=old),
                                                    agents.replace(position=moved))
        return resolved.position, blocked

    return resolve


@settings(max_examples=40, deadline=None)
@given(cells=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=12,
                      max_size=12),
       moves=st.lists(st.integers(0, 4), min_size=12, max_size=12))
def test_vectorised_collisions_equal_sequential_rule(resolve_jitted, cells, moves):
    """12 agents on a 4x4 patch (crowded, with chains of agents blocking one
    another): the vectorised resolution gives the sequential rule's
    positions and blocked flags exactly."""
    old = np.asarray(cells, np.float32)
    step = np.asarray([[0, 0], [1, 0], [-1, 0], [0, 1], [0, -1]], np.float32)[moves]
    moved = old + step
    want_positions, want_blocked = _sequential_collisions(old, moved)
    positions, blocked = resolve_jitted(jnp.asarray(old), jnp.asarray(moved))
    np.testing.assert_array_equal(np.asarray(blocked), want_blocked)
    np.testing.assert_array_equal(np.asarray(positions), want_positions)


def test_collision_free_starts(base):
    env = _multi(base, 8, collisions=True)
    _, states = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(jax.random.key(0), 200),
                                                       env.default_params)
    cells = np.asarray(states.agent.position)
    distinct = [len({tuple(c) for c in env_cells}) for env_cells in cells]
    assert min(distinct) == 8


@settings(max_examples=6, deadline=None)  # each example compiles its own reset
@given(width=st.integers(1, 7), height=st.integers(2, 7), crowd=st.floats(0.0, 1.0),
       goal_radius=st.sampled_from([0.5, 1.0, 1.5]), seed=st.integers(0, 2**31 - 1))
@pytest.mark.slow
def test_no_two_agents_ever_start_on_one_cell(width, height, crowd, goal_radius, seed):
    """Issue 26 defect 11: with collisions=True agents below the agents-vs-cells
    limit still started on shared cells (start cells were redrawn only
    START_RETRIES times). Any grid, any number of agents up to the limit, 64
    resets each: distinct cells, outside the goal region."""
    from plume_jax.envs.presets import free_start_cells

    try:
        probe, _ = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[width, height],
                                  goal_radius=goal_radius)
    except ValidationError:  # the goal region covers the whole grid
        return
    limit = free_start_cells(Grid(width, height), goal_radius, probe.settings["plume"]["source"])
    if limit < 2:
        return
    num_agents = round(2 + crowd * (limit - 2))
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[width, height],
                                 goal_radius=goal_radius, num_agents=num_agents, collisions=True)
    _, states = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(
        jax.random.split(jax.random.key(seed), 64), params)
    cells = np.asarray(states.agent.position)
    assert np.array_equal(cells, np.round(cells))
    assert all(len({tuple(c) for c in one}) == num_agents for one in cells), cells
    goal = np.asarray(probe.settings["plume"]["source"])
    assert (np.linalg.norm(cells - goal, axis=-1) > goal_radius).all()


def test_start_placement_spreads_agents_all_drawn_on_one_cell(base):
    """The deterministic last stage of the start placement: every agent drawn
    on one cell ends on its own cell, outside the goal region, the first one
    kept where it was drawn."""
    env = _multi(base, 12, collisions=True)
    goal = jnp.asarray([15.0, 0.0])
    place = jax.jit(lambda p: env._place_on_free_cells(p, goal, jnp.float32(1.5)))
    for cell in ([15.0, 15.0], [12.0, 0.0], [0.0, 0.0]):
        positions = np.asarray(place(jnp.tile(jnp.asarray(cell), (12, 1))))
        assert len({tuple(c) for c in positions}) == 12
        assert (np.linalg.norm(positions - np.asarray(goal), axis=-1) > 1.5).all()
        np.testing.assert_array_equal(positions[0], cell)


def test_observe_others(base):
    _, params = base
    env = _multi(base, 3, observe_others=True)
    state = _placed(env, params, [[0, 0], [15, 0], [0, 15]])
    obs, *_ = env.step(jax.random.key(1), state, jnp.zeros(3, jnp.int32), params)
    assert obs.shape == (3, 1 + 4)
    np.testing.assert_allclose(np.asarray(obs[0, 1:]), [1, 0, 0, 1])
    np.testing.assert_allclose(np.asarray(obs[1, 1:]), [-1, 0, -1, 1])
    assert env.observation_labels()[1:] == ["other_0_dx", "other_0_dy", "other_1_dx", "other_1_dy"]
    assert env.observation_space(params).shape == (3, 5)


def test_description_is_json_and_policies_receive_it(base):
    env = _multi(base, 4)
    description = json.loads(json.dumps(env.describe()))
    assert description["num_agents"] == 4
    assert description["action_names"][:2] == ["noop", "move_north"]
    policy = make_agent("klinotaxis", description)
    assert policy.move_ids == tuple(env.action_ids[m] for m in
                                    ("move_north", "move_south", "move_east", "move_west"))


def test_batched_policy_acts_for_all_agents_and_vmaps_over_envs(base):
    env = _multi(base, 4, done_mode="any")
    params = env.default_params
    policy = make_agent("klinotaxis", env)
    assert isinstance(policy, PerAgentPolicy)
    carry = policy.init(jax.random.key(0))
    obs, _ = env.reset(jax.random.key(0), params)
    actions, _ = policy.act(carry, obs, jax.random.key(1))
    assert actions.shape == (4,) and actions.dtype == jnp.int32
    result = rollout(env, params, policy, jax.random.key(0), 16, 30)
    assert result.success.shape == (16,)
    # four klinotaxis searchers on a small plume: most teams arrive within 30 steps
    assert float(np.mean(np.asarray(result.success))) > 0.5
    stateful = StatefulAgent(policy, seed=0)
    assert np.asarray(stateful.act(np.asarray(obs))).shape == (4,)


def test_render_draws_every_agent(base):
    env = _multi(base, 2)
    params = env.default_params
    state = _placed(env, params, [[1, 1], [14, 14]])
    # jitted: op by op the frame costs several times its compile
    image = np.asarray(jax.jit(lambda s: render_state(env, s, params, scale=2))(state))
    from plume_jax.render.frames import AGENT_RGB
    assert tuple(image[(15 - 1) * 2, 1 * 2]) == AGENT_RGB
    assert tuple(image[(15 - 14) * 2, 14 * 2]) == AGENT_RGB


def test_bad_multi_agent_settings(base):
    env, _ = base
    with pytest.raises(ValidationError, match="num_agents"):
        MultiAgentPlumeEnv.from_env(env, num_agents=0)
    with pytest.raises(ValidationError, match="done_mode"):
        MultiAgentPlumeEnv.from_env(env, num_agents=2, done_mode="most")


def test_make_builds_multi_agent_envs_and_one_agent_is_the_single_env():
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[16, 16], sigma=4.0,
                                 num_agents=5, done_mode="any", collisions=True)
    assert isinstance(env, MultiAgentPlumeEnv) and env.num_agents == 5
    assert env.settings["num_agents"] == 5 and env.settings["done_mode"] == "any"
    single, _ = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[16, 16], sigma=4.0, num_agents=1)
    assert not isinstance(single, MultiAgentPlumeEnv) and "num_agents" not in single.settings


@pytest.mark.parametrize("overrides, field", [
    ({"num_agents": 0}, "num_agents"),
    ({"num_agents": 2.5}, "num_agents"),
    ({"num_agents": 3, "done_mode": "most"}, "done_mode"),
    ({"num_agents": 3, "collisions": "yes"}, "collisions"),
    ({"num_agents": 3, "collisions": True, "start": {"type": "fixed", "position": [1, 1]}},
     "start.type"),
])
def test_make_validates_multi_agent_settings(overrides, field):
    with pytest.raises(ValidationError) as excinfo:
        plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[16, 16], sigma=4.0, **overrides)
    assert excinfo.value.parameter == field


def test_swarm_preset_and_its_config_round_trip():
    from plume_jax.envs.config_files import PRESET_DIR, make_from_config

    env, _ = plume_jax.make("PlumeNav-Swarm-v0")
    assert env.num_agents == 8 and env.done_mode == "any" and env.collisions
    assert plume_jax.envs.presets.is_multi_agent("PlumeNav-Swarm-v0")
    again, _ = make_from_config(PRESET_DIR / "PlumeNav-Swarm-v0.yaml")
    assert again == env


def test_gymnasium_layer_refuses_a_multi_agent_env(base):
    from plume_jax.gym import PlumeGymEnv

    with pytest.raises(ValidationError, match="PlumeParallelEnv"):
        PlumeGymEnv(_multi(base, 2))


def test_collisions_refuse_more_agents_than_free_cells():
    """Issue 26 defect 11: 20 agents with collisions on a 4x4 grid started on shared cells."""
    with pytest.raises(ValidationError) as excinfo:
        plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[4, 4], num_agents=20,
                       collisions=True, goal_radius=0.5)
    assert excinfo.value.parameter == "num_agents"
    # the source cell lies inside the goal region: 15 start cells
    assert "at most 15" in str(excinfo.value)
    with pytest.raises(ValidationError, match="num_agents=16 .*at most 15"):
        plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[4, 4], num_agents=16,
                       collisions=True, goal_radius=0.5)
    env, _ = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[4, 4], num_agents=15,
                            collisions=True, goal_radius=0.5)
    assert env.num_agents == 15
    # without collisions agents may share cells: no limit
    env, _ = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[4, 4], num_agents=20,
                            goal_radius=0.5)
    assert env.num_agents == 20
    gymnasium = pytest.importorskip("gymnasium")
    pytest.importorskip("plume_jax.gym")  # registers the ids
    with pytest.raises(ValidationError, match="num_agents=20 .*at most 15"):
        gymnasium.make("plume_jax/PlumeNav-Gaussian-v0", grid_size=[4, 4], num_agents=20,
                       collisions=True, goal_radius=0.5)


def test_collisions_refuse_more_agents_than_cells_when_built_directly(base):
    env, _ = base
    small = dataclasses.replace(env, grid=Grid(2, 2))
    with pytest.raises(ValidationError, match="num_agents=5 .*at most 4"):
        MultiAgentPlumeEnv.from_env(small, num_agents=5, collisions=True)
    assert MultiAgentPlumeEnv.from_env(small, num_agents=5).num_agents == 5


def test_every_env_says_how_many_agents_it_has(base):
    """Issue 25 item 5: callers read ``num_agents`` / ``is_multi_agent``
    instead of branching on ``isinstance(env, MultiAgentPlumeEnv)``."""
    single, _ = base
    assert single.num_agents == 1 and not single.is_multi_agent
    assert single.describe()["num_agents"] == 1
    one = _multi(base, 1)  # a leading agent axis of one: still multi-agent shapes
    assert one.num_agents == 1 and one.is_multi_agent
    three = _multi(base, 3)
    assert three.num_agents == 3 and three.is_multi_agent
    assert isinstance(make_agent("random_walk", one), PerAgentPolicy)
    assert not isinstance(make_agent("random_walk", single), PerAgentPolicy)
    with pytest.raises(TypeError, match="num_agents"):  # still a required field
        MultiAgentPlumeEnv(**{f.name: getattr(single, f.name)
                              for f in dataclasses.fields(single)})


def test_callers_do_not_branch_on_the_multi_agent_type():
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[2]
    for path in ("plume_jax/envs/shared_plume.py", "plume_jax/gym/pettingzoo_env.py",
                 "plume_jax/gym/env.py", "agents/registry.py"):
        source = (root / path).read_text()
        assert "isinstance(env, MultiAgentPlumeEnv)" not in source, path
        assert "import MultiAgentPlumeEnv" not in source, path

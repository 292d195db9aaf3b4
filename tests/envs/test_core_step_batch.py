"""The batch steps that reset only the envs that ended (``env.step_batch``,
and ``env.step`` under ``vmap`` and under a further ``vmap``) return what the
speculative reference ``vmap(env.step_speculative)`` returns, through both
branches (at most ``max_resets`` ended: reset those; more: reset the
batch): the same keys,
states, counts, flags and discrete outcomes exactly, floats up to rounding (XLA
may compile the reset for a smaller batch with another reduction order; on the
development CPU the single-agent cases here were bit for bit identical)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import plume_jax
from plume_jax import ValidationError
from tests.same_results import assert_same_up_to_rounding

NUM_ENVS, NUM_STEPS = 16, 40
SMALL_FILAMENT = {"grid_size": [40, 24], "source": [4, 12], "capacity": 32, "warmup_steps": 4,
                  "start": {"min_distance": 3.0, "max_distance": 20.0}}

CASES = {
    # name: (preset, overrides, agents per env or None)
    "gaussian": ("PlumeNav-Gaussian-v0",
                 {"grid_size": [24, 24], "sigma": 5.0, "goal_radius": 3.0, "max_steps": 12}, None),
    "poisson_composite_obs": (
        "PlumeNav-Poisson-v0",
        {"grid_size": [15, 15], "max_steps": 9,
         "sensor": {"type": "composite", "sensors": [{"type": "hits", "h_max": 3},
                                                     {"type": "position"}]}}, None),
    "filament": ("PlumeNav-Filament-v0", {**SMALL_FILAMENT, "max_steps": 10}, None),
    "swarm": ("PlumeNav-Swarm-v0", {**SMALL_FILAMENT, "max_steps": 10}, 3),
    # the multi-agent path on a cheap plume (the swarm preset's compile is the
    # slowest of the default run: it runs with the slow tests)
    "agents_gaussian": ("PlumeNav-Gaussian-v0",
                        {"grid_size": [24, 24], "sigma": 5.0, "goal_radius": 3.0,
                         "max_steps": 12}, 3),
}


def _run(env, params, agents, step):
    """Scan ``NUM_STEPS`` batch steps with random actions; outputs of every
    step and the final state."""
    key = jax.random.key(0)
    _, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(key, NUM_ENVS), params)
    shape = (NUM_ENVS,) if agents is None else (NUM_ENVS, agents)

    def body(state, k):
        k_act, k_step = jax.random.split(k)
        action = jax.random.randint(k_act, shape, 0, env.num_actions)
        obs, state, reward, terminated, truncated, info = step(
            jax.random.split(k_step, NUM_ENVS), state, action)
        return state, (obs, reward, terminated, truncated, info)

    return jax.jit(lambda s: jax.lax.scan(body, s, jax.random.split(key, NUM_STEPS)))(state)


@functools.lru_cache(maxsize=None)
def _reference(case):
    """``(env, params, agents, want)``: the case's env and the speculative
    reference rollout, computed once and shared by the case's pool sizes."""
    preset, overrides, agents = CASES[case]
    make = {"num_agents": agents} if agents else {}
    env, params = plume_jax.make(preset, **overrides, **make)
    want = _run(env, params, agents, lambda k, s, a: jax.vmap(
        env.step_speculative, in_axes=(0, 0, 0, None))(k, s, a, params))
    return env, params, agents, want


# max_resets=None is the default pool max(1, NUM_ENVS // 16) = 1: the explicit
# pool of 4 runs the cheap branch with several resets gathered at once
@pytest.mark.parametrize("case,max_resets", [
    ("gaussian", 4), ("gaussian", None), ("poisson_composite_obs", None),
    ("filament", None), ("agents_gaussian", None),
    pytest.param("swarm", None, marks=pytest.mark.slow)])
def test_step_batch_equals_speculative_step(case, max_resets):
    env, params, agents, want = _reference(case)
    got = _run(env, params, agents,
               lambda k, s, a: env.step_batch(k, s, a, params, max_resets=max_resets))
    assert_same_up_to_rounding(got, want)
    if max_resets is None:
        # vmap(env.step) resets only what ended, with the same default pool
        got_vmap = _run(env, params, agents, lambda k, s, a: jax.vmap(
            env.step, in_axes=(0, 0, 0, None))(k, s, a, params))
        assert_same_up_to_rounding(got_vmap, want)
    # both branches ran: steps where a few envs ended, and steps where more
    # than max_resets did (all truncate together on the first horizon)
    info = want[1][4]
    done = np.asarray(info["done"] if agents else want[1][2] | want[1][3]).sum(axis=1)
    limit = max_resets or max(1, NUM_ENVS // 16)
    assert (done > limit).any()
    if case in ("gaussian", "poisson_composite_obs"):
        assert ((done > 0) & (done <= limit)).any()


def test_step_batch_rejects_bad_max_resets(small_env):
    env, params = small_env
    _, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(jax.random.key(0), 4),
                                                      params)
    keys = jax.random.split(jax.random.key(1), 4)
    for bad in (0, 5, 2.0, True):
        with pytest.raises(ValidationError, match=r"max_resets.*1\.\.4"):
            env.step_batch(keys, state, jnp.zeros(4, jnp.int32), params, max_resets=bad)


def _sweep(env, params, step):
    """A vmapped sweep: two members (different goal radii), each a batch of
    ``NUM_ENVS`` envs stepped with ``vmap(step)`` inside a ``lax.scan``."""
    members = jax.tree.map(lambda *x: jnp.stack(x), params,
                           params.replace(goal_radius=params.goal_radius + 4.0))
    keys = jax.random.split(jax.random.key(3), (2, NUM_ENVS))

    def member(member_keys, member_params):
        _, state = jax.vmap(env.reset, in_axes=(0, None))(member_keys, member_params)

        def body(state, k):
            k_act, k_step = jax.random.split(k)
            action = jax.random.randint(k_act, (NUM_ENVS,), 0, env.num_actions)
            obs, state, reward, terminated, truncated, info = jax.vmap(
                step, in_axes=(0, 0, 0, None))(jax.random.split(k_step, NUM_ENVS), state,
                                               action, member_params)
            return state, (obs, reward, terminated, truncated, info)

        return jax.lax.scan(body, state, jax.random.split(jax.random.key(4), NUM_STEPS))

    return jax.jit(jax.vmap(member))(keys, members)


@pytest.fixture(scope="module")
def gaussian_case():
    env, params, _, _ = _reference("gaussian")
    return env, params


def test_step_under_nested_vmap_equals_speculative_step(gaussian_case):
    """A vmapped sweep over params: ``env.step`` flattens the two batch axes
    into one batch that resets only what ended, each env with its member's
    params; the results are the speculative reference's."""
    env, params = gaussian_case
    want = _sweep(env, params, env.step_speculative)
    got = _sweep(env, params, env.step)
    assert_same_up_to_rounding(got, want)
    done = np.asarray(want[1][2] | want[1][3])
    # the members differ (their own params reached the step) and resets happened
    assert (done[0] != done[1]).any() and done.any()


def test_step_unbatched_and_broadcast_state_equal_speculative_step(gaussian_case):
    """One env's ``step`` (no ``vmap``) is the speculative step; under a
    ``vmap`` that batches only the keys and actions (the state broadcast),
    too."""
    env, params = gaussian_case
    key = jax.random.key(5)
    _, state = env.reset(key, params)
    state = state.replace(step_count=jnp.asarray(params.max_steps - 1, state.step_count.dtype))
    assert_same_up_to_rounding(env.step(key, state, 1, params),
                               env.step_speculative(key, state, 1, params))
    keys = jax.random.split(key, NUM_ENVS)
    actions = jnp.arange(NUM_ENVS) % env.num_actions
    got = jax.vmap(env.step, in_axes=(0, None, 0, None))(keys, state, actions, params)
    want = jax.vmap(env.step_speculative, in_axes=(0, None, 0, None))(keys, state, actions,
                                                                      params)
    assert bool(np.all(np.asarray(want[4])))  # every env truncated and was reset
    assert_same_up_to_rounding(got, want)

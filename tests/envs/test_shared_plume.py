"""Several single-agent episodes per plume realisation
(:class:`plume_jax.envs.shared_plume.SharedPlumeBatch`): with one agent per
plume it is ``env.step_batch`` bit for bit; with more, every agent reads its
realisation's plume as a single env would, only the agents that ended
restart, and the plume runs on."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import plume_jax
from plume_jax import ValidationError
from plume_jax.envs.shared_plume import SharedPlumeBatch

NUM_ENVS, NUM_STEPS = 8, 24
# a small filament plume whose goal radius holds some of the starts (up to 10
# cells crosswind), so some agents arrive at once and others do not:
# staggered episode ends; those that do not arrive truncate at 10 steps
SMALL_FILAMENT = {"grid_size": [40, 24], "source": [4, 12], "capacity": 32, "warmup_steps": 4,
                  "start": {"min_distance": 3.5, "max_distance": 8.0}, "goal_radius": 6.0,
                  "max_steps": 10}
SMALL_GAUSSIAN = {"grid_size": [24, 24], "sigma": 5.0, "goal_radius": 3.0, "max_steps": 12}


def _rollout(batch, params, key, step_fn=None):
    """Reset with ``split(key, NUM_ENVS)`` and scan ``NUM_STEPS`` steps of
    random actions; ``step_fn(keys, state, action)`` defaults to the shared
    step. Returns ``(first state, (obs, reward, terminated, truncated, info,
    state) per step)``."""
    env = batch.env
    step_fn = step_fn or (lambda k, s, a: batch.step(k, s, a, params))

    def body(state, k):
        k_act, k_step = jax.random.split(k)
        action = jax.random.randint(k_act, (NUM_ENVS,), 0, env.num_actions)
        obs, state, reward, terminated, truncated, info = step_fn(
            jax.random.split(k_step, NUM_ENVS), state, action)
        return state, (obs, reward, terminated, truncated, info, state)

    return body


def _run(batch, params, key, reference=False):
    """The rollout of :func:`_rollout` with the shared batch, or (reference)
    ``env.step_batch`` from ``vmap(env.reset)`` with the same keys."""
    env = batch.env
    keys = jax.random.split(key, NUM_ENVS)
    if reference:
        _, state = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
        body = _rollout(batch, params, key, lambda k, s, a: env.step_batch(k, s, a, params))
    else:
        _, state = batch.reset(keys, params)
        body = _rollout(batch, params, key)
    return state, jax.lax.scan(body, state, jax.random.split(jax.random.fold_in(key, 1),
                                                             NUM_STEPS))[1]


run = jax.jit(_run, static_argnames=("batch", "reference"))


def _assert_identical(got, want):
    got_leaves, want_leaves = jax.tree.leaves(got), jax.tree.leaves(want)
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for g, w in zip(got_leaves, want_leaves):
        if jnp.issubdtype(g.dtype, jax.dtypes.prng_key):
            g, w = jax.random.key_data(g), jax.random.key_data(w)
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def _as_env_states(batch, outputs):
    """The rollout's per-step shared states as ``step_batch``'s states."""
    *rest, states = outputs
    return (*rest, jax.vmap(batch.env_states)(states))


@pytest.fixture(scope="module")
def filament():
    return plume_jax.make("PlumeNav-Filament-v0", **SMALL_FILAMENT)


@pytest.fixture(scope="module")
def shared4(filament):
    """A filament rollout with 4 agents per plume (2 plumes)."""
    env, params = filament
    batch = SharedPlumeBatch(env, 4)
    return batch, params, run(batch, params, jax.random.key(3))


# -- one agent per plume is step_batch ---------------------------------------------


@pytest.mark.parametrize("preset,overrides", [("PlumeNav-Filament-v0", SMALL_FILAMENT),
                                              ("PlumeNav-Gaussian-v0", SMALL_GAUSSIAN)])
def test_one_agent_per_plume_is_step_batch_bit_for_bit(preset, overrides):
    env, params = plume_jax.make(preset, **overrides)
    batch = SharedPlumeBatch(env, 1)
    key = jax.random.key(7)
    first, got = run(batch, params, key)
    first_want, want = run(batch, params, key, reference=True)
    _assert_identical(batch.env_states(first), first_want)
    _assert_identical(_as_env_states(batch, got), want)
    truncated = np.asarray(got[3])
    assert truncated.any(), "no episode ended: the reset path went untested"


@pytest.mark.slow
def test_static_plume_shared_by_four_agents_changes_nothing_but_cost():
    """A Gaussian plume has no state: four agents per plume run exactly
    the episodes of ``step_batch`` (same keys)."""
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", **SMALL_GAUSSIAN)
    batch = SharedPlumeBatch(env, 4)
    key = jax.random.key(11)
    _, got = run(batch, params, key)
    _, want = run(batch, params, key, reference=True)
    _assert_identical(_as_env_states(batch, got), want)


# -- several agents per plume ------------------------------------------------------


def test_every_agent_reads_its_plume_as_a_single_env_would(shared4):
    """The observation that ended each step (``final_observation``, read
    before any reset) is the plume's own concentration and wind at the
    agent's position and heading, in the state of the agent's realisation."""
    batch, params, (_, (obs, reward, term, trunc, info, states)) = shared4
    env = batch.env
    assert float(params.sensor.sensors[1].noise_std) == 0.0  # the wind sensor
    plume = jax.tree.map(lambda x: jnp.repeat(x, 4, axis=1), states.plume)  # [T, N, ...]
    xy, heading = info["agent_xy"], info["agent_heading"]
    read, wind = jax.jit(lambda plume, xy: (
        jax.vmap(jax.vmap(lambda p, point: env.plume.concentration(
            p, point, env.grid, params.plume)))(plume, xy),
        jax.vmap(jax.vmap(lambda p, point: env.plume.wind(p, point, params.plume)))(
            plume, xy)))(plume, xy)
    c, s = jnp.cos(heading), jnp.sin(heading)
    body = jnp.stack([c * wind[..., 0] + s * wind[..., 1],
                      -s * wind[..., 0] + c * wind[..., 1]], axis=-1)
    final = np.asarray(info["final_observation"])
    np.testing.assert_allclose(final[..., 0], np.asarray(read), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(final[..., 1:], np.clip(np.asarray(body), -2.0, 2.0),
                               rtol=1e-5, atol=1e-6)
    assert np.asarray(read).max() > 0, "no agent smelt anything: the check is empty"
    # the agents of one realisation are at different places
    assert len({tuple(p) for p in np.asarray(xy[-1, :4]).tolist()}) > 1


def test_only_agents_that_ended_restart_and_the_plume_runs_on(shared4):
    batch, params, (first, (obs, reward, term, trunc, info, states)) = shared4
    env = batch.env
    done = np.asarray(term | trunc)                                      # [T, N]
    before = jax.tree.map(lambda a, b: jnp.concatenate([a[None], b[:-1]]), first, states)
    steps_before = np.asarray(before.episodes.step_count)
    steps_after = np.asarray(states.episodes.step_count)
    episodes_before = np.asarray(before.episodes.episode_count)
    episodes_after = np.asarray(states.episodes.episode_count)
    np.testing.assert_array_equal(steps_after, np.where(done, 0, steps_before + 1))
    np.testing.assert_array_equal(episodes_after, episodes_before + done)
    # a fresh start only where the episode ended (the others moved from their cell)
    restarted = np.asarray(states.episodes.total_reward) == 0
    assert np.all(restarted[done])
    # staggered ends: some step ends some agents of a realisation and not others
    groups = done.reshape(NUM_STEPS, -1, 4)
    assert np.any(groups.any(axis=2) & ~groups.all(axis=2)), "no staggered episode ends"
    # the puffs run on: each step's plume is the advance of the previous one
    # with the lead's key, whoever ended; only the wind's episode clock restarts
    # where the realisation's lead (its first agent) ended
    keys = jax.vmap(lambda k: jax.random.split(jax.random.split(k)[1], NUM_ENVS))(
        jax.random.split(jax.random.fold_in(jax.random.key(3), 1), NUM_STEPS))
    lead_keys = keys[:, ::4]
    advanced = jax.jit(jax.vmap(jax.vmap(lambda k, p: env.plume.advance(
        env.step_keys(k).plume, p, params.plume))))(lead_keys, before.plume)
    for name in ("active", "head", "released"):
        np.testing.assert_array_equal(np.asarray(getattr(states.plume, name)),
                                      np.asarray(getattr(advanced, name)))
    for name in ("positions", "ages"):  # compiled apart: floats to rounding
        np.testing.assert_allclose(np.asarray(getattr(states.plume, name)),
                                   np.asarray(getattr(advanced, name)), rtol=1e-6, atol=1e-6)
    lead_done = done[:, ::4]
    np.testing.assert_array_equal(np.asarray(states.plume.wind.clock),
                                  np.where(lead_done, 0, np.asarray(advanced.wind.clock)))
    assert lead_done.any() and (groups[..., 1:].any(axis=-1) & ~groups[..., 0]).any(), \
        "no episode end of a non-lead agent without its lead"


def test_same_key_same_trajectory_step_by_step_as_in_the_scan(shared4):
    """The scanned rollout, replayed one jitted step at a time from the
    same keys, is the same bit for bit; another key gives another one."""
    batch, params, (first, (obs, reward, term, trunc, info, states)) = shared4
    _, state = batch.reset(jax.random.split(jax.random.key(3), NUM_ENVS), params)
    _assert_identical(state, first)
    body = _rollout(batch, params, None)
    for t, k in enumerate(jax.random.split(jax.random.fold_in(jax.random.key(3), 1), 6)):
        state, (o, r, te, tr, _, _) = body(state, k)
        _assert_identical((o, r, te, tr, state),
                          jax.tree.map(lambda x: x[t], (obs, reward, term, trunc, states)))
    _, (other_obs, *_) = run(batch, params, jax.random.key(4))
    assert not np.array_equal(np.asarray(other_obs), np.asarray(obs))


@pytest.mark.slow
def test_vmapped_sweep_equals_each_member_alone(filament, shared4):
    """``vmap`` over params (a sweep) of the shared rollout gives each
    member's own rollout (flags exactly, floats to rounding)."""
    env, params = filament
    batch, _, _ = shared4
    rates = jnp.asarray([0.5, 2.0], jnp.float32)
    members = jax.vmap(lambda rate: params.replace(plume=params.plume.replace(
        release_rate=rate)))(rates)
    key = jax.random.key(5)
    swept = jax.jit(jax.vmap(lambda p: _run(batch, p, key)[1]))(members)
    for i in range(2):
        alone = run(batch, jax.tree.map(lambda x: x[i], members), key)[1]
        member = jax.tree.map(lambda x: x[i], swept)
        for got, want in zip(jax.tree.leaves(member), jax.tree.leaves(alone)):
            if jnp.issubdtype(got.dtype, jnp.floating):
                np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5,
                                           atol=1e-6)
            else:
                np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


# -- what is refused ---------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -2, 2.0, True, "4", None])
def test_agents_per_plume_must_be_a_positive_integer(filament, bad):
    with pytest.raises(ValidationError, match="agents_per_plume.*positive integer"):
        SharedPlumeBatch(filament[0], bad)


def test_agents_per_plume_must_divide_the_batch(filament):
    env, params = filament
    batch = SharedPlumeBatch(env, 3)
    keys = jax.random.split(jax.random.key(0), NUM_ENVS)
    with pytest.raises(ValidationError, match="agents_per_plume=3.*divisor of the batch size 8"):
        batch.reset(keys, params)


@pytest.mark.parametrize("preset,overrides,why", [
    ("PlumeNav-Poisson-v0", {"grid_size": [15, 15]}, "source is drawn anew"),
    ("PlumeNav-Movie-v0", {}, "restarts the movie"),
])
def test_plumes_whose_reinit_jumps_refuse_sharing(preset, overrides, why):
    env, _ = plume_jax.make(preset, **overrides)
    with pytest.raises(ValidationError, match=f"agents_per_plume=2.*{why}"):
        SharedPlumeBatch(env, 2)
    SharedPlumeBatch(env, 1)  # one agent per plume is step_batch: always allowed


def test_poisson_plume_with_a_fixed_source_shares():
    env, _ = plume_jax.make("PlumeNav-Poisson-v0", grid_size=[15, 15], source_mode="fixed")
    assert SharedPlumeBatch(env, 2).agents_per_plume == 2


def test_multi_agent_env_refuses_sharing():
    env, _ = plume_jax.make("PlumeNav-Gaussian-v0", num_agents=2)
    with pytest.raises(ValidationError, match="agents_per_plume=2.*multi-agent"):
        SharedPlumeBatch(env, 2)


def test_step_with_a_key_batch_of_another_size_is_a_validation_error():
    """Issue 26 defect 13: keys of another size than the episodes gave a raw JAX ValueError."""
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", **SMALL_GAUSSIAN)
    batch = SharedPlumeBatch(env, 2)
    _, state = batch.reset(jax.random.split(jax.random.key(0), 4), params)
    action = jnp.zeros(4, jnp.int32)
    for size in (2, 6):
        with pytest.raises(ValidationError, match=r"keys=.*expected 4 keys, one per episode"):
            batch.step(jax.random.split(jax.random.key(1), size), state, action, params)
    with pytest.raises(ValidationError, match=r"action=.*\(3,\).*leading axis of 4"):
        batch.step(jax.random.split(jax.random.key(1), 4), state, jnp.zeros(3, jnp.int32),
                   params)
    out = batch.step(jax.random.split(jax.random.key(1), 4), state, action, params)
    assert out.reward.shape == (4,)

"""Gradients through a transition, gymnax 1.0.1's convention
(``supports_transition_gradients``, ``with_transition_gradients()``,
detached by default): ``jax.grad`` through ``env.step`` used to fail
outright ("Linearization failed", the ``custom_vmap`` step had no
derivative rule)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import plume_jax

ACTION = jnp.array([0.7, 0.3], jnp.float32)  # (forward_speed, turn_rate)


@pytest.fixture(scope="module")
def continuous():
    """A continuous mover on a smooth Gaussian plume, with a distance-shaped
    reward (both differentiable in the position), well inside the grid."""
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[32, 32], sigma=6.0,
                                 goal_radius=1.0, actions={"type": "continuous"},
                                 reward={"type": "potential_shaping"})
    _, state = env.reset(jax.random.key(0), params)
    assert 2 < float(state.agent.position[0]) < 29 and 2 < float(state.agent.position[1]) < 29
    return env, params, state


def _reading(env, params, state):
    def f(action):
        obs, _, reward, *_ = env.step(jax.random.key(1), state, action, params)
        return jnp.sum(obs), reward
    return f


def test_grad_through_a_continuous_step_matches_finite_differences(continuous):
    env, params, state = continuous
    genv = env.with_transition_gradients()
    assert genv.supports_transition_gradients and genv.transition_gradients_enabled
    assert not env.transition_gradients_enabled
    reading = lambda a: _reading(genv, params, state)(a)[0]  # noqa: E731
    grad = jax.grad(reading)(ACTION)
    assert np.all(np.isfinite(np.asarray(grad))) and float(jnp.abs(grad).max()) > 1e-4
    h = 1e-2
    fd = [(reading(ACTION + h * e) - reading(ACTION - h * e)) / (2 * h) for e in jnp.eye(2)]
    np.testing.assert_allclose(np.asarray(grad), np.asarray(fd), rtol=2e-2, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(jax.jit(jax.grad(reading))(ACTION)),
                                  np.asarray(grad))
    # the state keeps its gradient too: d(new position)/d(speed) is the heading
    dpos = jax.jacfwd(lambda a: genv.step(jax.random.key(1), state, a, params)[1]
                      .agent.position)(ACTION)[:, 0]
    heading = float(state.agent.heading) + float(ACTION[1])
    np.testing.assert_allclose(np.asarray(dpos), [np.cos(heading), np.sin(heading)],
                               rtol=1e-5, atol=1e-6)


def test_grad_env_steps_exactly_as_the_default_env(continuous):
    env, params, state = continuous
    genv = env.with_transition_gradients()
    assert genv != env and hash(genv) != hash(env)  # compiled separately
    assert genv.with_transition_gradients() == genv
    for got, want in zip(jax.tree.leaves(genv.step(jax.random.key(1), state, ACTION, params)),
                         jax.tree.leaves(env.step(jax.random.key(1), state, ACTION, params))):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_default_env_detaches_the_transition_as_gymnax_does(continuous):
    """gymnax 1.0.1 (e.g. Pendulum): by default ``stop_gradient`` on the
    observation and the state; the reward keeps its gradient; no error."""
    gymnax = pytest.importorskip("gymnax")
    pend, pend_params = gymnax.make("Pendulum-v1")
    _, pend_state = pend.reset(jax.random.key(0), pend_params)

    def pend_out(a):
        obs, _, reward, *_ = pend.step(jax.random.key(1), pend_state, a, pend_params)
        return jnp.sum(obs), reward

    assert float(jax.grad(lambda a: pend_out(a)[0])(0.5)) == 0.0
    assert float(jax.grad(lambda a: pend_out(a)[1])(0.5)) != 0.0

    env, params, state = continuous
    f = _reading(env, params, state)
    np.testing.assert_array_equal(np.asarray(jax.grad(lambda a: f(a)[0])(ACTION)), [0.0, 0.0])
    reward_grad = jax.grad(lambda a: f(a)[1])(ACTION)
    genv_reward_grad = jax.grad(lambda a: _reading(env.with_transition_gradients(), params,
                                                   state)(a)[1])(ACTION)
    assert float(jnp.abs(reward_grad).max()) > 1e-3
    np.testing.assert_array_equal(np.asarray(reward_grad), np.asarray(genv_reward_grad))
    dpos = jax.jacfwd(lambda a: env.step(jax.random.key(1), state, a, params)[1]
                      .agent.position)(ACTION)
    np.testing.assert_array_equal(np.asarray(dpos), np.zeros((2, 2)))


def test_grad_under_vmap_is_each_env_alone(continuous):
    env, params, state = continuous
    genv = env.with_transition_gradients()
    keys = jax.random.split(jax.random.key(5), 3)
    _, states = jax.vmap(genv.reset, in_axes=(0, None))(keys, params)
    actions = jnp.stack([ACTION, 0.5 * ACTION, -ACTION.at[0].set(-0.2)])

    def reading(key, s, a):
        return jnp.sum(genv.step(key, s, a, params)[0])

    batched = jax.vmap(jax.grad(reading, argnums=2))(keys, states, actions)
    for i in range(3):
        one = jax.grad(reading, argnums=2)(keys[i], jax.tree.map(lambda x: x[i], states),
                                           actions[i])
        np.testing.assert_allclose(np.asarray(batched[i]), np.asarray(one), rtol=1e-5,
                                   atol=1e-7)


def test_a_discrete_env_differentiates_without_error():
    """Integer actions carry no gradient; the params still do (here the
    plume width through the reading), instead of a linearisation error."""
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[32, 32], sigma=6.0)
    genv = env.with_transition_gradients()
    _, state = genv.reset(jax.random.key(0), params)

    def reading(sigma):
        p = params.replace(plume=params.plume.replace(sigma=sigma))
        return jnp.sum(genv.step(jax.random.key(1), state, 1, p)[0])

    grad = jax.grad(reading)(params.plume.sigma)
    h = 1e-2
    fd = (reading(params.plume.sigma + h) - reading(params.plume.sigma - h)) / (2 * h)
    np.testing.assert_allclose(float(grad), float(fd), rtol=2e-2)

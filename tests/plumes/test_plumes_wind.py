"""Wind models: constant, Ornstein-Uhlenbeck meander, one switch per
episode, frequent random switches; and the single wind interface
(``plume.wind`` -> ``PlumeProbe.wind``) seen by sensors and actions."""

from __future__ import annotations

import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import plume_jax
from tests.chains import run_chains
from plume_jax.plumes.wind import WIND_KINDS, WindModel


@chex.dataclass(frozen=True)
class P:
    wind_speed: jax.Array
    wind_direction: jax.Array
    wind_direction_std: jax.Array
    wind_correlation_time: jax.Array
    wind_switch_time: jax.Array
    wind_switch_angle: jax.Array
    wind_switch_rate: jax.Array


def params(**kw) -> P:
    base = dict(wind_speed=1.5, wind_direction=0.4, wind_direction_std=0.3,
                wind_correlation_time=20.0, wind_switch_time=5.0, wind_switch_angle=0.5,
                wind_switch_rate=0.1)
    base.update(kw)
    return P(**{k: jnp.asarray(v, jnp.float32) for k, v in base.items()})


def directions(kind: str, p: P, steps: int, chains: int, seed: int = 0) -> np.ndarray:
    """f32[chains, steps]: the direction after each advance."""
    model = WindModel(kind)
    return np.asarray(run_chains(lambda k: model.init(k, p), lambda k, s: model.advance(k, s, p),
                                 lambda s: model.direction(s, p), steps=steps, chains=chains,
                                 key=jax.random.key(seed)))


def test_kinds_and_bad_kind():
    assert WIND_KINDS == ("constant", "meander", "switch_once", "switch_random")
    with pytest.raises(ValueError, match="gale"):
        WindModel("gale")


def test_constant_wind_velocity():
    p = params()
    model = WindModel("constant")
    state = model.advance(jax.random.key(1), model.init(jax.random.key(0), p), p)
    np.testing.assert_allclose(np.asarray(model.velocity(state, p)),
                               [1.5 * math.cos(0.4), 1.5 * math.sin(0.4)], rtol=1e-6)


def test_meander_is_an_ou_process_with_the_given_std_and_correlation_time():
    p = params(wind_direction_std=0.3, wind_correlation_time=20.0)
    d = directions("meander", p, steps=2000, chains=64)
    # stationary from the first step (init draws from the stationary law)
    assert d.mean() == pytest.approx(0.4, abs=0.02)
    assert d.std() == pytest.approx(0.3, rel=0.05)
    x = d - 0.4
    lag = 20
    corr = np.mean(x[:, lag:] * x[:, :-lag]) / np.mean(x * x)
    assert corr == pytest.approx(math.exp(-1.0), abs=0.05)
    corr1 = np.mean(x[:, 1:] * x[:, :-1]) / np.mean(x * x)
    assert corr1 == pytest.approx(math.exp(-1 / 20), abs=0.01)


def test_switch_once_switches_at_the_switch_time_and_alternates_across_episodes():
    p = params(wind_switch_time=5.0, wind_switch_angle=0.5)
    model = WindModel("switch_once")
    state = model.init(jax.random.key(0), p)
    seen = [float(model.direction(state, p))]
    for i in range(8):
        state = model.advance(jax.random.key(i), state, p)
        seen.append(float(model.direction(state, p)))
    np.testing.assert_allclose(seen, [0.4] * 5 + [0.9] * 4, atol=1e-6)
    # next episode: starts where it switched to, switches back
    state = model.reinit(state, p)
    assert int(state.clock) == 0
    seen = [float(model.direction(state, p))]
    for i in range(6):
        state = model.advance(jax.random.key(i), state, p)
        seen.append(float(model.direction(state, p)))
    np.testing.assert_allclose(seen, [0.9] * 5 + [0.4] * 2, atol=1e-6)
    # an episode that ended before its switch keeps its direction
    state = model.reinit(model.reinit(state, p), p)
    assert float(model.direction(state, p)) == pytest.approx(0.4)


def test_switch_random_rate_and_range():
    p = params(wind_switch_rate=0.1, wind_switch_angle=0.5)
    d = directions("switch_random", p, steps=1000, chains=32)
    changes = np.mean(d[:, 1:] != d[:, :-1])
    assert changes == pytest.approx(1 - math.exp(-0.1), abs=0.01)
    assert d.min() >= 0.4 - 0.5 - 1e-6 and d.max() <= 0.4 + 0.5 + 1e-6
    counts = np.histogram(d, bins=4, range=(-0.1, 0.9))[0]
    assert counts.min() > 0.8 * counts.mean()  # uniform over [mean - A, mean + A]


def test_reinit_keeps_meander_running():
    p = params()
    model = WindModel("meander")
    state = model.advance(jax.random.key(3), model.init(jax.random.key(0), p), p)
    again = model.reinit(state, p)
    assert float(again.direction) == float(state.direction) and int(again.clock) == 0


def test_env_sensors_and_actions_read_the_plume_wind():
    """The filament plume's wind reaches the wind sensor (world frame) and
    the surge/cast actions through the one probe interface."""
    env, p = plume_jax.make(
        "PlumeNav-Filament-Constant-v0", grid_size=[32, 24], source=[4, 12], capacity=16,
        warmup_steps=0, wind_direction=math.pi / 2, wind_speed=0.75,
        sensor={"type": "wind", "frame": "world"}, actions="surge_cast",
        start={"type": "fixed", "position": [10, 10]})
    obs, state = env.reset(jax.random.key(0), p)
    np.testing.assert_allclose(np.asarray(obs), [0.0, 0.75], atol=1e-6)
    probe = env.probe(state.plume, p)
    np.testing.assert_allclose(np.asarray(probe.wind(jnp.zeros((3, 2)))),
                               np.tile([0.0, 0.75], (3, 1)), atol=1e-6)
    obs, state, *_ = env.step(jax.random.key(1), state, env.action_ids["surge"], p)
    np.testing.assert_array_equal(np.asarray(state.agent.position), [10, 9])  # upwind = south

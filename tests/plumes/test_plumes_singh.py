"""The Singh et al. (2023) task: their puff plume (physics, concentration law,
wind regimes), the stray limit, flight, the apparent-wind and gated-odour
senses, and the Singh2023 presets."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import plume_jax
from plume_jax.core.types import AgentState, Grid, PlumeProbe
from plume_jax.plumes.singh import SinghPlume
from plume_jax.render.frames import render_frame

ARENA = Grid(13, 21)
SOURCE = (2.0, 10.0)
SINGH_PRESETS = sorted(p for p in plume_jax.PRESETS if p.startswith("PlumeNav-Singh2023-"))


def build(**values):
    plume, params, _ = SinghPlume.build({"source": list(SOURCE), **values}, ARENA, "plume")
    return plume, params


@pytest.fixture(scope="module")
def developed():
    """A constant-wind plume after 30 s, then 25 frames 0.4 s apart."""
    plume, params = build(capacity=2304, warmup_steps=750)
    state = jax.jit(plume.init)(jax.random.key(0), params)
    advance = jax.jit(lambda k, s: jax.lax.fori_loop(
        0, 10, lambda i, s: plume.advance(jax.random.fold_in(k, i), s, params), s))
    frames = []
    for i in range(25):
        state = advance(jax.random.key(i + 1), state)
        frames.append(jax.tree.map(np.asarray, state))
    return plume, params, frames


def test_a_developed_plume_holds_their_puff_count_and_cross_wind_spread(developed):
    """Their simulator (reference.json of benchmarks/singh_reference.json): 1998 live
    puffs, and puff y s.d. 0.069 / 0.100 / 0.144 / 0.171 / 0.200 m in bands x +- 0.25 m
    at 1 / 2 / 4 / 6 / 8 m; a 0.005 m s.d. jump per 0.01 s step gives
    0.005 sqrt(200 x)."""
    _, _, frames = developed
    # 100 births per second (Poisson(1) per 0.01 s) for 40 s: 4000 +- 63
    assert abs(int(frames[-1].released) - 4000) < 200
    # a puff lives 20 s in the box: 2000 +- 45 at any instant (10 s of frames ~ one draw)
    counts = [int(f.active.sum()) for f in frames]
    assert abs(np.mean(counts) - 1998.0) < 0.06 * 1998.0
    assert all(int(f.overwritten) == 0 for f in frames)
    for x, theirs in ((1.0, 0.069), (2.0, 0.100), (4.0, 0.144), (6.0, 0.171), (8.0, 0.200)):
        stds = []
        for f in frames:
            rel = f.positions[f.active] - np.asarray(SOURCE)
            band = rel[np.abs(rel[:, 0] - x) <= 0.25]
            stds.append(band[:, 1].std())
        assert abs(np.mean(stds) - theirs) < 0.1 * theirs, (x, np.mean(stds))
        assert abs(np.mean(stds) - 0.005 * math.sqrt(200 * x)) < 0.1 * theirs


def test_puffs_move_with_the_wind_grow_linearly_and_leave_the_box(developed):
    _, _, frames = developed
    f = frames[-1]
    rel = f.positions[f.active] - np.asarray(SOURCE)
    radii = f.radii[f.active]
    # x = 0.5 m/s * age and r = 0.01 + 0.01 m/s * age: r = 0.01 + x / 50
    np.testing.assert_allclose(radii, 0.01 + rel[:, 0] / 50.0, atol=2e-4)
    assert rel[:, 0].max() < 10.0 and rel[:, 0].min() >= 0.0
    assert np.all(np.abs(rel[:, 1]) < 10.0)


def test_the_concentration_is_their_square_top_hat_of_r0_over_r_cubed():
    plume, params = build(capacity=4, warmup_steps=0)
    state = plume.init(jax.random.key(0), params)
    state = state.replace(positions=jnp.asarray([[5.0, 10.0], [5.1, 10.0], [0, 0], [0, 0]]),
                          radii=jnp.asarray([0.11, 0.05, 0.01, 0.01]),
                          active=jnp.asarray([True, True, False, False]))
    points = jnp.asarray([[5.0, 10.0], [5.1, 10.1], [5.105, 10.04], [4.9, 9.9], [5.2, 10.0],
                          [5.0, 10.12]])
    c = np.asarray(plume.concentration(state, points, ARENA, params))
    big, small = (0.01 / 0.11) ** 3, (0.01 / 0.05) ** 3
    # inside the big square; its corner region; both squares; inside; outside (x, then y)
    np.testing.assert_allclose(c, [big, big, big + small, big, 0.0, 0.0], rtol=1e-5)
    # their evaluation plumes: half the growth, r = r0 + 0.5 (r - r0)
    half = np.asarray(plume.concentration(state, points[:1], ARENA,
                                          params.replace(diffusion=jnp.float32(0.5))))
    np.testing.assert_allclose(half, [(0.01 / 0.06) ** 3], rtol=1e-5)
    assert float(plume.concentration(state, jnp.asarray([-0.5, 3.0]), ARENA, params)) == 0.0


def wind_angles(plume, params, steps, key=0):
    """The wind direction (degrees) after each env step, from a fresh init
    (one compiled program: op by op, init and the scan cost several times more)."""

    @jax.jit
    def run(params):
        state = plume.init(jax.random.key(key), params)

        def body(s, k):
            s = plume.advance(k, s, params)
            w = plume.wind(s, jnp.zeros(2), params)
            return s, jnp.degrees(jnp.arctan2(w[1], w[0]))

        return jax.lax.scan(body, state, jax.random.split(jax.random.key(key + 1), steps))[1]

    return np.asarray(run(params))


def test_switch_once_turns_45_degrees_counter_clockwise_at_the_switch_time():
    plume, params = build(capacity=8, warmup_steps=20, wind_kind="switch_once", switch_time=2.5)
    angles = wind_angles(plume, params, 100)
    # 2.5 s = 62.5 env steps of 0.04 s: the switch is in the 63rd step (250 puff steps)
    np.testing.assert_allclose(angles[:62], 0.0, atol=1e-4)
    np.testing.assert_allclose(angles[62:], 45.0, atol=1e-4)
    # auto-reset: the next episode starts at 45 degrees and switches back
    @jax.jit
    def two_episodes(params):
        state = jax.lax.fori_loop(0, 70, lambda i, s: plume.advance(jax.random.key(i), s, params),
                                  plume.init(jax.random.key(0), params))
        state = plume.reinit(jax.random.key(1), state, params)
        state = jax.lax.fori_loop(0, 70, lambda i, s: plume.advance(jax.random.key(i), s, params),
                                  state)
        return plume.wind(state, jnp.zeros(2), params)

    w = two_episodes(params)
    assert abs(float(jnp.degrees(jnp.arctan2(w[1], w[0])))) < 1e-4


def test_switch_many_sets_a_clipped_normal_direction_every_3_s():
    plume, params = build(capacity=8, warmup_steps=0, wind_kind="switch_many")
    angles = wind_angles(plume, params, 25 * 1200)  # 20 minutes
    changes = np.flatnonzero(np.diff(angles) != 0.0) + 1
    gaps = np.diff(changes) * 0.04
    # 3 s +- two jitters of U[-0.3, 0.3) s, measured at 0.04 s steps
    assert gaps.min() > 2.4 - 0.08 and gaps.max() < 3.6 + 0.08
    assert abs(gaps.mean() - 3.0) < 0.05
    new = angles[changes]
    assert np.all(np.abs(new) <= 60.0 + 1e-4)
    # N(0, 30 deg) clipped at +-60: s.d. 28.5 deg, 4.6 % of the draws at the clip
    assert abs(new.std() - 28.5) < 3.0 and abs(new.mean()) < 4.0
    assert 0.01 < np.mean(np.abs(new) > 60.0 - 1e-3) < 0.10


def test_the_cross_wind_noise_stays_along_world_y_in_a_turned_wind():
    """Theirs adds the cross-wind noise to y whatever the wind's direction."""
    plume, params = build(capacity=64, warmup_steps=0, wind_kind="switch_once",
                          switch_time=0.0, switch_angle=math.pi / 2)
    state = jax.jit(lambda params: jax.lax.fori_loop(
        0, 25, lambda i, s: plume.advance(jax.random.key(i), s, params),
        plume.init(jax.random.key(0), params)))(params)
    rel = np.asarray(state.positions)[np.asarray(state.active)] - np.asarray(SOURCE)
    np.testing.assert_allclose(rel[:, 0], 0.0, atol=1e-6)  # no noise along x
    assert rel[:, 1].max() > 0.3


@pytest.fixture(scope="module")
def constant_env():
    """``(env, params, step)``: the Constant preset and its jitted ``step_env``
    (compiled once, shared by the tests)."""
    env, params = plume_jax.make("PlumeNav-Singh2023-Constant-v0")
    return env, params, jax.jit(env.step_env)


def test_straying_two_metres_from_every_puff_ends_the_episode(constant_env):
    env, params, step = constant_env
    obs, state = env.reset(jax.random.key(0), params)
    near = state.replace(agent=AgentState.at([8.0, 10.0], 0.0))
    far = state.replace(agent=AgentState.at([8.0, 13.5], 0.0))
    still = jnp.asarray([-1.0, 0.0])
    *_, terminated, truncated, info = step(jax.random.key(1), near, still, params)
    assert not bool(terminated) and float(info["discount"]) == 1.0
    _, after, _, terminated, truncated, info = step(jax.random.key(1), far, still, params)
    assert bool(terminated) and not bool(truncated) and not bool(info["goal_reached"])
    assert float(info["discount"]) == 0.0
    assert bool(env.is_terminated(after, params)) and not bool(env.is_truncated(after, params))
    # stray_limit 0: never
    off = params.replace(plume=params.plume.replace(stray_limit=jnp.float32(0.0)))
    assert not bool(step(jax.random.key(1), far, still, off)[3])


def test_plumes_without_a_stray_limit_never_end_an_episode_off_the_plume():
    env, params = plume_jax.make("PlumeNav-Gaussian-v0")
    obs, state = env.reset(jax.random.key(0), params)
    assert not bool(env.plume.strayed(state.plume, jnp.asarray([[0.0, 0.0], [120.0, 3.0]]),
                                      params.plume).any())


def test_a_flier_is_carried_by_the_wind_and_feels_the_apparent_wind(constant_env):
    env, params, step = constant_env
    obs, state = env.reset(jax.random.key(0), params)
    heading = math.pi / 2  # facing north, across the wind (0.5 m/s toward east)
    state = state.replace(agent=AgentState.at([6.0, 10.0], heading))
    obs0, sensor0 = env.sensor.init(jax.random.key(0), state.agent,
                                    env.probe(state.plume, params), params.sensor)
    # at rest the apparent wind is the wind: 0.5 m/s from the agent's right
    np.testing.assert_allclose(np.asarray(obs0[:2]), [0.0, -0.5], atol=1e-5)
    state = state.replace(sensor=sensor0)
    obs, after, *_ = step(jax.random.key(1), state, jnp.asarray([1.0, 0.0]), params)
    # 2 m/s north for 0.04 s plus 0.5 m/s east: (0.02, 0.08)
    np.testing.assert_allclose(np.asarray(after.agent.position), [6.02, 10.08], atol=1e-5)
    # apparent wind: wind - air velocity = (0.5, -2) m/s, i.e. 2 m/s head-on, 0.5 from the right
    np.testing.assert_allclose(np.asarray(obs[:2]), [-2.0, -0.5], atol=1e-4)


def test_odour_is_gated_at_the_threshold_and_scaled_by_the_episode_gain():
    sensor, params, _ = plume_jax.sensors.SENSORS["gated_concentration"].build(
        {"threshold": 1e-3, "gain_low": 2.0, "gain_high": 2.0}, ARENA, "sensor")
    agent = AgentState.at([3.0, 3.0], 0.0)
    for c, expected in ((4e-4, 0.0), (6e-4, 1.2e-3), (0.7, 1.0)):
        probe = PlumeProbe(concentration=lambda p, c=c: jnp.full(jnp.shape(p)[:-1], c))
        obs, gain = sensor.init(jax.random.key(0), agent, probe, params)
        np.testing.assert_allclose(np.asarray(obs), [expected], rtol=1e-5)
    sensor, params, _ = plume_jax.sensors.SENSORS["gated_concentration"].build(
        {"gain_low": 0.5, "gain_high": 1.5}, ARENA, "sensor")
    gains = jax.vmap(lambda k: sensor.init(k, agent, probe, params)[1])(
        jax.random.split(jax.random.key(0), 2000))
    assert 0.5 <= float(gains.min()) < 0.52 and 1.48 < float(gains.max()) <= 1.5


def test_singh_presets_are_registered_in_metres():
    assert [p.split("-")[2] for p in SINGH_PRESETS] == [
        "Constant", "Sparse20", "Sparse40", "Sparse60", "Sparse80", "SwitchMany", "SwitchOnce"]
    for pid in SINGH_PRESETS:
        spec = plume_jax.PRESETS[pid]
        assert spec["grid_size"] == [13, 21] and spec["goal_radius"] == 0.2
        assert spec["max_steps"] == 299 and spec["plume"]["stray_limit"] == 2.0
    rates = {p.split("-")[2]: plume_jax.PRESETS[p]["plume"]["birth_rate"] for p in SINGH_PRESETS}
    assert rates == {"Constant": 1.0, "Sparse20": 0.2, "Sparse40": 0.4, "Sparse60": 0.6,
                     "Sparse80": 0.8, "SwitchMany": 1.0, "SwitchOnce": 1.0}


@pytest.mark.parametrize("preset", [
    p if p.endswith(("Constant-v0", "SwitchMany-v0")) else pytest.param(p, marks=pytest.mark.slow)
    for p in SINGH_PRESETS])
def test_singh_preset_resets_steps_and_renders(preset):
    env, params = plume_jax.make(preset)
    space = env.action_space(params)

    @jax.jit
    def episode(key):
        obs, state = env.reset(key, params)
        action = (space.low + space.high) / 2
        obs, state, reward, *_ = env.step(key, state, action, params)
        return obs, reward, state, render_frame(env, state.plume, state.agent, params, scale=4)

    obs, reward, state, image = episode(jax.random.key(0))
    assert obs.shape == (3,) and np.all(np.isfinite(np.asarray(obs)))
    assert np.isfinite(float(reward)) and image.shape[0] == 21 * 4
    assert int(state.plume.overwritten) == 0

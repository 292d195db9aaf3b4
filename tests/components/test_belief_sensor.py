"""The ``belief`` sensor (plume_jax/sensors/belief.py): on the Poisson
benchmark presets its posterior equals the infotaxis agent's, step for step
(same keys, same actions, across auto-resets); its observation is the
posterior seen from the agent (centred, cropped, padded, or the grid as
is), a valid observation; bad configurations are refused."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import plume_jax
from agents.infotaxis import InfotaxisPolicy
from plume_jax import ValidationError
from plume_jax.envs.presets import PRESETS
from plume_jax.sensors import SENSORS
from plume_jax.core.types import AgentState, Grid

# PlumeNav-Poisson-Iso53x53-v0 is PlumeNav-Poisson-Iso19x19-v0 on a larger grid
# (tests/preset_sets.py: SAME_CODE_AS_ANOTHER_PRESET): the isotropic case below
# runs its code; the windy one has the other plume law and a non-square grid.
BENCHMARKS = ["PlumeNav-Poisson-Iso19x19-v0", "PlumeNav-Poisson-Windy81x41-v0"]


def belief_config(preset: str, **extra) -> dict:
    """The belief sensor matching a preset: its hits sensor, plume law and goal radius."""
    spec = PRESETS[preset]
    return {"type": "belief", "sensor": dict(spec["sensor"]), "plume": dict(spec["plume"]),
            "goal_radius": spec["goal_radius"], **extra}


def lockstep(env, belief_env, policy, num_steps, params, belief_params, key):
    """Infotaxis acting on ``env``, and the same keys and actions on
    ``belief_env``. Returns, stacked over steps: the agent's posterior after
    it read the step's observation, the sensor's posterior after the same
    reading, the belief observation, the agent's cell, and whether the step
    ended the episode (the agent is then re-initialised)."""

    def body(carry, step_key):
        obs, state, b_obs, b_state, agent_carry = carry
        k_act, k_env = jax.random.split(step_key)
        action, agent_carry = policy.act(agent_carry, obs, k_act)
        out = (agent_carry.posterior, b_state.sensor.posterior, b_obs, b_state.agent.position)
        obs, state, _, terminated, truncated, _ = env.step(k_env, state, action, params)
        b_obs, b_state, *_ = belief_env.step(k_env, b_state, action, belief_params)
        done = terminated | truncated
        agent_carry = jax.tree.map(lambda new, old: jnp.where(done, new, old),
                                   policy.init(k_act), agent_carry)
        return (obs, state, b_obs, b_state, agent_carry), out + (done,)

    k_reset, k_run = jax.random.split(key)
    obs, state = env.reset(k_reset, params)
    b_obs, b_state = belief_env.reset(k_reset, belief_params)
    carry = (obs, state, b_obs, b_state, policy.init(k_reset))
    return jax.lax.scan(body, carry, jax.random.split(k_run, num_steps))[1]


def centred_view(posterior: np.ndarray, cell, rows: int, cols: int) -> np.ndarray:
    """The centred window by explicit indexing (0 off the grid)."""
    H, W = posterior.shape
    x, y = int(cell[0]), int(cell[1])
    out = np.zeros((rows, cols), np.float32)
    for j in range(rows):
        for i in range(cols):
            cx, cy = x + i - (cols - 1) // 2, y + j - (rows - 1) // 2
            if 0 <= cx < W and 0 <= cy < H:
                out[j, i] = posterior[cy, cx]
    return out


@pytest.mark.parametrize("preset", BENCHMARKS)
def test_belief_equals_the_infotaxis_posterior_step_for_step(preset):
    """Same keys, same actions: after every reading, episode starts after an
    auto-reset included, the sensor's posterior is the space-aware infotaxis
    agent's, bit for bit; the observation is that posterior centred on the
    agent in the full (2W-1)x(2H-1) window and sums to 1."""
    num_steps = 60 if "19x19" in preset else 30
    env, params = plume_jax.make(preset, max_steps=12)  # several episodes per run
    belief_env, belief_params = plume_jax.make(preset, sensor=belief_config(preset),
                                               max_steps=12)
    policy = InfotaxisPolicy.for_env(env, space_aware=True)
    run = jax.jit(lockstep, static_argnums=(0, 1, 2, 3))
    agent_p, sensor_p, obs, cells, done = (np.asarray(a) for a in run(
        env, belief_env, policy, num_steps, params, belief_params, jax.random.key(5)))
    assert done.sum() >= 2, "the run should cross auto-resets"
    np.testing.assert_array_equal(agent_p, sensor_p)
    H, W = env.grid.height, env.grid.width
    assert obs.shape == (num_steps, (2 * H - 1) * (2 * W - 1)) and obs.dtype == np.float32
    for t in range(num_steps):
        np.testing.assert_array_equal(obs[t].reshape(2 * H - 1, 2 * W - 1),
                                      centred_view(sensor_p[t], cells[t], 2 * H - 1, 2 * W - 1))
    np.testing.assert_allclose(obs.sum(axis=1), 1.0, atol=1e-5)
    space = belief_env.observation_space(belief_params)
    assert all(bool(space.contains(o)) for o in obs[:: max(1, num_steps // 8)])


# -- the observation on a small grid ---------------------------------------------

GRID = Grid(width=7, height=5)


def build(**cfg):
    return SENSORS["belief"].build(cfg, GRID, "sensor")


def fake_probe(mean: float):
    """A probe whose concentration is ``mean`` everywhere (hits are drawn from it)."""
    from plume_jax.core.types import PlumeProbe

    return PlumeProbe(concentration=lambda p: jnp.full(jnp.shape(p)[:-1], mean, jnp.float32))


@pytest.mark.parametrize("cfg, shape", [
    ({}, (9, 13)),
    ({"window": [5, 3]}, (3, 5)),      # cropped
    ({"window": [17, 11]}, (11, 17)),  # padded
    ({"centred": False}, (5, 7)),      # the grid as is
    ({"window": [9, 7], "grid_channel": True}, (7, 9)),
    ({"centred": False, "grid_channel": True}, (5, 7)),
], ids=["full", "crop", "pad", "grid", "walls", "grid-walls"])
def test_observation_is_the_posterior_seen_from_the_agent(cfg, shape):
    sensor, params, _ = build(sensor={"type": "hits", "h_max": 3}, **cfg)
    assert sensor.image_shape == shape
    channels = 2 if cfg.get("grid_channel") else 1
    size = shape[0] * shape[1]
    space = sensor.observation_space(params)
    assert space.shape == (channels * size,)
    labels = sensor.observation_labels()
    assert len(labels) == len(set(labels)) == channels * size
    probe = fake_probe(0.7)
    init = jax.jit(lambda k, a, p: sensor.init(k, a, probe, p))
    observe = jax.jit(lambda k, a, s, p: sensor.observe(k, a, probe, s, p))
    obs, state = init(jax.random.key(0), AgentState.at([2, 1]), params)
    for t, position in enumerate([[3, 1], [6, 4], [0, 4], [0.4, 0.2]]):
        obs, state = observe(jax.random.key(t + 1), AgentState.at(position), state, params)
        images = np.asarray(obs).reshape((channels,) + shape)
        posterior = np.asarray(state.posterior)
        cell = np.round(position).astype(int)
        centre = ((shape[0] - 1) // 2) * shape[1] + (shape[1] - 1) // 2
        if cfg.get("centred", True):
            np.testing.assert_array_equal(images[0], centred_view(posterior, cell, *shape))
            assert labels[centre] == "belief_dx0_dy0"
            if channels == 2:
                np.testing.assert_array_equal(
                    images[1], centred_view(np.ones_like(posterior), cell, *shape))
                assert labels[size + centre] == "grid_dx0_dy0"
        else:
            np.testing.assert_array_equal(images[0], posterior)
            assert labels[3 * 7 + 2] == "belief_x2_y3"
            if channels == 2:
                assert np.all(images[1] == 1.0)
        assert bool(space.contains(obs)) and obs.dtype == jnp.float32
        assert abs(posterior.sum() - 1.0) < 1e-5
        assert posterior[cell[1], cell[0]] == 0.0  # the search goes on: not here


def test_first_reading_gives_otto_initial_belief():
    """Uniform prior, a first non-zero hit at the agent: the belief is the
    hit's likelihood over the other cells, normalised (from the sensor's own
    likelihood table, which is the Poisson law's capped classes)."""
    from plume_jax.plumes.poisson_posterior import capped_poisson_table
    from scipy.special import k0

    sensor, params, _ = build(sensor={"type": "hits", "h_max": 3, "nonzero_first": True},
                              plume={"lambda_over_dx": 1.5, "r_dt": 2.0})
    obs, state = sensor.init(jax.random.key(3), AgentState.at([2, 1]), fake_probe(3.0), params)
    ys, xs = np.mgrid[0:5, 0:7]
    d = np.maximum(np.hypot(xs - 2, ys - 1), 0.5)
    mu = 2.0 / np.log(3.0) * k0(d / 1.5)
    lik = capped_poisson_table(mu, 3)
    lik[:, 1, 2] = 0.0
    posterior = np.asarray(state.posterior)
    matches = [c for c in (1, 2) if np.allclose(posterior, lik[c] / lik[c].sum(), atol=1e-6)]
    assert len(matches) == 1  # the belief is the normalised likelihood of the class read


@pytest.mark.parametrize("cfg, name", [
    ({"sensor": {"type": "concentration"}}, "sensor.sensor.type"),
    ({"centred": False, "window": [3, 3]}, "sensor.window"),
    ({"window": [4, 3]}, "sensor.window"),
    ({"window": [3]}, "sensor.window"),
    ({"window": [0, 3]}, "sensor.window"),
    ({"plume": {"model": "gaussian"}}, "sensor.plume.model"),
    ({"plume": {"lambda_over_dx": -1.0}}, "sensor.plume.lambda_over_dx"),
    ({"plume": 3}, "sensor.plume"),
    ({"goal_radius": -1.0}, "sensor.goal_radius"),
])
def test_bad_configurations_are_refused_naming_the_setting(cfg, name):
    with pytest.raises(ValidationError, match=name.replace(".", r"\.")):
        build(**cfg)


@pytest.mark.parametrize("radius", [float(np.hypot(6, 4)), 8.0, 1000.0])
def test_belief_goal_radius_at_or_beyond_the_grid_diagonal_is_refused(radius):
    """Every cell within goal_radius of the agent: the posterior was all zero, silently."""
    with pytest.raises(ValidationError, match=r"sensor\.goal_radius=.*below the grid's "
                                              r"diagonal \(7\.2111 cells on this 7x5 grid\)"):
        build(goal_radius=radius)
    build(goal_radius=float(np.hypot(6, 4)) - 0.01)  # just below: accepted

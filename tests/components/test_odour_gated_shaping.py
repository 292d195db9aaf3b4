"""``odour_gated_shaping``: Singh et al. (2023)'s reward terms beyond the tick
(code/plume_env.py with r_shaping 'step oob'): distance gained pays on the
plume only, a step off the plume costs 5 ticks more, straying costs
5 x the distance to the source plus the distance to the nearest puff,
doubled upwind of the source."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

import plume_jax
from plume_jax.core.types import AgentState, Grid, PlumeProbe
from plume_jax.rewards import REWARDS

GRID = Grid(width=16, height=16)
GOAL = jnp.asarray([4.0, 8.0], jnp.float32)
PUFFS = jnp.asarray([[5.0, 8.0], [9.0, 8.0], [0.0, 0.0]], jnp.float32)
LIVE = jnp.asarray([True, True, False])


def _reward(**settings):
    return REWARDS["odour_gated_shaping"].build(settings, GRID, "reward")[:2]


def _probe(concentration: float, strayed: bool) -> PlumeProbe:
    return PlumeProbe(concentration=lambda p: jnp.full(jnp.shape(p)[:-1], concentration),
                      puffs=lambda: (PUFFS, LIVE),
                      strayed=lambda p: jnp.full(jnp.shape(p)[:-1], strayed))


def _r(prev, nxt, concentration=1.0, strayed=False, **settings) -> float:
    reward, params = _reward(**settings)
    return float(reward.compute(AgentState.at(prev), AgentState.at(nxt), GOAL, jnp.asarray(False),
                                params, probe=_probe(concentration, strayed)))


def test_on_the_plume_distance_gained_and_lost_both_pay_scale_per_cell():
    assert _r([10.0, 8.0], [9.0, 8.0]) == pytest.approx(5.0)
    assert _r([9.0, 8.0], [10.0, 8.0]) == pytest.approx(-5.0)
    assert _r([10.0, 8.0], [9.0, 8.0], scale=2.0) == pytest.approx(2.0)


def test_off_the_plume_only_losses_count_and_each_step_costs_five_ticks():
    tick = 10.0 / 300.0
    assert _r([10.0, 8.0], [9.0, 8.0], concentration=0.0) == pytest.approx(-5 * tick)
    assert _r([9.0, 8.0], [10.0, 8.0], concentration=0.0) == pytest.approx(-5.0 - 5 * tick)
    # at the threshold is off (theirs: observation <= threshold)
    assert _r([10.0, 8.0], [9.0, 8.0], concentration=1e-4) == pytest.approx(-5 * tick)
    assert _r([10.0, 8.0], [9.0, 8.0], concentration=2e-4) == pytest.approx(5.0)


def test_straying_costs_five_times_the_distance_to_the_source_plus_the_nearest_puff():
    # at (12, 8): 8 cells from the goal, 3 from the nearest live puff (the dead one is nearer)
    r = _r([12.0, 8.0], [12.0, 8.0], concentration=0.0, strayed=True)
    assert r == pytest.approx(-5 * 10.0 / 300.0 - (5 * 8.0 + 3.0))


def test_straying_upwind_of_the_source_costs_double():
    # at (1, 8): west of the goal (x < goal x), 3 cells from it, 4 from the nearest puff
    r = _r([1.0, 8.0], [1.0, 8.0], concentration=0.0, strayed=True, off_plume_penalty=0.0)
    assert r == pytest.approx(-2.0 * (5 * 3.0 + 4.0))
    r = _r([1.0, 8.0], [1.0, 8.0], concentration=0.0, strayed=True, off_plume_penalty=0.0,
           overshoot_factor=1.0)
    assert r == pytest.approx(-(5 * 3.0 + 4.0))


def test_it_needs_the_probe():
    reward, params = _reward()
    with pytest.raises(TypeError, match="probe"):
        reward.compute(AgentState.at([1.0, 1.0]), AgentState.at([1.0, 2.0]), GOAL,
                       jnp.asarray(False), params)


def test_bad_settings_are_refused_naming_them():
    from plume_jax.core.errors import ValidationError

    with pytest.raises(ValidationError, match="overshoot_factor"):
        _reward(overshoot_factor=0.5)
    with pytest.raises(ValidationError, match="off_plume_penalty"):
        _reward(off_plume_penalty=-1.0)


SINGH_REWARD = {"type": "weighted_sum", "components": [
    {"type": "step_penalty", "goal_reward": 101.0, "step_penalty": 10.0 / 300.0},
    {"type": "odour_gated_shaping"}]}


@pytest.fixture(scope="module")
def singh_env():
    env, params = plume_jax.make("PlumeNav-Singh2023-Constant-v0", reward=SINGH_REWARD)
    return env, params, jax.jit(env.step_env)


def test_in_their_env_the_step_that_strays_pays_their_stray_penalty(singh_env):
    """Through the env: the weighted sum hands the plume to the component,
    and the step that ends the episode by straying (the plume's own rule)
    pays 5 x the distance to the source plus the distance to the nearest
    puff, on top of the off-plume tick."""
    env, params, step = singh_env
    obs, state = env.reset_env(jax.random.key(3), params)
    action = jnp.asarray([1.0, 0.0], jnp.float32)  # full speed, no turn: out of the plume
    rewards = []
    for t in range(299):
        prev = state
        obs, state, reward, terminated, truncated, info = step(jax.random.key(100 + t), state,
                                                                action, params)
        rewards.append(float(reward))
        if bool(terminated) or bool(truncated):
            break
    assert bool(terminated) and not bool(state.goal_reached), "the agent did not stray"
    pos, goal = state.agent.position, info["goal_location"]
    d_prev = float(jnp.linalg.norm(prev.agent.position - goal))
    d = float(jnp.linalg.norm(pos - goal))
    nearest = float(env.plume.nearest_puff_distance(state.plume, pos, params.plume))
    assert nearest > 2.0
    overshoot = 2.0 if float(pos[0]) < float(goal[0]) else 1.0
    expected = (-10.0 / 300.0 - 5 * 10.0 / 300.0 + min(0.0, 5 * (d_prev - d))
                - overshoot * (5 * d + nearest))
    assert rewards[-1] == pytest.approx(expected, rel=1e-4)
    # no step before it paid a stray penalty
    assert min(rewards[:-1]) > -1.0  # at most 0.1 m lost per step, 5 x that plus the ticks


def test_it_is_declared_not_potential_based_and_reading_the_plume():
    settings = {k: v for k, v in SINGH_REWARD.items() if k != "type"}
    reward, _ = REWARDS["weighted_sum"].build(settings, GRID, "reward")[:2]
    assert reward.reads_plume and not reward.potential_based
    plain, _ = REWARDS["weighted_sum"].build({}, GRID, "reward")[:2]
    assert not plain.reads_plume and plain.potential_based

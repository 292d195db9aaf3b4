"""``spec.reward_threshold`` of the registered presets (issue 30: RL Zoo and
Gymnasium users read it as "solved"; plume_jax registered none)."""

from __future__ import annotations

import gymnasium
import pytest

import plume_jax  # noqa: F401  registers the presets
from plume_jax.gym.registration import SOLVED_SUCCESS_RATE, gym_id, reward_threshold
from plume_jax.envs.presets import PRESETS, is_multi_agent

SINGLE_AGENT = [p for p in PRESETS if not is_multi_agent(p)]


@pytest.mark.parametrize("preset", SINGLE_AGENT)
def test_reward_threshold_is_set_exactly_where_the_return_measures_success(preset):
    reward = PRESETS[preset]["reward"]
    threshold = gymnasium.spec(gym_id(preset)).reward_threshold
    if reward["type"] == "sparse" and reward.get("goal_reward", 1.0) > 0:
        assert threshold == pytest.approx(SOLVED_SUCCESS_RATE * reward.get("goal_reward", 1.0))
    else:
        assert threshold is None


def test_the_gaussian_presets_have_one():
    assert gymnasium.spec("plume_jax/PlumeNav-Gaussian-v0").reward_threshold == \
        pytest.approx(0.95)


@pytest.mark.parametrize("settings,want", [
    ({"reward": "sparse"}, SOLVED_SUCCESS_RATE * 1.0),  # a bare type name: the default reward
    ({"reward": {"type": "sparse", "goal_reward": 2.0}}, SOLVED_SUCCESS_RATE * 2.0),
    ({"reward": {"type": "sparse", "goal_reward": 0.0}}, None),
    ({"reward": {"type": "step_penalty", "goal_reward": 1.0}}, None),
])
def test_reward_threshold_of_preset_settings(settings, want):
    got = reward_threshold(settings)
    assert got == (None if want is None else pytest.approx(want))

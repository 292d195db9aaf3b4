"""Gymnasium's and Stable-Baselines3's env checkers on every registered preset,
and the registration itself."""

from __future__ import annotations

import warnings

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import plume_jax
from tests.preset_sets import SAME_INTERFACE_AS_ANOTHER_PRESET, per_preset
from plume_jax.core.errors import ValidationError
from plume_jax.gym import PlumeGymEnv, PlumeVectorEnv, gym_id, register_presets

PRESET_IDS = sorted(p for p in plume_jax.PRESETS if not plume_jax.envs.presets.is_multi_agent(p))


def _checked(fn):
    """Run ``fn`` and return the warnings it emitted (all of them, once each)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [f"{w.category.__name__}: {w.message} ({w.filename}:{w.lineno})" for w in caught]


@pytest.mark.parametrize("preset", per_preset(PRESET_IDS, SAME_INTERFACE_AS_ANOTHER_PRESET))
def test_gymnasium_check_env_passes_without_warnings(preset):
    env = gymnasium.make(gym_id(preset))
    # The raw env, as Gymnasium recommends; it has a spec, so the checker
    # also builds it in every declared render mode and closes it twice.
    assert _checked(lambda: check_env(env.unwrapped)) == []


@pytest.mark.parametrize("preset", per_preset(PRESET_IDS, SAME_INTERFACE_AS_ANOTHER_PRESET))
def test_sb3_check_env_passes_without_warnings(preset):
    sb3_checker = pytest.importorskip("stable_baselines3.common.env_checker")
    env = gymnasium.make(gym_id(preset))
    assert _checked(lambda: sb3_checker.check_env(env.unwrapped, warn=True)) == []
    # Through gymnasium.make's wrappers (TimeLimit, OrderEnforcing, PassiveEnvChecker) too.
    assert _checked(lambda: sb3_checker.check_env(gymnasium.make(gym_id(preset)), warn=True)) == []


@pytest.mark.parametrize("preset", PRESET_IDS)
def test_every_preset_is_registered(preset):
    spec = gymnasium.spec(f"plume_jax/{preset}")
    assert spec.max_episode_steps == plume_jax.PRESETS[preset]["max_steps"]
    assert spec.kwargs == {"preset": preset}
    env = gymnasium.make(f"plume_jax/{preset}")
    assert isinstance(env.unwrapped, PlumeGymEnv)
    assert env.unwrapped.env.settings["id"] == preset
    assert env.spec.max_episode_steps == spec.max_episode_steps


def test_presets_added_later_are_registered_on_request(monkeypatch):
    monkeypatch.setitem(plume_jax.PRESETS, "PlumeNav-TestOnly-v9",
                        {**plume_jax.PRESETS["PlumeNav-Gaussian-v0"], "max_steps": 17})
    try:
        assert register_presets() == ["plume_jax/PlumeNav-TestOnly-v9"]
        assert register_presets() == []
        assert gymnasium.spec("plume_jax/PlumeNav-TestOnly-v9").max_episode_steps == 17
    finally:
        gymnasium.registry.pop("plume_jax/PlumeNav-TestOnly-v9", None)


def test_make_kwargs_are_overrides_validated_by_plume_jax_make():
    env = gymnasium.make("plume_jax/PlumeNav-Gaussian-v0", grid_size=[24, 20], sigma=4.0,
                         render_mode="rgb_array", render_scale=2)
    inner = env.unwrapped
    assert (inner.env.grid.width, inner.env.grid.height) == (24, 20)
    assert float(inner.params.plume.sigma) == 4.0
    env.reset(seed=0)
    assert env.render().shape == (40, 48, 3)
    with pytest.raises(ValidationError, match="sigma"):
        gymnasium.make("plume_jax/PlumeNav-Gaussian-v0", sigma=-1.0)
    with pytest.raises(ValidationError, match="no_such_setting"):
        gymnasium.make("plume_jax/PlumeNav-Gaussian-v0", no_such_setting=3)


def test_time_limit_and_env_truncate_at_the_same_step():
    env = gymnasium.make("plume_jax/PlumeNav-Gaussian-v0", grid_size=[32, 32], sigma=6.0,
                         goal_radius=2.0, max_steps=60, max_episode_steps=60)
    env.reset(seed=0, options={"start_position": (0, 0)})
    for step in range(1, 61):
        _, _, terminated, truncated, info = env.step(0)
        assert truncated == (step == 60) and not terminated
    assert env.unwrapped.lifecycle_state.name == "TRUNCATED"


def test_make_vec_uses_the_vector_entry_point():
    venv = gymnasium.make_vec("plume_jax/PlumeNav-Gaussian-v0", num_envs=3,
                              grid_size=[32, 32], sigma=6.0, goal_radius=2.0,
                              max_episode_steps=7)
    assert isinstance(venv, PlumeVectorEnv) and venv.num_envs == 3
    assert int(venv.params.max_steps) == 7  # the smaller of max_steps and max_episode_steps
    obs, _ = venv.reset(seed=0)
    assert obs.shape == (3, 1)
    noop = np.full(3, venv.action_ids["noop"])  # noop never reaches the goal
    truncations = [venv.step(noop)[3] for _ in range(7)]
    assert not np.any(truncations[:6]) and np.all(truncations[6])

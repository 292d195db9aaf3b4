"""PlumeVectorEnv: batched spaces, same-step autoreset, seeding that matches
PlumeGymEnv, validation and lifecycle errors, rendering."""

from __future__ import annotations

import gymnasium
import jax.numpy as jnp
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import plume_jax
from plume_jax.core.errors import StateError, ValidationError
from plume_jax.gym import PlumeGymEnv, PlumeVectorEnv

OVERRIDES = {"grid_size": [32, 32], "sigma": 6.0, "goal_radius": 2.0, "max_steps": 60}
N = 4


def close(actual, desired):
    np.testing.assert_allclose(actual, desired, rtol=1e-6, atol=1e-7)


@pytest.fixture(scope="module")
def core():
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", **OVERRIDES)
    # Short episodes (a params value, no recompilation), so autoresets happen.
    return env, params.replace(max_steps=jnp.asarray(6, jnp.int32))


@pytest.fixture
def venv(core):
    return PlumeVectorEnv(*core, num_envs=N)


def test_spaces_are_batched(venv):
    assert venv.single_action_space == gymnasium.spaces.Discrete(5)
    assert venv.action_space == gymnasium.spaces.MultiDiscrete([5] * N)
    assert venv.single_observation_space.shape == (1,)
    assert venv.observation_space.shape == (N, 1)
    assert venv.observation_space.dtype == np.float32


def test_metadata_advertises_same_step_autoreset(venv):
    assert venv.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    assert venv.metadata["render_modes"] == ["rgb_array"]
    assert venv.metadata["render_fps"] > 0


def test_reset_returns_batched_obs_and_masked_info(venv):
    obs, info = venv.reset(seed=3)
    assert obs.shape == (N, 1) and obs.dtype == np.float32
    assert venv.observation_space.contains(obs)
    assert info["seed"].tolist() == [3, 4, 5, 6]
    assert info["agent_xy"].shape == (N, 2) and info["agent_xy"].dtype == np.int64
    assert info["episode_count"].tolist() == [1] * N
    for key in ("step_count", "total_reward", "goal_reached", "goal_location", "source_location"):
        assert info[f"_{key}"].all()
    assert np.all(info["goal_location"] == [15, 15])


def test_env_i_matches_a_gym_env_seeded_with_seed_plus_i(core):
    """Same key streams: env i of a batch seeded s == PlumeGymEnv reset with s + i
    and re-reset without a seed after every episode, for the same actions.
    Positions, rewards and flags agree exactly; concentrations to float32
    rounding (vmapped and single programs may fuse differently)."""
    venv = PlumeVectorEnv(*core, num_envs=N)
    singles = [PlumeGymEnv(*core) for _ in range(N)]
    obs, info = venv.reset(seed=10)
    for i, genv in enumerate(singles):
        o, inf = genv.reset(seed=10 + i)
        close(obs[i], o)
        assert tuple(info["agent_xy"][i]) == inf["agent_xy"]
    rng = np.random.default_rng(0)
    ended = 0
    for _ in range(20):
        actions = rng.integers(0, 5, N)
        obs, rew, term, trunc, info = venv.step(actions)
        for i, genv in enumerate(singles):
            o, r, te, tr, inf = genv.step(int(actions[i]))
            assert (rew[i], term[i], trunc[i]) == (r, te, tr)
            if te or tr:
                ended += 1
                close(info["final_obs"][i], o)
                final = info["final_info"]
                assert final["_step_count"][i]
                assert (final["step_count"][i], final["total_reward"][i]) == \
                    (inf["step_count"], inf["total_reward"])
                assert tuple(final["agent_xy"][i]) == inf["agent_xy"]
                o, inf = genv.reset()
                assert info["step_count"][i] == 0
            close(obs[i], o)
            assert tuple(info["agent_xy"][i]) == inf["agent_xy"]
            assert info["episode_count"][i] == inf["episode_count"]
    assert ended >= N  # every env went through at least one autoreset


def test_final_obs_and_info_only_for_envs_that_ended(core):
    venv = PlumeVectorEnv(*core, num_envs=N)
    venv.reset(seed=0)
    noop = np.zeros(N, np.int64)
    for _ in range(5):
        info = venv.step(noop)[4]
        assert "final_obs" not in info and "final_info" not in info
    obs, rew, term, trunc, info = venv.step(noop)
    assert trunc.all() and not term.any()
    assert info["_final_obs"].all() and info["_final_info"].all()
    assert info["final_obs"].dtype == object and info["final_obs"][0].shape == (1,)
    assert info["final_info"]["step_count"].tolist() == [6] * N
    assert info["step_count"].tolist() == [0] * N  # the fresh episodes
    assert info["episode_count"].tolist() == [2] * N


def test_step_returns_numpy_types(venv):
    venv.reset(seed=0)
    obs, rew, term, trunc, info = venv.step(venv.action_space.sample())
    assert isinstance(obs, np.ndarray) and obs.shape == (N, 1)
    assert rew.dtype == np.float64 and rew.shape == (N,)
    assert term.dtype == bool and trunc.dtype == bool
    assert set(info) >= {"step_count", "episode_count", "total_reward", "goal_reached",
                         "agent_xy", "distance_to_goal", "_distance_to_goal"}


def test_seed_list_with_none_continues_those_streams(core):
    a, b = PlumeVectorEnv(*core, num_envs=2), PlumeVectorEnv(*core, num_envs=2)
    a.reset(seed=[5, 6])
    b.reset(seed=[5, 6])
    obs_a, info_a = a.reset(seed=[None, 9])
    obs_b, info_b = b.reset(seed=[None, 9])
    np.testing.assert_array_equal(obs_a, obs_b)
    assert info_a["seed"].tolist() == [None, 9]
    assert info_a["episode_count"].tolist() == [2, 1]
    single = PlumeGymEnv(*core)
    single.reset(seed=5)
    assert tuple(info_a["agent_xy"][0]) == single.reset()[1]["agent_xy"]


def test_invalid_actions_raise_and_change_nothing(core):
    tried, clean = PlumeVectorEnv(*core, num_envs=N), PlumeVectorEnv(*core, num_envs=N)
    tried.reset(seed=1)
    clean.reset(seed=1)
    state = tried.env_state
    for bad in (np.array([0, 1, 5, 2]), np.array([0, -1, 2, 3]), np.zeros(N + 1, np.int64),
                np.full(N, 1.0), np.array([0, 1, 2, 2**40]), "north"):
        with pytest.raises(ValidationError, match="actions"):
            tried.step(bad)
        assert tried.env_state is state
    for _ in range(3):
        got, want = tried.step(np.ones(N, np.int64)), clean.step(np.ones(N, np.int64))
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def test_lifecycle_errors(core):
    venv = PlumeVectorEnv(*core, num_envs=2)
    with pytest.raises(StateError, match="before reset"):
        venv.step(np.zeros(2, np.int64))
    venv.reset(seed=0)
    venv.close()
    venv.close()  # idempotent
    with pytest.raises(StateError, match="closed"):
        venv.step(np.zeros(2, np.int64))
    with pytest.raises(StateError, match="closed"):
        venv.reset(seed=0)


def test_reset_options_and_bad_seeds_are_refused(venv):
    with pytest.raises(ValidationError, match="options"):
        venv.reset(seed=0, options={"start_position": (0, 0)})
    for seed in (-1, [1, 2], "3", 1.5):
        with pytest.raises(ValidationError, match="seed"):
            venv.reset(seed=seed)


def test_render_returns_one_frame_per_env_without_changing_the_run(core):
    drawn = PlumeVectorEnv(*core, num_envs=N, render_mode="rgb_array", render_scale=2)
    plain = PlumeVectorEnv(*core, num_envs=N)
    drawn.reset(seed=2)
    plain.reset(seed=2)
    rng = np.random.default_rng(1)
    for _ in range(8):
        frames = drawn.render()
        actions = rng.integers(0, 5, N)
        got, want = drawn.step(actions), plain.step(actions)
        np.testing.assert_array_equal(got[0], want[0])
    assert isinstance(frames, tuple) and len(frames) == N
    assert all(f.shape == (64, 64, 3) and f.dtype == np.uint8 for f in frames)
    with pytest.warns(UserWarning, match="without a render mode"):
        assert plain.render() is None

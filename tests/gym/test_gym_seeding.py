"""Seeding, determinism, info types and rendering of PlumeGymEnv."""

from __future__ import annotations

import sys

import jax
import numpy as np
import pytest

import plume_jax
from plume_jax.core.errors import ValidationError
from plume_jax.gym import PlumeGymEnv
from plume_jax.gym import _common as common
from plume_jax.gym import viewer

OVERRIDES = {"grid_size": [32, 32], "sigma": 6.0, "goal_radius": 2.0, "max_steps": 60}
ACTIONS = [1, 3, 3, 2, 4, 0, 1, 1, 3, 2, 2, 4, 1, 3, 0, 4, 4, 2, 1, 3]
RESET_KEYS = {"step_count", "episode_count", "total_reward", "goal_reached", "agent_xy", "seed",
              "goal_location", "source_location"}
STEP_KEYS = {"step_count", "episode_count", "total_reward", "goal_reached", "agent_xy",
             "distance_to_goal"}


@pytest.fixture(scope="module")
def core():
    return plume_jax.make("PlumeNav-Gaussian-v0", **OVERRIDES)


def run(genv, seed, actions, render=False):
    """Observations, rewards, flags and infos of a seeded episode (resetting
    without a seed whenever an episode ends)."""
    obs, info = genv.reset(seed=seed)
    out = [(obs, info)]
    for a in actions:
        if render:
            genv.render("rgb_array")
        step = genv.step(a)
        out.append(step)
        if step[2] or step[3]:
            out.append(genv.reset())
    return out


def assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x[0], y[0])
        assert x[1:] == y[1:]


# ----------------------------------------------------------------- seeding
def test_same_seed_same_trajectory_across_instances(core):
    assert_same(run(PlumeGymEnv(*core), 11, ACTIONS), run(PlumeGymEnv(*core), 11, ACTIONS))


def test_reseeding_one_instance_repeats_the_trajectory(core):
    genv = PlumeGymEnv(*core)
    first = run(genv, 4, ACTIONS)
    run(genv, 99, ACTIONS[:5])
    assert_same(run(genv, 4, ACTIONS), first)


def test_different_seeds_give_different_starts(core):
    starts = {PlumeGymEnv(*core).reset(seed=s)[1]["agent_xy"] for s in range(8)}
    assert len(starts) > 1


def test_seed_maps_to_jax_random_key(core):
    env, params = core
    genv = PlumeGymEnv(env, params)
    obs, info = genv.reset(seed=21)
    key, sub = jax.random.split(jax.random.key(21))
    want_obs, state = jax.jit(env.reset_env)(sub, params)
    np.testing.assert_array_equal(obs, np.asarray(want_obs))
    assert info["agent_xy"] == tuple(int(v) for v in np.asarray(state.agent.position))
    obs, *_ = genv.step(3)
    key, sub = jax.random.split(key)
    want_obs, *_ = jax.jit(env.step_env)(sub, state, 3, params)
    np.testing.assert_array_equal(obs, np.asarray(want_obs))


def test_seedless_reset_continues_a_reproducible_stream(core):
    a, b = PlumeGymEnv(*core), PlumeGymEnv(*core)
    starts_a = [a.reset(seed=8)[1]["agent_xy"]] + [a.reset()[1]["agent_xy"] for _ in range(4)]
    starts_b = [b.reset(seed=8)[1]["agent_xy"]] + [b.reset()[1]["agent_xy"] for _ in range(4)]
    assert starts_a == starts_b
    assert len(set(starts_a)) > 1  # the stream moves on: not the seeded start again and again


def test_first_reset_without_seed_reports_a_seed_that_reproduces_it(core):
    genv = PlumeGymEnv(*core)
    obs, info = genv.reset()
    assert isinstance(info["seed"], int)
    obs2, info2 = PlumeGymEnv(*core).reset(seed=info["seed"])
    np.testing.assert_array_equal(obs, obs2)
    assert {**info, "seed": None} == {**info2, "seed": None}


def test_seed_reported_only_when_given(core):
    genv = PlumeGymEnv(*core)
    assert genv.reset(seed=3)[1]["seed"] == 3
    assert genv.reset()[1]["seed"] is None


def test_episode_count_counts_episodes_of_the_stream(core):
    genv = PlumeGymEnv(*core)
    assert genv.reset(seed=1)[1]["episode_count"] == 1
    assert genv.reset()[1]["episode_count"] == 2
    assert genv.step(0)[4]["episode_count"] == 2
    assert genv.reset()[1]["episode_count"] == 3
    assert genv.reset(seed=1)[1]["episode_count"] == 1


def test_np_random_follows_the_seed(core):
    genv = PlumeGymEnv(*core)
    genv.reset(seed=5)
    a = genv.np_random.integers(1 << 30)
    genv.reset(seed=5)
    assert genv.np_random.integers(1 << 30) == a


# -------------------------------------------------------------------- info
def test_info_keys_and_python_types(core):
    genv = PlumeGymEnv(*core)
    obs, info = genv.reset(seed=2)
    assert set(info) == RESET_KEYS
    assert type(info["step_count"]) is int and type(info["episode_count"]) is int
    assert type(info["total_reward"]) is float and type(info["goal_reached"]) is bool
    assert type(info["seed"]) is int
    for name in ("agent_xy", "goal_location", "source_location"):
        assert type(info[name]) is tuple and [type(v) for v in info[name]] == [int, int]
    assert info["goal_location"] == info["source_location"] == (15, 15)
    obs, reward, terminated, truncated, info = genv.step(1)
    assert set(info) == STEP_KEYS
    assert type(info["distance_to_goal"]) is float and type(info["total_reward"]) is float
    assert [type(v) for v in info["agent_xy"]] == [int, int]
    assert type(reward) is float and type(terminated) is bool and type(truncated) is bool
    assert type(obs) is np.ndarray and obs.dtype == np.float32 and obs.flags.writeable
    gx, gy = info["agent_xy"]
    assert info["distance_to_goal"] == pytest.approx(np.hypot(gx - 15, gy - 15), rel=1e-6)


def test_total_reward_accumulates_and_may_be_negative():
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", **OVERRIDES, reward="step_penalty")
    genv = PlumeGymEnv(env, params)
    genv.reset(seed=0, options={"start_position": (0, 0)})
    rewards = [genv.step(1)[1] for _ in range(4)]
    info = genv.step(1)[4]
    assert rewards == [pytest.approx(-0.01)] * 4
    assert info["total_reward"] == pytest.approx(-0.05, rel=1e-5)


def test_agent_xy_is_float_for_continuous_positions():
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", **OVERRIDES, actions="continuous")
    genv = PlumeGymEnv(env, params)
    _, info = genv.reset(seed=0, options={"start_position": (3.5, 4.25)})
    assert info["agent_xy"] == (3.5, 4.25)
    action = genv.action_space.sample()
    assert [type(v) for v in genv.step(action)[4]["agent_xy"]] == [float, float]


def test_agent_xy_is_int_for_other_on_grid_action_models():
    env, params = plume_jax.make("PlumeNav-GaussianOriented-v0", grid_size=[32, 32], sigma=6.0)
    assert env.actions.on_grid
    genv = PlumeGymEnv(env, params)
    _, info = genv.reset(seed=0)
    assert [type(v) for v in info["agent_xy"]] == [int, int]
    assert [type(v) for v in genv.step(genv.action_ids["forward"])[4]["agent_xy"]] == [int, int]
    with pytest.raises(ValidationError, match="integer cell"):
        genv.reset(options={"start_position": (1.5, 2.0)})


def test_action_names_and_ids(core):
    env, _ = core
    genv = PlumeGymEnv(*core)
    assert genv.action_names == env.action_names
    assert genv.action_ids == env.action_ids
    assert genv.action_names[:5] == ["noop", "move_north", "move_south", "move_east", "move_west"]
    assert all(genv.action_names[i] == n for n, i in genv.action_ids.items())


# ------------------------------------------------------------ start option
def test_start_position_option(core):
    genv = PlumeGymEnv(*core)
    obs, info = genv.reset(seed=0, options={"start_position": (2, 30)})
    assert info["agent_xy"] == (2, 30)
    env, params = core
    conc = float(np.exp(-((2 - 15) ** 2 + (30 - 15) ** 2) / (2 * 6.0**2)))
    assert obs[0] == pytest.approx(conc, rel=1e-5)
    assert genv.step(genv.action_ids["move_east"])[4]["agent_xy"] == (3, 30)


def test_start_option_keeps_the_key_stream_and_drawn_heading(core):
    plain, placed = PlumeGymEnv(*core), PlumeGymEnv(*core)
    plain.reset(seed=6)
    placed.reset(seed=6, options={"start_position": (0, 0)})
    assert float(placed.env_state.agent.heading) == float(plain.env_state.agent.heading)
    # Same subkeys afterwards: the next seedless resets coincide.
    assert plain.reset()[1] == placed.reset()[1]


def test_start_heading_option(core):
    genv = PlumeGymEnv(*core)
    genv.reset(seed=0, options={"start_position": (0, 0), "start_heading": 1.25})
    assert float(genv.env_state.agent.heading) == pytest.approx(1.25)


# --------------------------------------------------------------- rendering
def test_rgb_array_shape_and_dtype(core):
    genv = PlumeGymEnv(*core, render_mode="rgb_array", render_scale=3)
    genv.reset(seed=0)
    frame = genv.render()
    assert isinstance(frame, np.ndarray) and frame.dtype == np.uint8
    assert frame.shape == (32 * 3, 32 * 3, 3)
    assert genv.render("rgb_array").shape == frame.shape  # explicit mode, as in the contract


def test_rendering_does_not_change_the_trajectory(core):
    plain = run(PlumeGymEnv(*core), 13, ACTIONS)
    drawn = run(PlumeGymEnv(*core, render_mode="rgb_array"), 13, ACTIONS, render=True)
    assert_same(plain, drawn)


def test_render_is_deterministic_and_shows_the_trail(core):
    a, b = PlumeGymEnv(*core, render_mode="rgb_array"), PlumeGymEnv(*core, render_mode="rgb_array")
    for genv in (a, b):
        genv.reset(seed=0, options={"start_position": (2, 2)})
        for _ in range(4):
            genv.step(genv.action_ids["move_north"])
    np.testing.assert_array_equal(a.render(), b.render())
    np.testing.assert_array_equal(a.trail, [[2, 2], [2, 3], [2, 4], [2, 5], [2, 6]])
    no_trail = PlumeGymEnv(*core, render_mode="rgb_array", trail_length=0)
    no_trail.reset(seed=0, options={"start_position": (2, 2)})
    for _ in range(4):
        no_trail.step(no_trail.action_ids["move_north"])
    assert no_trail.trail.shape == (0, 2)
    assert not np.array_equal(a.render(), no_trail.render())


def test_trail_keeps_only_the_most_recent_positions(core):
    genv = PlumeGymEnv(*core, trail_length=3)
    genv.reset(seed=0, options={"start_position": (2, 2)})
    for _ in range(4):
        genv.step(genv.action_ids["move_east"])
    np.testing.assert_array_equal(genv.trail, [[4, 2], [5, 2], [6, 2]])


def test_metadata(core):
    genv = PlumeGymEnv(*core)
    assert genv.metadata["render_modes"] == ["rgb_array", "human"]
    assert genv.metadata["render_fps"] > 0


def test_human_mode_without_display_is_a_silent_no_op(core, monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.setattr(viewer.sys, "platform", "linux")
    genv = PlumeGymEnv(*core, render_mode="human")
    genv.reset(seed=0)
    genv.step(1)
    assert genv.render() is None
    assert genv._viewer is not None and not genv._viewer.usable
    genv.close()


def test_human_mode_with_a_non_interactive_backend_is_a_silent_no_op(core, monkeypatch):
    pytest.importorskip("matplotlib")
    import matplotlib

    monkeypatch.setenv("DISPLAY", ":99")
    monkeypatch.setattr(matplotlib, "get_backend", lambda: "agg")
    genv = PlumeGymEnv(*core, render_mode="human")
    genv.reset(seed=0)
    assert genv.render() is None and genv.render("human") is None
    assert not genv._viewer.usable
    genv.close()


def test_human_viewer_draws_frames_when_a_window_can_be_shown(monkeypatch):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("agg")
    import matplotlib.pyplot as plt

    monkeypatch.setattr(viewer, "display_available", lambda: True)
    monkeypatch.setattr(viewer, "_interactive_backend", lambda mpl: True)
    monkeypatch.setattr(plt, "pause", lambda interval: None)
    shown = viewer.HumanViewer(fps=10)
    first = np.zeros((8, 8, 3), np.uint8)
    second = np.full((8, 8, 3), 200, np.uint8)
    assert shown.show(first) is None
    np.testing.assert_array_equal(shown._image.get_array(), first)
    shown.show(second)
    np.testing.assert_array_equal(shown._image.get_array(), second)
    shown.close()
    shown.close()
    assert shown._figure is None


def test_render_without_mode_returns_none(core):
    genv = PlumeGymEnv(*core)
    genv.reset(seed=0)
    with pytest.warns(UserWarning, match="without a render mode"):
        assert genv.render() is None


# ------------------------------------------------------------- compilation
def test_instances_over_equal_envs_share_compiled_functions(core):
    env, params = core
    first = PlumeGymEnv(env, params, render_mode="rgb_array")
    first.reset(seed=0)
    first.step(1)
    first.render()
    compiled = (common.compiled_reset.compiled, common.compiled_step.compiled,
                common.compiled_render)
    sizes = tuple(fn._cache_size() for fn in compiled)
    rebuilt, _ = plume_jax.make("PlumeNav-Gaussian-v0", **OVERRIDES)  # equal, not identical
    other = PlumeGymEnv(rebuilt, params.replace(goal_radius=params.goal_radius + 0.5),
                        render_mode="rgb_array")
    other.reset(seed=1)
    other.step(2)
    other.render()
    assert tuple(fn._cache_size() for fn in compiled) == sizes


def test_import_plume_jax_does_not_import_torch_or_sb3():
    import subprocess

    code = ("import sys, plume_jax, gymnasium; gymnasium.spec('plume_jax/PlumeNav-Gaussian-v0'); "
            "print(sorted(m for m in ('torch', 'stable_baselines3') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

"""Gymnasium and SB3 conventions of the batch adapters (issue 14) and their
reset-only-what-ended path (issue 18): ``is_success``, both autoreset modes
against Gymnasium's ``SyncVectorEnv`` over ``PlumeGymEnv``, and the new
reset path against the speculative reference."""

from __future__ import annotations

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import plume_jax
from plume_jax import ValidationError
from plume_jax.gym import PlumeGymEnv, PlumeVectorEnv
from plume_jax.gym.batch import BatchCore
from tests.same_results import assert_same_up_to_rounding

OVERRIDES = {"grid_size": [16, 16], "sigma": 4.0, "goal_radius": 1.5, "max_steps": 60}
N = 4
COMMON_INFO = ("step_count", "episode_count", "total_reward", "goal_reached", "agent_xy")


@pytest.fixture(scope="module")
def core():
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", **OVERRIDES)
    # short episodes (a params value, no recompilation): resets happen often
    return env, params.replace(max_steps=jnp.asarray(5, jnp.int32))


def _towards_goal(xy, ids, goal=(7, 7)):
    """Actions that walk each agent straight to the goal (x first)."""
    dx, dy = np.sign(np.asarray(goal) - np.asarray(xy)).T
    return np.where(dx > 0, ids["move_east"], np.where(
        dx < 0, ids["move_west"], np.where(dy > 0, ids["move_north"], ids["move_south"])))


# ----------------------------------------------------------------- is_success
def test_gym_env_reports_is_success_on_the_step_that_ends_an_episode():
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", **OVERRIDES)
    genv = PlumeGymEnv(env, params)
    _, info = genv.reset(seed=0, options={"start_position": (3, 7)})
    infos = [genv.step(genv.action_ids["move_east"])[4] for _ in range(3)]
    assert ["is_success" in i for i in infos] == [False, False, True]
    assert infos[-1]["is_success"] is True
    truncated = PlumeGymEnv(env, params.replace(max_steps=jnp.asarray(2, jnp.int32)))
    truncated.reset(seed=0, options={"start_position": (0, 0)})
    assert "is_success" not in truncated.step(0)[4]
    assert truncated.step(0)[4]["is_success"] is False


def test_sb3_monitor_and_success_buffer_read_is_success():
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.monitor import Monitor

    env, params = plume_jax.make("PlumeNav-Gaussian-v0", **OVERRIDES)
    monitored = Monitor(PlumeGymEnv(env, params))
    monitored.reset(seed=0, options={"start_position": (4, 7)})
    east = env.action_ids["move_east"]
    for _ in range(2):
        _, _, terminated, _, info = monitored.step(east)
    assert terminated and info["is_success"] is True and info["episode"]["l"] == 2


@pytest.mark.parametrize("mode", ["SameStep", "NextStep"])
def test_vector_env_reports_is_success_where_sync_vector_env_does(core, mode):
    venv = PlumeVectorEnv(*core, num_envs=N, autoreset_mode=mode)
    _, info = venv.reset(seed=0)
    xy = info["agent_xy"]
    for _ in range(8):
        _, _, terminated, truncated, info = venv.step(_towards_goal(xy, venv.action_ids))
        done = terminated | truncated
        if done.any():
            break
        xy = info["agent_xy"]
    assert done.any()
    where = info["final_info"] if mode == "SameStep" else info
    np.testing.assert_array_equal(where["_is_success"], done)
    np.testing.assert_array_equal(where["is_success"][done], terminated[done])


# ------------------------------------------------------ against SyncVectorEnv
def _rows(values):
    """A vector info entry as a float array with one row per env (Gymnasium
    stores tuples such as ``agent_xy`` as an object array of tuples)."""
    return np.asarray([np.asarray(v, np.float64).ravel() for v in values])


@pytest.mark.parametrize("mode", [AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP])
def test_autoreset_modes_follow_sync_vector_env_over_gym_envs(core, mode):
    """Same key streams and the same autoreset rule: observations, rewards,
    flags, final observations and the shared info keys agree; on a static
    plume an auto-reset equals PlumeGymEnv's seedless reset."""
    ours = PlumeVectorEnv(*core, num_envs=N, autoreset_mode=mode)
    sync = SyncVectorEnv([lambda: PlumeGymEnv(*core) for _ in range(N)], autoreset_mode=mode)
    assert ours.metadata["autoreset_mode"] is mode is sync.metadata["autoreset_mode"]
    obs, info = ours.reset(seed=10)
    s_obs, s_info = sync.reset(seed=10)
    np.testing.assert_allclose(obs, s_obs, rtol=1e-6)
    rng = np.random.default_rng(0)
    ended = 0
    for _ in range(24):
        actions = rng.integers(0, 5, N)
        got, want = ours.step(actions), sync.step(actions)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-7)
        for a, b in zip(got[1:4], want[1:4]):
            np.testing.assert_array_equal(a, b)
        info, s_info = got[4], want[4]
        for key in COMMON_INFO:
            mask = s_info[f"_{key}"]
            np.testing.assert_array_equal(_rows(info[key])[mask], _rows(s_info[key])[mask],
                                          err_msg=key)
        if mode is AutoresetMode.SAME_STEP and "final_obs" in s_info:
            np.testing.assert_array_equal(info["_final_obs"], s_info["_final_obs"])
            for i in np.flatnonzero(s_info["_final_obs"]):
                np.testing.assert_allclose(info["final_obs"][i], s_info["final_obs"][i],
                                           rtol=1e-6)
                final, s_final = info["final_info"], s_info["final_info"]
                for key in (*COMMON_INFO, "is_success"):
                    np.testing.assert_array_equal(_rows(final[key])[i], _rows(s_final[key])[i],
                                                  err_msg=key)
        if mode is AutoresetMode.NEXT_STEP and "is_success" in s_info:
            np.testing.assert_array_equal(info["_is_success"], s_info["_is_success"])
            mask = s_info["_is_success"]
            np.testing.assert_array_equal(info["is_success"][mask], s_info["is_success"][mask])
        ended += int((got[2] | got[3]).sum())
    assert ended >= 2 * N  # several auto-resets per env


def _episodes(venv, calls):
    """Per env, the (action, reward, terminated, truncated, agent_xy) of each
    step taken, actions chosen from the env index and the episode's step
    count (so both modes feed every episode the same actions); steps where
    next-step mode resets an env are left out."""
    _, info = venv.reset(seed=3)
    count = info["step_count"]
    pending = np.zeros(venv.num_envs, bool)
    steps = [[] for _ in range(venv.num_envs)]
    for _ in range(calls):
        actions = (np.arange(venv.num_envs) + 3 * count) % 5
        _, reward, terminated, truncated, info = venv.step(actions)
        done = terminated | truncated
        xy = info["agent_xy"].copy()
        if "final_info" in info:
            xy[done] = info["final_info"]["agent_xy"][done]
        for i in np.flatnonzero(~pending):
            steps[i].append((int(actions[i]), float(reward[i]), bool(terminated[i]),
                             bool(truncated[i]), tuple(xy[i])))
        pending = done if venv.autoreset_mode is AutoresetMode.NEXT_STEP else pending
        count = info["step_count"]
    return steps


def test_both_modes_give_each_env_the_same_episodes(core):
    """Next-step mode resets one call later, with the subkey same-step mode
    uses: each env's episodes are the same, only the reset calls are added."""
    same = _episodes(PlumeVectorEnv(*core, num_envs=N, autoreset_mode="SameStep"), 20)
    nxt = _episodes(PlumeVectorEnv(*core, num_envs=N, autoreset_mode="NextStep"), 40)
    for i in range(N):
        assert sum(s[2] or s[3] for s in same[i]) >= 3  # several episodes each
        assert nxt[i][:len(same[i])] == same[i]


def test_make_vec_passes_autoreset_mode_and_refuses_unknown_modes():
    venv = gymnasium.make_vec("plume_jax/PlumeNav-Gaussian-v0", num_envs=2,
                              autoreset_mode=AutoresetMode.NEXT_STEP, **OVERRIDES)
    assert venv.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    assert venv.autoreset_mode is AutoresetMode.NEXT_STEP
    venv = gymnasium.make_vec("plume_jax/PlumeNav-Gaussian-v0", num_envs=2,
                              autoreset_mode="SameStep", **OVERRIDES)
    assert venv.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    assert PlumeVectorEnv.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP  # class untouched
    for bad in ("Disabled", AutoresetMode.DISABLED, "sometimes", 3):
        with pytest.raises(ValidationError, match="autoreset_mode"):
            gymnasium.make_vec("plume_jax/PlumeNav-Gaussian-v0", num_envs=2, autoreset_mode=bad,
                               **OVERRIDES)


# ------------------------------------- the reset-only-what-ended path (18)
def _scan_core(batch: BatchCore, steps: int, speculative: bool):
    """Step ``batch`` ``steps`` times with random actions through its compiled
    call; every output of every step (keys and states included)."""
    rng = np.random.default_rng(5)
    batch.reset([100 + i for i in range(batch.num_envs)])
    outputs = []
    for _ in range(steps):
        actions = jnp.asarray(rng.integers(0, 5, batch.num_envs), jnp.int32)
        out = batch.compiled_step(actions, speculative=speculative)
        outputs.append(out)
        batch.keys, batch.state = out.keys, out.state
        batch._pending = np.asarray(out.done)
    return outputs


# a large goal disk / a small grid: episodes end at staggered steps (the
# Gaussian: the module's env, its params changed, so the 16-env steps compiled
# here serve test_sb3_adapter_takes_the_reset_only_ended_path too)
GAUSSIAN_STAGGERED = ("PlumeNav-Gaussian-v0", OVERRIDES, {"goal_radius": 3.0, "max_steps": 10})
POISSON_STAGGERED = ("PlumeNav-Poisson-v0", {"grid_size": [5, 5], "max_steps": 8}, {})


@pytest.mark.parametrize("mode,preset,overrides,param_values", [
    (AutoresetMode.SAME_STEP, *GAUSSIAN_STAGGERED),
    (AutoresetMode.NEXT_STEP, *GAUSSIAN_STAGGERED),
    (AutoresetMode.SAME_STEP, *POISSON_STAGGERED),
    pytest.param(AutoresetMode.NEXT_STEP, *POISSON_STAGGERED, marks=pytest.mark.slow),
])
def test_reset_only_ended_returns_what_resetting_every_env_returns(mode, preset, overrides,
                                                                    param_values):
    """Keys, states, counts and flags exactly, floats to rounding, through
    both branches of the gather (a few envs ended; more than max_resets)."""
    env, params = plume_jax.make(preset, **overrides)
    params = params.replace(**{name: jnp.asarray(value, getattr(params, name).dtype)
                               for name, value in param_values.items()})
    num_envs = 16  # max_resets 1: one ended env takes the gather branch
    got = _scan_core(BatchCore(env, params, num_envs, autoreset_mode=mode), 40, False)
    want = _scan_core(BatchCore(env, params, num_envs, autoreset_mode=mode), 40, True)
    assert_same_up_to_rounding(got, want)
    resets = np.asarray([np.asarray(o.was_reset).sum() for o in want])
    assert (resets == 1).any() and (resets > 1).any()


def test_sb3_adapter_takes_the_reset_only_ended_path(core):
    pytest.importorskip("stable_baselines3")
    from plume_jax.gym.sb3 import PlumeSB3VecEnv

    adapter = PlumeSB3VecEnv(*core, num_envs=16, seed=0)
    adapter.reset()
    assert adapter._core.max_resets == 1 and adapter._core.autoreset_mode is \
        AutoresetMode.SAME_STEP
    reference = BatchCore(*core, 16)
    reference.reset(list(range(16)))
    rng = np.random.default_rng(2)
    for _ in range(12):
        actions = rng.integers(0, 5, 16)
        obs, rewards, dones, infos = adapter.step(actions)
        out = reference.compiled_step(jnp.asarray(actions, jnp.int32), speculative=True)
        reference.keys, reference.state = out.keys, out.state
        np.testing.assert_allclose(obs, np.asarray(out.obs), rtol=1e-6)
        np.testing.assert_array_equal(dones, np.asarray(out.done))
        np.testing.assert_array_equal(jax.random.key_data(adapter._core.keys),
                                      jax.random.key_data(out.keys))


def test_host_results_round_trip_through_two_buffers():
    """What the compiled calls pack for the host comes back with its own
    shapes, dtypes and values (floats, ints, bools; scalars and arrays)."""
    from plume_jax.gym._common import HostLayout, pack_for_host

    tree = {"obs": jnp.arange(6.0).reshape(2, 3), "flag": jnp.asarray([True, False]),
            "count": jnp.asarray(7, jnp.int32), "reward": jnp.asarray(-0.5, jnp.float32),
            "none": None}
    floats, ints = jax.jit(pack_for_host)(tree)
    assert floats.shape == (7,) and ints.shape == (3,)
    back = HostLayout.of(jax.eval_shape(lambda: tree)).unpack(np.asarray(floats),
                                                              np.asarray(ints))
    assert back["none"] is None
    for key in ("obs", "flag", "count", "reward"):
        assert back[key].dtype == np.asarray(tree[key]).dtype
        np.testing.assert_array_equal(back[key], np.asarray(tree[key]))
    back["obs"][0, 0] = 99.0  # writable, its own copy
    assert floats[0] == 0.0

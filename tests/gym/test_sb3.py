"""PlumeSB3VecEnv: SB3's VecEnv conventions, agreement with DummyVecEnv over
PlumeGymEnv, and PPO learning through it."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

import jax.numpy as jnp  # noqa: E402
from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.monitor import Monitor  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv, VecMonitor  # noqa: E402

import plume_jax  # noqa: E402
from plume_jax.core.errors import StateError, ValidationError  # noqa: E402
from plume_jax.gym import PlumeGymEnv  # noqa: E402
from plume_jax.gym.sb3 import PlumeSB3VecEnv  # noqa: E402

OVERRIDES = {"grid_size": [32, 32], "sigma": 6.0, "goal_radius": 2.0, "max_steps": 60}
N = 4


@pytest.fixture(scope="module")
def core():
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", **OVERRIDES)
    return env, params.replace(max_steps=jnp.asarray(6, jnp.int32))


def test_lazy_attribute_of_plume_jax_gym_is_this_class():
    import plume_jax.gym

    assert plume_jax.gym.PlumeSB3VecEnv is PlumeSB3VecEnv
    assert issubclass(PlumeSB3VecEnv, VecEnv)


def test_spaces_and_attributes(core):
    venv = PlumeSB3VecEnv(*core, num_envs=N)
    assert venv.num_envs == N
    assert venv.observation_space.shape == (1,) and venv.action_space.n == 5
    assert venv.get_attr("render_mode") == [None] * N
    assert venv.get_attr("action_names", indices=[0, 2]) == [venv.action_names] * 2
    assert venv.env_is_wrapped(Monitor) == [False] * N
    with pytest.raises(AttributeError):
        venv.set_attr("render_mode", "rgb_array")
    with pytest.raises(AttributeError):
        venv.env_method("reset")


def test_terminal_observation_and_time_limit_truncated(core):
    venv = PlumeSB3VecEnv(*core, num_envs=N, seed=0)
    obs = venv.reset()
    assert obs.shape == (N, 1) and obs.dtype == np.float32
    noop = np.zeros(N, np.int64)
    for _ in range(5):
        obs, rewards, dones, infos = venv.step(noop)
        assert not dones.any() and infos == [{}] * N
    last = obs
    obs, rewards, dones, infos = venv.step(noop)
    assert dones.all() and rewards.dtype == np.float32
    for i, info in enumerate(infos):
        assert info["TimeLimit.truncated"] is True and info["is_success"] is False
        np.testing.assert_array_equal(info["terminal_observation"], last[i])  # noop: same cell
        assert info["episode"]["l"] == 6 and info["episode"]["r"] == 0.0
    assert not np.array_equal(obs, last)  # already the next episodes' first observations


def test_goal_termination_is_not_a_time_limit(core):
    env, params = core
    venv = PlumeSB3VecEnv(env, params.replace(max_steps=jnp.asarray(60, jnp.int32)), num_envs=N,
                          seed=0)
    venv.reset()
    xy = np.array([info["agent_xy"] for info in venv.reset_infos])
    ids = venv.action_ids
    moves = {ids["move_north"]: (0, 1), ids["move_south"]: (0, -1), ids["move_east"]: (1, 0),
             ids["move_west"]: (-1, 0)}
    ended = np.zeros(N, bool)
    for _ in range(60):  # walk straight to the source at (15, 15)
        dx, dy = np.sign(15 - xy).T
        actions = np.where(dx > 0, ids["move_east"], np.where(
            dx < 0, ids["move_west"], np.where(dy > 0, ids["move_north"], ids["move_south"])))
        _, rewards, dones, infos = venv.step(actions)
        xy = xy + np.array([moves[a] for a in actions])
        for i in np.flatnonzero(dones & ~ended):
            assert rewards[i] == 1.0 and infos[i]["is_success"] is True
            assert infos[i]["TimeLimit.truncated"] is False
        ended |= dones
        if ended.all():
            break
    assert ended.all()


def test_seed_and_reset_are_reproducible(core):
    a, b = PlumeSB3VecEnv(*core, num_envs=N), PlumeSB3VecEnv(*core, num_envs=N)
    assert a.seed(7) == [7, 8, 9, 10]
    b.seed(7)
    np.testing.assert_array_equal(a.reset(), b.reset())
    assert [i["seed"] for i in a.reset_infos] == [7, 8, 9, 10]
    assert set(a.reset_infos[0]) == {"step_count", "episode_count", "total_reward",
                                     "goal_reached", "agent_xy", "seed", "goal_location",
                                     "source_location"}
    np.testing.assert_array_equal(a.reset(), b.reset())  # streams continue identically
    assert [i["seed"] for i in a.reset_infos] == [None] * N


def test_matches_dummy_vec_env_over_gym_envs(core):
    """DummyVecEnv resets each PlumeGymEnv without a seed when its episode
    ends: the same key streams as the adapter's same-step autoreset."""
    adapter = PlumeSB3VecEnv(*core, num_envs=N)
    dummy = DummyVecEnv([lambda: PlumeGymEnv(*core) for _ in range(N)])
    adapter.seed(3)
    dummy.seed(3)
    np.testing.assert_allclose(adapter.reset(), dummy.reset(), rtol=1e-6)
    rng = np.random.default_rng(0)
    for _ in range(15):
        actions = rng.integers(0, 5, N)
        a_obs, a_rew, a_done, a_info = adapter.step(actions)
        d_obs, d_rew, d_done, d_info = dummy.step(actions)
        np.testing.assert_allclose(a_obs, d_obs, rtol=1e-6)
        np.testing.assert_array_equal(a_rew, d_rew)
        np.testing.assert_array_equal(a_done, d_done)
        for ai, di, done in zip(a_info, d_info, a_done):
            if done:
                np.testing.assert_allclose(ai["terminal_observation"], di["terminal_observation"],
                                           rtol=1e-6)
                assert ai["TimeLimit.truncated"] == di["TimeLimit.truncated"]


def test_invalid_actions_and_lifecycle(core):
    venv = PlumeSB3VecEnv(*core, num_envs=N)
    with pytest.raises(StateError, match="before reset"):
        venv.step(np.zeros(N, np.int64))
    venv.reset()
    with pytest.raises(ValidationError, match="actions"):
        venv.step(np.array([0, 9, 1, 1]))
    venv.set_options({"start_position": (0, 0)})
    with pytest.raises(ValidationError, match="options"):
        venv.reset()
    venv.close()
    with pytest.raises(StateError, match="closed"):
        venv.reset()


def test_rgb_array_images(core):
    venv = PlumeSB3VecEnv(*core, num_envs=N, render_mode="rgb_array", render_scale=1)
    venv.reset()
    images = venv.get_images()
    assert len(images) == N and images[0].shape == (32, 32, 3)
    tiled = venv.render()
    assert tiled.ndim == 3 and tiled.dtype == np.uint8 and tiled.shape[0] == 64


def _success_rate(policy, env, params, n=64, seed=1234):
    """Fraction of the first episodes of ``n`` seeded envs that reach the goal
    (64: the PPO run's num_envs, so its compiled step serves here too)."""
    venv = PlumeSB3VecEnv(env, params, num_envs=n, seed=seed)
    obs = venv.reset()
    ended = np.zeros(n, bool)
    success = np.zeros(n, bool)
    rng = np.random.default_rng(seed)
    while not ended.all():
        obs, _, dones, infos = venv.step(policy(obs, rng))
        for i in np.flatnonzero(dones & ~ended):
            success[i] = infos[i]["is_success"]
        ended |= dones
    return success.mean()


def test_ppo_learns_through_the_adapter():
    """PPO beats a uniform-random policy by a clear margin after 30k steps.

    The preset's point sensor gives a memoryless policy no direction to go
    (measured: PPO stays at random's success rate), so the agent gets a 3x3
    world-frame concentration patch instead: the task is then learnable and
    the test measures the adapter, not the observation design.
    """
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny networks: threads only contend with XLA's
    try:
        _learn_and_compare()
    finally:
        torch.set_num_threads(threads)


def _learn_and_compare():
    import torch

    torch.manual_seed(0)
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[32, 32], sigma=8.0,
                                 max_steps=60, sensor={"type": "patch", "size": 3})
    n = env.num_actions
    random_rate = _success_rate(lambda obs, rng: rng.integers(0, n, len(obs)), env, params)
    venv = VecMonitor(PlumeSB3VecEnv(env, params, num_envs=64, seed=0))
    model = PPO("MlpPolicy", venv, n_steps=64, batch_size=512, n_epochs=4, learning_rate=3e-3,
                gamma=0.98, seed=0, device="cpu", verbose=0)
    model.learn(30_000)
    learned_rate = _success_rate(lambda obs, rng: model.predict(obs, deterministic=True)[0],
                                 env, params)
    assert random_rate < 0.4
    assert learned_rate >= random_rate + 0.3, (learned_rate, random_rate)


def test_benchmark_script_writes_json_and_its_markdown_section(tmp_path):
    """scripts/bench/sb3.py on a tiny budget: data, table and section. (It
    is imported as scripts.bench.sb3, as the other benchmark tests import
    theirs: loaded from its file alone it found its neighbour harness module only
    when another test had put its folder on sys.path, so alone it failed.)"""
    import importlib
    import json

    bench = importlib.import_module("scripts.bench.sb3")
    out, md = tmp_path / "sb3.json", tmp_path / "BENCHMARKS.md"
    md.write_text("# Benchmarks\n\n<!-- core-throughput:begin -->\nkept\n<!-- core-throughput:end -->\n")
    args = ["--overrides", json.dumps(OVERRIDES), "--num-envs", str(N), "--n-steps", "8",
            "--batch-size", "16", "--n-epochs", "1", "--rollouts", "1", "--repeats", "2",
            "--collection-steps", "5", "--out", str(out), "--markdown", str(md)]
    bench.main(args)
    data = json.loads(out.read_text())
    for measure in ("ppo_learn", "collection_only"):
        for variant in ("adapter", "dummy"):
            rates = data[measure][variant]["steps_per_s"]
            assert len(rates) == 2 and all(r > 0 for r in rates)
        assert data[measure]["ratio_adapter_over_dummy"] > 0
    assert data["settings"]["num_envs"] == N and data["settings"]["ppo"]["n_steps"] == 8
    assert data["versions"]["stable-baselines3"] and data["machine"]["cpu_count"]
    bench.main(["--render-only", "--out", str(out), "--markdown", str(md)])
    text = md.read_text()
    assert text.count(bench.HEADING) == 1 and "kept" in text  # replaced, others untouched

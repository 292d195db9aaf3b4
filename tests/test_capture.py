"""Captured trajectories: ``plume-jax evaluate --capture DIR`` and
``rollout(..., capture=True)`` (plume_jax.evaluate.capture)."""

from __future__ import annotations

import hashlib
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import plume_jax
from plume_jax import ValidationError, cli
from plume_jax.evaluate import capture as cap
from plume_jax.evaluate.rollout import host_rollout, rollout

pq = pytest.importorskip("pyarrow.parquet")


def _small():
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[24, 24], sigma=5.0,
                                 max_steps=40)
    from agents import make_agent

    return env, params, make_agent("klinotaxis", env)


def test_capture_does_not_change_the_rollout_and_scan_and_while_loop_agree():
    env, params, policy = _small()
    key = jax.random.key(3)
    plain = rollout(env, params, policy, key, 8, 40, until_done=True)
    early = rollout(env, params, policy, key, 8, 40, until_done=True, capture=True)
    full = rollout(env, params, policy, key, 8, 40, capture=True)
    for name in ("success", "episode_length", "episode_return", "path_length"):
        np.testing.assert_array_equal(np.asarray(getattr(plain, name)),
                                      np.asarray(getattr(early, name)))
    assert plain.steps is None
    a = cap.steps_columns(early.steps, int(early.steps_run))
    b = cap.steps_columns(full.steps, int(full.steps_run))
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    # the rows of each episode: its length, steps 0.., only the last one ends it
    lengths = np.asarray(early.episode_length)
    assert len(a["episode"]) == lengths.sum()
    ended = a["terminated"] | a["truncated"]
    finished = np.asarray(early.finished)
    for n in range(8):
        rows = a["episode"] == n
        np.testing.assert_array_equal(a["step"][rows], np.arange(lengths[n]))
        assert ended[rows][:-1].sum() == 0 and ended[rows][-1] == finished[n]
        # consecutive rows: one step's end is the next one's start
        np.testing.assert_array_equal(a["next_x"][rows][:-1], a["x"][rows][1:])
        # the return is the sum of the rewards
        np.testing.assert_allclose(a["reward"][rows].sum(), float(early.episode_return[n]),
                                   rtol=1e-5)


def test_host_rollout_captures_the_same_transitions():
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[24, 24], sigma=5.0,
                                 max_steps=30)
    east = env.action_ids["move_east"]

    class EastPolicy:
        def init(self, key):
            return ()

        def act(self, carry, obs, key):
            return jnp.asarray(east, jnp.int32), carry

    class EastAgent:
        def reset(self):
            pass

        def act_batch(self, obs, episode_start=None):
            return np.full(len(obs), east, np.int32)

    key = jax.random.key(4)
    f = rollout(env, params, EastPolicy(), key, 4, 30, until_done=True, capture=True)
    h = host_rollout(env, params, EastAgent(), key, 4, 30, until_done=True, capture=True)
    a = cap.steps_columns(f.steps, int(f.steps_run))
    b = cap.steps_columns(h.steps, int(h.steps_run))
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    """``plume-jax evaluate --episodes 64 --capture`` on the klinotaxis scenario."""
    tmp_path = tmp_path_factory.mktemp("capture")
    out = tmp_path / "capture"
    rc = cli.main(["evaluate", "--scenario", "configs/scenarios/gaussian_klinotaxis.yaml",
                   "--episodes", "64", "--capture", str(out), "--out", str(tmp_path / "ev"),
                   "--quiet"])
    assert rc == 0
    return tmp_path


def test_evaluate_capture_writes_parquet_whose_episode_lengths_sum_to_the_steps(captured):
    tmp_path = captured
    out = tmp_path / "capture"
    meta = json.loads((out / "run.json").read_text())
    assert meta["schema"] == "plume_jax.capture"
    assert meta["schema_version"] == cap.SCHEMA_VERSION
    assert meta["plume_jax_version"] == plume_jax.__version__
    assert meta["machine"]["jax"] == jax.__version__
    (run,) = meta["runs"]
    assert run["seed"] == 0 and run["episodes"] == 64 and run["agent"]["name"] == "klinotaxis"
    assert run["scenario_config"]["name"] == "gaussian_klinotaxis"
    assert run["scenario_hash"] == cap.canonical_hash(run["scenario_config"])
    steps = pq.read_table(out / "steps.parquet")
    episodes = pq.read_table(out / "episodes.parquet")
    assert episodes.num_rows == 64
    lengths = np.asarray(episodes.column("length"))
    assert lengths.sum() == steps.num_rows == run["transitions"]
    counts = np.bincount(np.asarray(steps.column("episode")), minlength=64)
    np.testing.assert_array_equal(counts, lengths)
    # every column documented, the schema version in the files too
    assert set(steps.column_names) <= set(cap.STEP_COLUMNS)
    assert set(episodes.column_names) == set(cap.EPISODE_COLUMNS)
    assert steps.schema.metadata[b"plume_jax.capture_schema"] == cap.SCHEMA_VERSION.encode()
    for name in ("steps.parquet", "episodes.parquet"):
        digest = hashlib.sha256((out / name).read_bytes()).hexdigest()
        assert meta["files"][name]["sha256"] == digest
    # the report's success rate is the episodes table's
    report = json.loads((tmp_path / "ev" / "gaussian_klinotaxis__klinotaxis.json").read_text())
    assert report["metrics"]["success_rate"] == np.mean(np.asarray(episodes.column("success")))
    eff = episodes.column("path_efficiency").to_numpy(zero_copy_only=False)
    np.testing.assert_allclose(np.nanmean(eff.astype(float)),
                               report["metrics"]["path_efficiency"], rtol=1e-5)


def test_a_capture_too_large_is_refused_before_anything_runs(tmp_path, monkeypatch, capsys):
    with pytest.raises(ValidationError, match="at most 1,000 transitions"):
        cap.check_capture_size(10, 101, "s / a", limit=1000)
    cap.check_capture_size(10, 100, "s / a", limit=1000)
    monkeypatch.setattr(cap, "MAX_CAPTURE_TRANSITIONS", 1000)
    out = tmp_path / "capture"
    rc = cli.main(["evaluate", "--scenario", "configs/scenarios/gaussian_klinotaxis.yaml",
                   "--episodes", "64", "--capture", str(out), "--out", str(tmp_path / "ev"),
                   "--quiet"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "--capture" in err and "fewer --episodes" in err
    assert not (tmp_path / "ev" / "summary.md").exists()


def test_docs_capture_example_runs(captured, tmp_path, monkeypatch):
    """docs/agents.md, "Captured trajectories": the pandas snippet on a real capture."""
    import shutil

    from docs_blocks import tagged

    code = tagged("capture-pandas")[0]
    shutil.copytree(captured / "capture", tmp_path / "runs" / "capture_klino")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/agents.md capture", "exec"), {"__name__": "__docs__"})
    assert (tmp_path / "runs" / "capture_klino" / "paths.png").stat().st_size > 0


def test_steps_columns_give_one_row_per_agent_in_episode_step_agent_order():
    """Multi-agent records ``[T, N, A]``: rows ordered by episode, step,
    agent; observations ``[T, N, A, k]`` stay per agent."""
    T, N, A = 3, 2, 2
    x = np.arange(T * N * A, dtype=np.float32).reshape(T, N, A)  # x[t, n, a]
    valid = np.array([[1, 1], [1, 0], [0, 0]], bool)  # env 0: 2 steps, env 1: 1
    steps = {"valid": valid, "x": x, "observation": np.stack([x, -x], axis=-1),
             "terminated": x > 5}
    cols = cap.steps_columns(steps, T)
    np.testing.assert_array_equal(cols["episode"], [0, 0, 0, 0, 1, 1])
    np.testing.assert_array_equal(cols["step"], [0, 0, 1, 1, 0, 0])
    np.testing.assert_array_equal(cols["agent_index"], [0, 1, 0, 1, 0, 1])
    expected = [x[0, 0, 0], x[0, 0, 1], x[1, 0, 0], x[1, 0, 1], x[0, 1, 0], x[0, 1, 1]]
    np.testing.assert_array_equal(cols["x"], expected)
    np.testing.assert_array_equal(cols["observation"][:, 1], -np.asarray(expected))
    single = cap.steps_columns({"valid": valid, "x": x[..., 0]}, T)
    np.testing.assert_array_equal(single["agent_index"], [0, 0, 0])


@pytest.mark.slow
def test_evaluate_captures_a_multi_agent_scenario(tmp_path):
    scenario = tmp_path / "team.yaml"
    scenario.write_text(json.dumps({
        "name": "team", "agent": "klinotaxis", "episodes": 6,
        "env": {"preset": "PlumeNav-Gaussian-v0", "overrides": {
            "num_agents": 3, "done_mode": "any", "grid_size": [24, 24], "sigma": 5.0,
            "max_steps": 30}}}))
    out = tmp_path / "capture"
    assert cli.main(["evaluate", "--scenario", str(scenario), "--capture", str(out),
                     "--out", str(tmp_path / "ev"), "--quiet"]) == 0
    steps = pq.read_table(out / "steps.parquet").to_pydict()
    episodes = pq.read_table(out / "episodes.parquet").to_pydict()
    assert episodes["agents"] == [3] * 6
    assert sum(episodes["length"]) * 3 == len(steps["x"])
    assert steps["agent_index"][:6] == [0, 1, 2, 0, 1, 2]
    assert all(e is None for e in episodes["path_efficiency"])
    meta = json.loads((out / "run.json").read_text())
    assert meta["runs"][0]["agents"] == 3 and meta["runs"][0]["transitions"] == len(steps["x"])
    # an episode ends at its last step: the team's success (done_mode any) is
    # one agent terminated in the episode's last three rows
    for n, (length, success) in enumerate(zip(episodes["length"], episodes["success"])):
        rows = [i for i, e in enumerate(steps["episode"]) if e == n]
        assert len(rows) == 3 * length
        assert any(steps["terminated"][i] for i in rows[-3:]) == success


@pytest.fixture(scope="module")
def gym_capture(tmp_path_factory):
    """A random agent's 120 steps through CaptureTrajectories, then close()."""
    import gymnasium

    from plume_jax.gym.capture import CaptureTrajectories

    out = tmp_path_factory.mktemp("gym") / "capture"
    env = CaptureTrajectories(
        gymnasium.make("plume_jax/PlumeNav-Gaussian-v0", grid_size=[32, 32], max_steps=50),
        out, label="random")
    env.action_space.seed(0)
    obs, info = env.reset(seed=0)
    played, returns, ret = [], [], 0.0
    for _ in range(120):
        action = env.action_space.sample()
        new_obs, reward, terminated, truncated, info = env.step(action)
        played.append((float(np.ravel(obs)[0]), int(action), float(reward)))
        ret += float(reward)
        obs = new_obs
        if terminated or truncated:
            returns.append(ret)
            ret = 0.0
            obs, info = env.reset()
    env.close()
    env.close()  # idempotent: nothing written twice
    return out, played, returns


def test_the_gymnasium_wrapper_writes_the_evaluate_schema(gym_capture, captured):
    out, played, returns = gym_capture
    steps = pq.read_table(out / "steps.parquet")
    episodes = pq.read_table(out / "episodes.parquet")
    reference = pq.read_table(captured / "capture" / "steps.parquet")
    # the same columns with the same types as evaluate --capture writes
    assert steps.schema.remove_metadata() == reference.schema.remove_metadata()
    assert episodes.schema.names == pq.read_table(
        captured / "capture" / "episodes.parquet").schema.names
    assert steps.schema.metadata[b"plume_jax.capture_schema"] == cap.SCHEMA_VERSION.encode()
    # every step recorded as played, episodes contiguous, lengths summing to the rows
    cols = steps.to_pydict()
    assert len(cols["step"]) == 120 == sum(episodes.column("length").to_pylist())
    np.testing.assert_allclose([o[0] for o in cols["observation"]], [p[0] for p in played],
                               rtol=1e-6)
    assert cols["action"] == [p[1] for p in played]
    np.testing.assert_allclose(cols["reward"], [p[2] for p in played])
    e = episodes.to_pydict()
    finished = [r for r, f in zip(e["return"], e["finished"]) if f]
    np.testing.assert_allclose(finished, returns, rtol=1e-5)
    assert e["finished"][-1] is (len(returns) == len(e["episode"]))
    for n, length in enumerate(e["length"]):
        rows = [i for i, ep in enumerate(cols["episode"]) if ep == n]
        assert [cols["step"][i] for i in rows] == list(range(length))
        # consecutive rows: one step's end is the next one's start
        assert [cols["next_x"][i] for i in rows[:-1]] == [cols["x"][i] for i in rows[1:]]
        assert (cols["x"][rows[0]], cols["y"][rows[0]]) == (e["start_x"][n], e["start_y"][n])
    meta = json.loads((out / "run.json").read_text())
    (run,) = meta["runs"]
    assert run["seeds"][0] == 0 and run["agent"] == {"label": "random"}
    assert run["env_settings_hash"] == cap.canonical_hash(run["env_settings"])
    assert meta["files"]["steps.parquet"]["rows"] == 120


def test_the_gymnasium_wrapper_refuses_what_it_cannot_record(tmp_path):
    import gymnasium

    from plume_jax.gym.capture import CaptureTrajectories

    with pytest.raises(ValidationError, match="a plume_jax Gymnasium env"):
        CaptureTrajectories(gymnasium.make("CartPole-v1"), tmp_path)
    env = CaptureTrajectories(
        gymnasium.make("plume_jax/PlumeNav-Gaussian-v0", grid_size=[32, 32], max_steps=50),
        tmp_path / "c", max_transitions=2)
    env.reset(seed=1)
    env.step(0)
    env.step(0)
    position = env.unwrapped.env_state.agent.position
    with pytest.raises(ValidationError, match="max_transitions"):
        env.step(1)
    assert env.unwrapped.env_state.agent.position is position  # the env did not move
    meta = env.write()
    assert meta["files"]["steps.parquet"]["rows"] == 2
    episodes = pq.read_table(tmp_path / "c" / "episodes.parquet").to_pydict()
    assert episodes["finished"] == [False] and episodes["length"] == [2]

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
from plume_jax.files import capture_files as cf
from plume_jax.evaluate import capture as cap
from plume_jax.evaluate.rollout import host_rollout, rollout
from tests.evaluate.constant_action import ConstantHostAgent, ConstantPolicy

pq = pytest.importorskip("pyarrow.parquet")


def _small():
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[24, 24], sigma=5.0,
                                 max_steps=40)
    from agents import make_agent

    return env, params, make_agent("klinotaxis", env)


@pytest.mark.slow
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


@pytest.mark.slow
def test_host_rollout_captures_the_same_transitions():
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[24, 24], sigma=5.0,
                                 max_steps=30)
    east = env.action_ids["move_east"]
    key = jax.random.key(4)
    f = rollout(env, params, ConstantPolicy(east), key, 4, 30, until_done=True, capture=True)
    h = host_rollout(env, params, ConstantHostAgent(east), key, 4, 30, until_done=True,
                     capture=True)
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
    observation = [c for c in steps.column_names if c.startswith(cf.OBSERVATION_PREFIX)]
    assert observation == run["observation_columns"] == ["obs_concentration"]
    assert set(steps.column_names) - set(observation) <= set(cap.STEP_COLUMNS)
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

    from tests.docs_blocks import tagged

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
    np.testing.assert_allclose(cols["obs_concentration"], [p[0] for p in played],
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


# --- issue 42 items 4 and 5, issue 44 item 3 ---------------------------------

_TINY = ["--scenario", "configs/scenarios/gaussian_klinotaxis.yaml", "--episodes", "6",
         "--quiet"]


def _evaluate(tmp_path, capture, *extra):
    return cli.main(["evaluate", *_TINY, "--capture", str(capture), "--out",
                     str(tmp_path / "ev"), "--overwrite", *extra])


def _files(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _siblings(folder):
    return sorted(p.name for p in folder.parent.iterdir() if p.name != folder.name
                  and p.name.startswith(folder.name + "."))


def _earlier(captured, tmp_path):
    """A copy of the module's capture: the earlier capture a test replaces."""
    import shutil

    out = tmp_path / "capture"
    shutil.copytree(captured / "capture", out)
    return out


def test_a_second_capture_into_the_same_folder_needs_overwrite(captured, tmp_path, capsys):
    out = _earlier(captured, tmp_path)
    before = _files(out)
    ev = ["evaluate", *_TINY, "--capture", str(out), "--out", str(tmp_path / "ev")]
    assert cli.main(ev) == 2
    err = capsys.readouterr().err
    assert "--capture" in err and "--overwrite" in err and "Traceback" not in err
    assert _files(out) == before  # untouched, and nothing ran
    assert not (tmp_path / "ev" / "summary.md").exists()
    # with --overwrite the folder is replaced whole, nothing left beside it
    assert cli.main([*ev, "--overwrite"]) == 0
    assert json.loads((out / "run.json").read_text())["runs"][0]["episodes"] == 6
    assert pq.read_table(out / "episodes.parquet").num_rows == 6
    assert _siblings(out) == []
    # a folder with the permissions any new folder gets here (not a temp folder's 0o700)
    (tmp_path / "plain").mkdir()
    assert out.stat().st_mode & 0o777 == (tmp_path / "plain").stat().st_mode & 0o777


def test_overwrite_replaces_only_an_earlier_capture(tmp_path, capsys):
    """--overwrite never deletes a folder that is not a capture, nor --out."""
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "thesis.tex").write_text("mine")
    assert _evaluate(tmp_path, mine) == 2
    assert "no capture's run.json" in capsys.readouterr().err
    assert (mine / "thesis.tex").read_text() == "mine"
    assert cli.main(["evaluate", *_TINY, "--capture", str(tmp_path / "ev"),
                     "--out", str(tmp_path / "ev")]) == 2
    assert "apart from --out" in capsys.readouterr().err
    # the Gymnasium wrapper refuses it too
    import gymnasium

    from plume_jax.gym.capture import CaptureTrajectories

    env = CaptureTrajectories(gymnasium.make("plume_jax/PlumeNav-Gaussian-v0",
                                             grid_size=[24, 24], max_steps=5), mine)
    env.reset(seed=0)
    env.step(0)
    with pytest.raises(ValidationError, match="no capture's run.json"):
        env.write()
    assert sorted(p.name for p in mine.iterdir()) == ["thesis.tex"]


def test_a_kill_between_capture_files_leaves_the_old_capture_whole(captured, tmp_path,
                                                                   monkeypatch, capsys):
    out = _earlier(captured, tmp_path)
    before = _files(out)
    calls = []

    def dies_on_the_second_file(path):
        calls.append(path)
        if len(calls) == 2:  # steps.parquet is done, episodes.parquet is next
            raise KeyboardInterrupt
        return real(path)

    real = cf.file_sha256
    monkeypatch.setattr(cf, "file_sha256", dies_on_the_second_file)
    assert _evaluate(tmp_path, out) == 130  # the CLI's Ctrl-C exit
    # a plain Ctrl-C says so (it printed "plume-jax: " and nothing else)
    assert capsys.readouterr().err.splitlines()[-1] == "plume-jax: interrupted by SIGINT"
    assert len(calls) == 2
    assert _files(out) == before
    assert _siblings(out) == []  # the half-written capture is removed
    # a process killed outright before the rename leaves the old capture as it
    # was too (its half-written folder beside it)
    monkeypatch.undo()
    steps = pq.read_table(out / "steps.parquet")
    episodes = pq.read_table(out / "episodes.parquet")
    writer = cf.CaptureWriter(out)
    writer.add(0, steps, episodes)  # ... and no finish(): the process is gone
    assert _files(out) == before
    writer.abort()
    # Ctrl-C between the set-aside and the rename puts the old one back
    new = cf.CaptureWriter(out)
    new.add(0, steps.slice(0, 5), episodes)

    real_rename = cf.os.rename

    def interrupted(src, dst):
        if src == new.tmp:
            raise KeyboardInterrupt
        return real_rename(src, dst)

    monkeypatch.setattr(cf.os, "rename", interrupted)
    with pytest.raises(KeyboardInterrupt):
        new.finish([], [])
    monkeypatch.undo()
    assert _files(out) == before


def test_a_leftover_set_aside_folder_does_not_stop_the_next_overwrite(captured, tmp_path,
                                                                      capsys, monkeypatch):
    """A run killed while deleting the set-aside capture leaves
    ``<dir>.capture-old-<pid>``; the next run with that pid replaces the
    capture all the same, and a rename the file system refuses is a one-line
    error naming the folders, the capture left as it was."""
    import errno
    import os

    out = _earlier(captured, tmp_path)
    stale = tmp_path / f"capture.capture-old-{os.getpid()}"
    stale.mkdir()
    (stale / "steps.parquet").write_bytes(b"half deleted")
    assert _evaluate(tmp_path, out) == 0
    assert "Traceback" not in capsys.readouterr().err
    assert pq.read_table(out / "episodes.parquet").num_rows == 6
    assert _siblings(out) == [stale.name]  # the leftover is the user's to delete
    before = _files(out)
    steps = pq.read_table(out / "steps.parquet")
    episodes = pq.read_table(out / "episodes.parquet")
    real_rename = cf.os.rename

    def refused(src, dst):
        if ".capture-tmp-" in src:  # the finished capture cannot take its place
            raise OSError(errno.ENOTEMPTY, "Directory not empty")
        return real_rename(src, dst)

    monkeypatch.setattr(cf.os, "rename", refused)
    with pytest.raises(ValidationError, match="Directory not empty") as error:
        cf.write_folder(str(out), [steps], [episodes], [], [])
    message = str(error.value)
    assert "\n" not in message and ".capture-tmp-" in message and str(out) in message
    monkeypatch.undo()
    assert _files(out) == before
    assert _siblings(out) == [stale.name]


def _plan(episodes):
    from plume_jax.evaluate import scenario as sc

    scenario = sc.load_scenario("configs/scenarios/gaussian_klinotaxis.yaml")
    return sc.plan_run(scenario, None, episodes=episodes)


def test_capture_memory_does_not_grow_with_episodes(captured, tmp_path, monkeypatch):
    """A captured run is evaluated and written in batches of envs bounded by
    CAPTURE_BATCH_BYTES, whatever its episodes, with the results and rows of
    the whole run in one batch (the module's capture: the same 64 episodes)."""
    from plume_jax.evaluate import scenario as sc

    plan = _plan(64)
    per_transition = cap.transition_bytes(plan.env, plan.params)
    budget = 24 * plan.num_steps * per_transition  # at most 24 envs per batch
    # 64 envs need three batches: three of 22 (not 24, 24 and 24 of which the
    # last reran 8 envs)
    assert cap.plan_batches(64, plan.num_steps, 1, per_transition, budget) == 22
    assert cap.plan_batches(10**6, plan.num_steps, 1, per_transition, budget) == 24
    assert cap.plan_batches(64, plan.num_steps, 1, per_transition) == 64  # the default
    seen, added = [], []
    real_add = cf.CaptureWriter.add

    def spy(self, run, steps, episodes):
        added.append((steps.num_rows, episodes.num_rows))
        return real_add(self, run, steps, episodes)

    monkeypatch.setattr(cf.CaptureWriter, "add", spy)
    recorder = cap.EvaluationCapture(str(tmp_path / "batched"), argv=[], budget=budget)
    run = recorder.run(0, plan)
    real_run_add = run.add

    def record_shape(result, offset, skip=0):
        seen.append(np.asarray(result.steps["x"]).shape[1])
        return real_run_add(result, offset, skip)

    run.add = record_shape
    finished = []
    report = sc.execute_run(plan, capture=run, progress=lambda steps, done: finished.append(done))
    recorder.end_run(report)
    meta = recorder.finish()
    # three batches of 22 envs, each written before the next ran (the last
    # one overlaps: envs 42..63, 20 new)
    assert seen == [22, 22, 22] and [e for _, e in added] == [22, 22, 20]
    assert meta["runs"][0]["batch_envs"] == 22
    # the progress counts each episode once: never back, never past the run's 64
    assert finished and finished[-1] == 64 and max(finished) == 64
    assert finished == sorted(finished)
    # the same episodes, report and rows as the capture taken in one batch
    whole = json.loads((captured / "ev" / "gaussian_klinotaxis__klinotaxis.json").read_text())
    for name in ("success_rate", "mean_steps", "path_efficiency"):
        assert report["metrics"][name] == whole["metrics"][name], name
    for name in ("steps.parquet", "episodes.parquet"):
        a = pq.read_table(tmp_path / "batched" / name)
        b = pq.read_table(captured / "capture" / name)
        assert a.equals(b), name
    assert sum(r for r, _ in added) == pq.read_table(captured / "capture" / "steps.parquet") \
        .num_rows
    result = report["_rollout"]
    valid = np.asarray(result.trajectories_valid)
    assert valid.shape[0] == 4 and valid[:, 0].all()


def test_a_captured_run_in_batches_does_not_rerun_most_of_a_batch():
    """The learned searcher's 2,048 captured searches of 642 steps ran in two
    batches of 2,010 envs (the largest that fit), the second rerunning 1,972
    envs of the first: 4,020 searches for 2,048, twice the 11-27 time. A
    run's batches now rerun fewer envs than there are batches."""
    per_transition = 120
    budget = cap.CAPTURE_BATCH_BYTES
    for episodes in (1, 7, 64, 2048, 2049, 5000, 10**5):
        for max_steps in (50, 642, 5000):
            size = cap.plan_batches(episodes, max_steps, 1, per_transition, budget)
            batches = -(-episodes // size)
            assert 1 <= size <= episodes
            assert size * max_steps * per_transition <= budget or size == 1
            assert batches * size - episodes < batches, (episodes, max_steps, size)
    fits = budget // (642 * 52)  # 2,010 envs of 642 steps fit in the default budget
    assert fits == 2010
    assert cap.plan_batches(2048, 642, 1, 52) == 1024


def test_the_capture_limit_is_per_command():
    plans = [_plan(6), _plan(6)]
    size = 6 * plans[0].num_steps
    cap.check_capture_plans(plans, limit=2 * size)
    with pytest.raises(ValidationError, match="summed over the command's runs") as error:
        cap.check_capture_plans(plans, limit=2 * size - 1)
    assert f"add up to {2 * size:,}" in str(error.value)
    cap.check_capture_plans(plans[:1], limit=size)
    with pytest.raises(ValidationError, match="fewer --episodes"):
        cap.check_capture_plans(plans[:1], limit=size - 1)


def test_a_capture_of_discrete_and_continuous_runs_is_refused_before_anything_runs(
        tmp_path):
    """Their action columns (integers, lists of floats) cannot share one
    steps.parquet: finish() failed with an ArrowTypeError after all runs."""
    import dataclasses

    discrete = _plan(6)
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[24, 24], sigma=5.0,
                                 max_steps=40, actions="continuous")
    continuous = dataclasses.replace(discrete, env=env, params=params, label="moving")
    assert not hasattr(env.action_space(params), "n")  # a Box
    cap.check_capture_plans([discrete, discrete])
    cap.check_capture_plans([continuous, continuous])
    with pytest.raises(ValidationError, match="all discrete or all continuous") as error:
        cap.check_capture_plans([discrete, continuous])
    message = str(error.value)
    assert "\n" not in message and "--capture" in message
    assert "klinotaxis: discrete" in message and "moving: continuous" in message
    # tables written without the check (the API) are refused in one line too
    rows = [cf.table({"action": np.array([1, 2], np.int32)}),
            cf.table({"action": np.ones((2, 2), np.float32)})]
    episodes = [cf.table({"run": np.array([r], np.int32)}) for r in (0, 1)]
    with pytest.raises(ValidationError, match="one type per column") as error:
        cf.write_folder(str(tmp_path / "c"), rows, episodes, [], [])
    assert "action" in str(error.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing left behind


def test_a_capture_reads_into_pandas_with_action_names_sites_and_one_column_per_entry(
        captured):
    pd = pytest.importorskip("pandas")
    out = captured / "capture"
    steps = pd.read_parquet(out / "steps.parquet")
    episodes = pd.read_parquet(out / "episodes.parquet")
    meta = json.loads((out / "run.json").read_text())
    (run,) = meta["runs"]
    env, params = plume_jax.make("PlumeNav-Gaussian-v0")
    # actions: the id and its name, a categorical of the env's names
    assert run["action_names"] == env.action_names
    assert isinstance(steps["action_name"].dtype, pd.CategoricalDtype)
    assert list(steps["action_name"].cat.categories) == env.action_names
    assert (steps["action_name"].astype(str)
            == [env.action_names[a] for a in steps["action"]]).all()
    # the observation: numbers, not an object column of lists
    assert run["observation_labels"] == env.observation_labels()
    assert steps["obs_concentration"].dtype == np.float32
    assert "observation" not in steps and steps.dtypes.ne(object).all()
    np.testing.assert_allclose(steps["obs_concentration"], steps["concentration"], atol=1e-6)
    # where the source and the goal were
    source = np.asarray(params.plume.source_location) if hasattr(
        params.plume, "source_location") else None
    assert {"source_x", "source_y", "goal_x", "goal_y"} <= set(episodes)
    goal = env.goal_location(env.reset(jax.random.key(0), params)[1].plume, params)
    np.testing.assert_allclose(episodes[["goal_x", "goal_y"]].to_numpy(),
                               np.broadcast_to(np.asarray(goal), (len(episodes), 2)))
    if source is not None:
        np.testing.assert_allclose(episodes[["source_x", "source_y"]].to_numpy()[0], source)
    # the data files' checksums
    for name in ("steps.parquet", "episodes.parquet"):
        digest = hashlib.sha256((out / name).read_bytes()).hexdigest()
        assert meta["files"][name]["sha256"] == digest



def test_a_batch_of_envs_draws_the_keys_of_the_whole_run():
    from plume_jax.evaluate.rollout import env_keys

    key = jax.random.key(11)
    whole = jax.random.key_data(jax.random.split(key, 50))
    for offset, n in ((0, 7), (13, 7), (43, 7), (0, 50)):
        part = env_keys(key, n, 50, jnp.int32(offset))
        np.testing.assert_array_equal(jax.random.key_data(part), whole[offset:offset + n])
    jitted = jax.jit(env_keys, static_argnums=(1, 2))
    np.testing.assert_array_equal(jax.random.key_data(jitted(key, 7, 50, jnp.int32(20))),
                                  whole[20:27])
    legacy = jax.random.PRNGKey(11)  # a raw uint32 key: split and sliced
    np.testing.assert_array_equal(env_keys(legacy, 4, 9, 5), jax.random.split(legacy, 9)[5:9])


@pytest.mark.slow
def test_host_rollout_in_batches_gives_the_whole_runs_episodes():
    from plume_jax.evaluate.rollout import join_results

    env, params = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[24, 24], sigma=5.0,
                                 max_steps=30)
    from types import SimpleNamespace

    north = env.action_ids["move_north"]
    agent = SimpleNamespace(reset=lambda: None, act_batch=lambda obs, episode_start=None:
                            np.full(len(obs), north, np.int32))
    key = jax.random.key(5)
    whole = host_rollout(env, params, agent, key, 5, 30, until_done=True, capture=True)
    parts = [(host_rollout(env, params, agent, key, 3, 30, until_done=True, capture=True,
                           total_envs=5, env_offset=offset), skip)
             for offset, skip in ((0, 0), (2, 1))]
    joined = join_results(parts)
    for name in ("success", "episode_length", "episode_return", "start_distance", "goal"):
        np.testing.assert_array_equal(np.asarray(getattr(joined, name)),
                                      np.asarray(getattr(whole, name)), err_msg=name)
    a = cap.steps_columns(parts[1][0].steps, int(parts[1][0].steps_run))
    b = cap.steps_columns(whole.steps, int(whole.steps_run))
    rows = b["episode"] >= 2
    np.testing.assert_array_equal(a["x"], b["x"][rows])


@pytest.mark.slow
def test_host_batches_that_end_at_different_steps_join_as_one_batch():
    """A host agent's batches stop when their own episodes have ended, so
    their paths differ in length: they join (the shorter padded, invalid)
    into the one-batch run's result, and their rows are its rows."""
    from types import SimpleNamespace

    from plume_jax.evaluate.rollout import join_results

    env, params = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[8, 8], sigma=3.0,
                                 max_steps=30, goal_radius=2.0)
    n = env.action_space(params).n
    calls = [0]

    def act_batch(obs, episode_start=None):  # a function of the step and the observation
        calls[0] += 1
        seen = np.abs(np.asarray(obs).reshape(len(obs), -1) * 1000).astype(np.int64).sum(1)
        return ((seen + 7 * calls[0]) % n).astype(np.int32)

    agent = SimpleNamespace(reset=lambda: calls.__setitem__(0, 0), act_batch=act_batch)
    key = jax.random.key(3)
    whole = host_rollout(env, params, agent, key, 6, 30, until_done=True, capture=True,
                         num_tracked=6)
    parts = [(host_rollout(env, params, agent, key, 3, 30, until_done=True, capture=True,
                           total_envs=6, env_offset=offset), 0) for offset in (0, 3)]
    assert len({int(r.steps_run) for r, _ in parts}) == 2  # the batches end apart
    joined = join_results(parts, num_tracked=6)
    assert int(joined.steps_run) == int(whole.steps_run)
    for name in ("success", "episode_length", "episode_return", "path_length", "goal"):
        np.testing.assert_array_equal(np.asarray(getattr(joined, name)),
                                      np.asarray(getattr(whole, name)), err_msg=name)
    valid = np.asarray(whole.trajectories_valid)
    np.testing.assert_array_equal(np.asarray(joined.trajectories_valid), valid)
    np.testing.assert_array_equal(np.asarray(joined.trajectories)[valid],
                                  np.asarray(whole.trajectories)[valid])
    rows = [cap.steps_columns(r.steps, int(r.steps_run)) for r, _ in parts]
    one = cap.steps_columns(whole.steps, int(whole.steps_run))
    np.testing.assert_array_equal(np.concatenate([rows[0]["episode"], rows[1]["episode"] + 3]),
                                  one["episode"])
    for name in ("step", "x", "y", "action", "reward", "terminated"):
        np.testing.assert_array_equal(np.concatenate([r[name] for r in rows]), one[name],
                                      err_msg=name)


def test_runs_with_different_columns_share_one_steps_file(tmp_path):
    """Two runs, one with a 2-entry observation and named actions, one with
    neither: one steps.parquet, each run's columns, nulls elsewhere."""
    pd = pytest.importorskip("pandas")
    names = ["noop", "go"]
    first = {"run": np.zeros(3, np.int32), "episode": np.zeros(3, np.int32),
             **cf.action_columns(np.array([1, 0, 7], np.int32), names),  # 7: no name
             **cf.split_observation(np.ones((3, 2)), cf.observation_columns(["a", "b"], 2))}
    second = {"run": np.ones(2, np.int32), "episode": np.zeros(2, np.int32),
              "action": np.array([0, 0], np.int32)}
    episodes = [cf.table({"run": np.array([r], np.int32)}) for r in (0, 1)]
    with cf.CaptureWriter(tmp_path / "c") as writer:
        writer.add(0, cf.table(first), episodes[0])
        writer.add(1, cf.table(second), episodes[1])
        meta = writer.finish([], [])
    steps = pd.read_parquet(tmp_path / "c" / "steps.parquet")
    assert list(steps.columns) == ["run", "episode", "action", "action_name", "obs_a", "obs_b"]
    assert steps["action_name"].tolist()[:2] == ["go", "noop"]
    assert steps["action_name"].isna().tolist() == [False] * 2 + [True] * 3
    assert steps["obs_a"].isna().sum() == 2 and meta["files"]["steps.parquet"]["rows"] == 5
    assert pq.read_schema(tmp_path / "c" / "steps.parquet").metadata[
        b"plume_jax.capture_schema"] == cf.SCHEMA_VERSION.encode()
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == [
        "episodes.parquet", "run.json", "steps.parquet"]

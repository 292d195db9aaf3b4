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

"""``plume-jax train`` end to end on a trivial preset (16x16 grid, the source
3 cells from a fixed start), then checkpoints, resume, export, and the
exported agent in the functional and the Gymnasium env."""

from __future__ import annotations

import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml

import plume_jax
from agents.trained import TrainedAgent, TrainedPolicy, forward, initial_carry, policy_step
from plume_jax.cli import main
from plume_jax.core.errors import ValidationError
from plume_jax.train.algorithms import networks
from plume_jax.train.algorithms.base import network_spec
from plume_jax.train.checkpoint import load_checkpoint, policy_arrays
from plume_jax.train.config import NetworkConfig, load_train_config, train_config
from plume_jax.train.algorithms.normalize import ObsStats
from plume_jax.train.algorithms.ppo import PPO, Hparams, PPOStatic
from plume_jax.train.run import train

TRIVIAL_ENV = {"grid_size": [16, 16], "sigma": 4.0, "goal_radius": 1.5, "max_steps": 40,
               "start": {"type": "fixed", "position": [4, 7]}}
NUM_UPDATES = 24
CONFIG = {
    "env": {"id": "PlumeNav-Gaussian-v0", "overrides": TRIVIAL_ENV},
    "algo": {"total_steps": 16 * 32 * NUM_UPDATES, "num_envs": 16, "num_steps": 32,
             "update_epochs": 2, "num_minibatches": 2, "learning_rate": 3e-3,
             "normalize_obs": True, "ent_coef": 0.0},
    "network": {"hidden_sizes": [16, 16]},
    "run": {"seed": 0, "log_every": 4, "checkpoint_every": 12},
    "eval": {"num_envs": 64},
}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """``plume-jax train`` on the trivial preset, through the CLI."""
    folder = tmp_path_factory.mktemp("train")
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    out = folder / "out"
    import contextlib
    import io

    buffer, errors = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(errors):
        code = main(["train", "--config", str(path), "--out", str(out),
                     "--set", "run.log_every=8", "--set", "env.overrides.max_steps=40"])
    assert code == 0, buffer.getvalue() + errors.getvalue()
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return {"out": out, "stdout": buffer.getvalue(), "stderr": errors.getvalue(), "rows": rows,
            "config": path,
            "summary": json.loads((out / "summary.json").read_text())}


def test_train_writes_every_output(run):
    out = run["out"]
    for name in ("config.yaml", "metrics.jsonl", "metrics.csv", "learning_curve.png",
                 "summary.json", "checkpoint/runner.msgpack", "checkpoint/meta.json",
                 "checkpoints/update_00000012/runner.msgpack", "policy/policy.npz",
                 "policy/policy.json"):
        assert (out / name).is_file(), name
    assert list((out / "tensorboard").glob("events.out.tfevents.*"))
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["update_00000012"]
    assert (out / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [r["update"] for r in run["rows"]] == list(range(1, NUM_UPDATES + 1))
    assert len((out / "metrics.csv").read_text().splitlines()) == NUM_UPDATES + 1
    s = run["summary"]
    assert s["env_steps_total"] == 16 * 32 * NUM_UPDATES
    assert s["compile_seconds"] > 0 and s["steps_per_second_excl_compile"] > 0
    # the resolved config reloads to the same config
    assert load_train_config(out / "config.yaml") == train_config(yaml.safe_load(
        (out / "config.yaml").read_text()))


def test_short_training_improves_return_on_a_trivial_preset(run):
    rows = run["rows"]
    first = np.mean([r["return_mean"] or 0.0 for r in rows[:3]])
    last = np.mean([r["return_mean"] for r in rows[-3:]])
    assert last > first + 0.2
    assert np.mean([r["success_rate"] for r in rows[-3:]]) > 0.95
    assert np.mean([r["length_mean"] for r in rows[-3:]]) < 6  # the goal is 2 moves away
    ev = run["summary"]["evaluation"]
    assert ev["greedy"] and ev["success_rate"] == 1.0 and ev["mean_steps_to_goal"] <= 4


def test_progress_lines_come_from_inside_the_compiled_program(run):
    lines = [line for line in run["stderr"].splitlines()
             if line.startswith("[train]") and "| update " in line]
    # log_every=8 (from --set) over the compiled chunks, plus the last update; not a
    # terminal, so plain lines of the progress bar, with the env steps and an ETA
    assert [line.split("| update ")[1].split()[0] for line in lines] == ["8/24", "16/24", "24/24"]
    assert lines[0].startswith("[train] 4,096/12,288 steps (33.3%)")
    assert all("ETA" in line and "SPS" in line and "success" in line for line in lines)
    assert "compiling the training program" in run["stderr"]
    assert "greedy evaluation on 64 fresh episodes" in run["stdout"]


def test_train_writes_progress_to_stderr_and_only_its_summary_to_stdout(run):
    """Regression: train and sweep wrote their progress lines to stdout while
    evaluate and demo wrote theirs to stderr; now every command keeps
    progress and status on stderr and results on stdout."""
    assert "[train]" in run["stderr"] and "[train]" not in run["stdout"]
    assert "compiling" not in run["stdout"]
    out = run["stdout"].splitlines()
    assert out[0].startswith("trained 12,288 env steps") and out[-1].startswith("outputs in ")


def test_set_overrides_are_recorded_in_the_run_config(run):
    saved = yaml.safe_load((run["out"] / "config.yaml").read_text())
    assert saved["run"]["log_every"] == 8            # --set run.log_every=8 (file: 4)
    assert saved["env"]["overrides"]["max_steps"] == 40
    assert saved["run"]["checkpoint_minutes"] == 5.0  # the default, spelled out


def test_resume_from_a_checkpoint_continues_exactly(run, tmp_path):
    cfg = load_train_config(run["config"])
    resumed = train(cfg, tmp_path, progress=False, evaluate=False,
                    resume=run["out"] / "checkpoints" / "update_00000012")
    assert [r["update"] for r in resumed.rows] == list(range(13, NUM_UPDATES + 1))
    env, _ = cfg.make_env()
    algo = PPO(env, env.default_params, resumed.algo.static)
    template = jax.eval_shape(algo.init, jax.random.key(0), _hp(), env.default_params)
    final, meta = load_checkpoint(run["out"] / "checkpoint", template)
    assert meta["update"] == NUM_UPDATES
    same = jax.tree.map(lambda a, b: np.array_equal(np.asarray(a), np.asarray(b)),
                        final.params, resumed.runner.params)
    assert all(jax.tree.leaves(same))
    for a, b in zip(run["rows"][12:], resumed.rows):
        assert a == b


def test_checkpoint_of_another_config_is_refused(run):
    cfg = load_train_config(run["config"]).replace(network={"hidden_sizes": [8]})
    env, _ = cfg.make_env()
    from plume_jax.train.algorithms.ppo import ppo_static

    algo = PPO(env, env.default_params, ppo_static(cfg))
    template = jax.eval_shape(algo.init, jax.random.key(0), _hp(), env.default_params)
    with pytest.raises(ValidationError):
        load_checkpoint(run["out"] / "checkpoint", template)


def test_trained_agent_reaches_the_goal_through_the_gymnasium_env(run):
    from plume_jax.gym import PlumeGymEnv

    env, params = plume_jax.make("PlumeNav-Gaussian-v0", **TRIVIAL_ENV)
    agent = TrainedAgent.load(run["out"] / "policy")
    genv = PlumeGymEnv(env, params)
    for seed in range(3):
        obs, info = genv.reset(seed=seed)
        agent.reset()
        for _ in range(40):
            action = agent.act(obs)
            assert isinstance(action, int) and action in env.action_ids.values()
            obs, reward, terminated, truncated, info = genv.step(action)
            if terminated or truncated:
                break
        assert terminated and info["goal_reached"] and info["step_count"] <= 4
    genv.close()


# ----------------------------------------------------- export == training network
def _hp():
    return Hparams.create(learning_rate=1e-3, ent_coef=0.0, vf_coef=0.5, gamma=0.99,
                          gae_lambda=0.95, clip_eps=0.2, max_grad_norm=0.5)


def _ppo_side(algo, params, stats, obs_seq, starts, actions):
    """The training code's per-step computation (features, normalisation,
    previous action, network step) over one env's sequence (jitted)."""

    @jax.jit
    def run(params, stats, obs_seq, starts, actions):
        hidden = jnp.zeros((1, algo.hidden_dim), jnp.float32)
        prev_action = jnp.zeros((1,) + actions.shape[1:], actions.dtype)
        prev_tobs = jnp.zeros((1, algo.obs_dim), jnp.float32)
        outs, values = [], []
        for t in range(obs_seq.shape[0]):
            start = starts[t][None]
            tobs = algo.preprocess(obs_seq[t][None])
            x = algo.net_input(algo.features(tobs, prev_tobs, start), stats, prev_action, start)
            hidden, dist, value = algo.step_net(params, hidden, x, start)
            outs.append(dist[0][0])
            values.append(value[0])
            prev_action, prev_tobs = actions[t][None], tobs
        return jnp.stack(outs), jnp.stack(values)

    return jax.device_get(run(params, stats, jnp.asarray(obs_seq), jnp.asarray(starts),
                              jnp.asarray(actions)))


def _agent_side(spec, arrays, obs_seq, starts, actions):
    """agents.trained's forward pass over the same sequence (jitted)."""

    @jax.jit
    def run(arrays, obs_seq, starts, actions):
        carry = initial_carry(spec)
        outs, values = [], []
        for t in range(obs_seq.shape[0]):
            carry = jax.tree.map(lambda a, b: jnp.where(starts[t], a, b), initial_carry(spec),
                                 carry)
            hidden, (out, _log_std), value, tobs = forward(spec, arrays, carry, obs_seq[t])
            outs.append(out)
            values.append(value)
            carry = carry.replace(hidden=hidden, prev_action=actions[t], prev_obs=tobs,
                                  start=jnp.asarray(False))
        return jnp.stack(outs), jnp.stack(values)

    return jax.device_get(run(arrays, jnp.asarray(obs_seq), jnp.asarray(starts),
                              jnp.asarray(actions)))


@pytest.mark.parametrize("kind, actions_type", [("mlp", "discrete_grid"), ("gru", "discrete_grid"),
                                                ("gru", "continuous"), ("mlp", "continuous"),
                                                ("rnn", "discrete_grid")])
def test_exported_forward_pass_equals_the_training_network(kind, actions_type):
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[16, 16], sigma=4.0,
                                 goal_radius=1.5, actions=actions_type)
    width = {"rnn_size": 6} if kind == "rnn" else {"gru_size": 6}
    net = NetworkConfig(type=kind, hidden_sizes=(8, 8), obs_transform="log", obs_delta=True,
                        prev_action=True, **width)
    algo = PPO(env, params, PPOStatic(num_envs=2, num_steps=4, update_epochs=1,
                                      num_minibatches=1, num_updates=1, normalize_obs=True,
                                      network=net))
    # random parameters of the right shapes (no init program to compile), so
    # biases and log_std are non-zero too
    shapes = jax.eval_shape(lambda k: networks.init_params(algo.net, k, algo.in_dim),
                            jax.random.key(3))
    rng = np.random.default_rng(1)
    net_params = jax.tree.map(
        lambda x: jnp.asarray(rng.normal(0.0, 0.5, x.shape).astype(np.float32)), shapes)
    stats = ObsStats(mean=jnp.asarray([-3.0, 0.1]), var=jnp.asarray([4.0, 0.5]),
                     count=jnp.asarray(10.0))
    obs_seq = rng.uniform(0.0, 1.0, (7, 1)).astype(np.float32)
    starts = np.asarray([True, False, False, True, False, False, False])
    if algo.discrete:
        actions = rng.integers(0, algo.action_dim, 7).astype(np.int32)
    else:
        actions = rng.uniform(-1.0, 1.0, (7, algo.action_dim)).astype(np.float32)
    expected = _ppo_side(algo, net_params, stats, obs_seq, starts, actions)
    spec = network_spec(algo, algo.static.network, algo.static.normalize_obs)
    arrays = policy_arrays(net_params, stats)
    got = _agent_side(spec, arrays, obs_seq, starts, actions)
    # one forward pass (agents.actor_critic) on both sides; the two programs are
    # compiled separately (XLA may fuse the preprocessing differently): 1 ulp
    np.testing.assert_allclose(got[0], expected[0], rtol=2e-6, atol=2e-7)
    np.testing.assert_allclose(got[1], expected[1], rtol=2e-6, atol=2e-7)
    assert np.ptp(expected[1]) > 1e-3  # the sequence exercises the network
    # greedy actions of the functional policy = argmax / mapped mean of the training net
    policy = TrainedPolicy(spec, arrays)
    action, _ = policy.act(initial_carry(spec), obs_seq[0], jax.random.key(0))
    if algo.discrete:
        assert int(action) == int(np.argmax(expected[0][0]))
    else:
        u = np.clip(expected[0][0], -1, 1)
        np.testing.assert_allclose(np.asarray(action),
                                   algo.action_low + (u + 1) / 2 * (algo.action_high
                                                                    - algo.action_low),
                                   rtol=1e-5, atol=1e-6)
        assert isinstance(TrainedAgent(policy).act(obs_seq[0]), np.ndarray)


def test_save_load_gives_identical_actions(run):
    """Actions of the policy reloaded from disk equal those of the trained
    runner's network (not only the same argmax: the same logits)."""
    cfg = load_train_config(run["config"])
    env, params = cfg.make_env()
    from plume_jax.train.algorithms.ppo import ppo_static

    algo = PPO(env, params, ppo_static(cfg))
    template = jax.eval_shape(algo.init, jax.random.key(0), _hp(), params)
    runner, _ = load_checkpoint(run["out"] / "checkpoint", template)
    loaded = TrainedPolicy.load(run["out"] / "policy")
    fresh = TrainedPolicy(network_spec(algo, algo.static.network, algo.static.normalize_obs),
                          policy_arrays(runner.params, runner.obs_stats))
    obs = np.linspace(0.0, 1.0, 9, dtype=np.float32)[:, None]
    for o in obs:
        a1, c1 = loaded.act(initial_carry(loaded.spec), o, jax.random.key(0))
        a2, c2 = fresh.act(initial_carry(fresh.spec), o, jax.random.key(0))
        assert int(a1) == int(a2)
        assert loaded.value(initial_carry(loaded.spec), o) == fresh.value(
            initial_carry(fresh.spec), o)
    sampled = TrainedPolicy.load(run["out"] / "policy", greedy=False)
    a, _ = policy_step(sampled.spec, sampled.params, initial_carry(sampled.spec), obs[0],
                       jax.random.key(1), greedy=False)
    assert 0 <= int(a) < env.num_actions


# ------------------------------------------------ run folders, resume, kills (issue 13)
def _snapshot(folder: pathlib.Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def _cli(args: list[str], capsys) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_train_refuses_a_non_empty_out_folder_before_touching_anything(run, tmp_path, capsys):
    """Regression: --out on an existing folder deleted its metrics.jsonl and
    rewrote its config.yaml and summary.json before compiling anything."""
    folder = tmp_path / "unrelated"
    folder.mkdir()
    (folder / "config.yaml").write_text("mine: true\n")
    (folder / "summary.json").write_text("{}")
    (folder / "metrics.jsonl").write_text('{"update": 1}\n')
    before = _snapshot(folder)
    code, _, err = _cli(["train", "--config", str(run["config"]), "--out", str(folder)], capsys)
    assert code == 2
    assert "--out=" in err and "--resume" in err and "--overwrite" in err
    assert _snapshot(folder) == before
    with pytest.raises(ValidationError) as info:  # the Python API keeps the same rule
        train(load_train_config(run["config"]), folder, progress=False)
    assert info.value.parameter == "--out"
    assert _snapshot(folder) == before


def test_resume_refuses_a_config_that_changes_the_problem_or_the_algorithm(run, capsys):
    """Regression: a checkpoint resumed with another preset and learning rate
    just continued. The differing keys are named; the run is untouched."""
    before = _snapshot(run["out"])
    code, _, err = _cli(["train", "--resume", str(run["out"]),
                         "--set", "env.id=PlumeNav-GaussianBinary-v0",
                         "--set", "algo.learning_rate=0.01",
                         "--set", "env.overrides.sigma=6.0"], capsys)
    assert code == 2
    for key in ("env.id", "algo.learning_rate", "env.overrides.sigma"):
        assert key in err, err
    assert "algo.total_steps" in err  # says what may change
    assert _snapshot(run["out"]) == before


def test_resume_allows_a_new_budget_and_says_what_it_does_to_the_annealed_rate(run):
    from plume_jax.train.folder import resume_notes, resume_point

    cfg = load_train_config(run["out"] / "config.yaml").replace(
        algo={"total_steps": 16 * 32 * 48}, eval={"num_envs": 8}, run={"log_every": 1})
    point = resume_point(run["out"], cfg)
    assert (point.update, point.num_updates) == (NUM_UPDATES, NUM_UPDATES)
    (note,) = resume_notes(cfg, point)
    # the linear decay now runs over 48 updates: at update 25 the rate is 3e-3 * (1 - 24/48)
    assert "48 updates instead of 24" in note and "0.0015" in note and "0 under" in note
    shorter = cfg.replace(algo={"total_steps": 16 * 32 * 12})
    with pytest.raises(ValidationError) as info:
        resume_point(run["out"], shorter)
    assert info.value.parameter == "algo.total_steps"


@pytest.mark.parametrize("damage, name", [
    ("truncate", "runner.msgpack"), ("empty", "runner.msgpack"), ("delete", "runner.msgpack"),
    ("garbage", "runner.msgpack"),
])
def test_damaged_checkpoint_is_a_clear_error_naming_the_file(run, tmp_path, capsys, damage,
                                                             name):
    """Regression: a truncated, empty or missing runner.msgpack raised a
    traceback on --resume. (A damaged or missing meta.json no longer stops a
    resume: runner.msgpack holds the metadata, tests/train/test_run_folder_kills.py.)"""
    import shutil

    folder = tmp_path / "run"
    shutil.copytree(run["out"] / "checkpoint", folder / "checkpoint")
    shutil.copy(run["out"] / "config.yaml", folder / "config.yaml")
    path = folder / "checkpoint" / name
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "garbage":
        path.write_bytes(b"\x93\x01\x02\x03")
    else:
        path.unlink()
    code, _, err = _cli(["train", "--resume", str(folder)], capsys)
    assert code == 2, err
    assert err.startswith("plume-jax: error: ") and str(path) in err
    assert "Traceback" not in err


@pytest.fixture(scope="module")
def killed_and_resumed(run, tmp_path_factory):
    """The run as a kill would leave it between a metrics append and the next
    checkpoint: metrics of all 24 updates plus a torn line, the checkpoint at
    update 12, temporary files of an interrupted checkpoint write, no
    summary. Then ``plume-jax train --resume RUN`` (no --config)."""
    import contextlib
    import io
    import shutil

    folder = tmp_path_factory.mktemp("killed") / "run"
    shutil.copytree(run["out"], folder)
    shutil.rmtree(folder / "checkpoint")
    shutil.copytree(folder / "checkpoints" / "update_00000012", folder / "checkpoint")
    for name in ("summary.json", "metrics.csv", "learning_curve.png"):
        (folder / name).unlink()
    shutil.rmtree(folder / "policy")
    with (folder / "metrics.jsonl").open("a") as f:
        f.write('{"update": 25, "env_steps": 12')          # torn by the kill
    strays = [folder / "checkpoint" / ".runner.msgpack.tmp-k3j2h1g0",
              folder / "checkpoint" / "runner.msgpack.a1b2c3d4"]  # an older version's name
    for stray in strays:
        stray.write_bytes(b"partial")
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = main(["train", "--resume", str(folder)])
    return {"out": folder, "code": code, "stdout": buffer.getvalue(), "strays": strays}


def test_resume_after_a_kill_writes_every_update_once(run, killed_and_resumed):
    """Regression: a kill between the metrics append and the checkpoint
    duplicated update rows on resume."""
    out = killed_and_resumed["out"]
    assert killed_and_resumed["code"] == 0, killed_and_resumed["stdout"]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows] == list(range(1, NUM_UPDATES + 1))
    assert rows == run["rows"]  # and bit for bit the uninterrupted run's
    csv_rows = (out / "metrics.csv").read_text().splitlines()
    assert len(csv_rows) == NUM_UPDATES + 1


def test_resume_tolerates_a_torn_last_metrics_line_and_finishes_every_output(killed_and_resumed):
    """Regression: a partial last JSONL line made the resumed run train to the
    end and exit 1 without its summary, CSV or plot."""
    out = killed_and_resumed["out"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["resumed_at_update"] == 12 and summary["updates_this_call"] == 12
    assert summary["evaluation"]["success_rate"] == 1.0
    for name in ("metrics.csv", "learning_curve.png", "policy/policy.npz"):
        assert (out / name).is_file(), name
    assert "outputs in" in killed_and_resumed["stdout"]


def test_stray_temporary_checkpoint_files_left_by_a_kill_are_removed(killed_and_resumed):
    assert not any(p.exists() for p in killed_and_resumed["strays"])
    names = sorted(p.name for p in (killed_and_resumed["out"] / "checkpoint").iterdir())
    assert names == ["meta.json", "runner.msgpack"]


def test_tensorboard_events_hold_the_metrics_csv_scalars_once_per_update(run,
                                                                         killed_and_resumed):
    """TensorBoard files read back (tbparse) with the scalars of metrics.csv;
    the resumed run purged the events after its checkpoint, so every update
    is there once."""
    import csv

    from tbparse import SummaryReader

    with (run["out"] / "metrics.csv").open() as f:
        table = list(csv.DictReader(f))
    for folder in (run["out"], killed_and_resumed["out"]):
        scalars = SummaryReader(str(folder / "tensorboard")).scalars
        tags = set(scalars["tag"])
        assert {f"train/{c}" for c in table[0]} <= tags
        assert {"final/success_rate", "final/mean_ep_length"} <= tags
        success = scalars[scalars["tag"] == "train/success_rate"].sort_values("step")
        assert list(success["step"]) == [16 * 32 * u for u in range(1, NUM_UPDATES + 1)]
        np.testing.assert_allclose(success["value"], [float(r["success_rate"]) for r in table],
                                   rtol=1e-6)


def test_tensorboard_has_the_sb3_rollout_tags_and_the_hparams_table(run):
    """Issue 30: SB3 users look for rollout/ep_rew_mean, ep_len_mean and
    success_rate, and compare runs in TensorBoard's HPARAMS table; the run
    wrote only train/* and eval/* scalars."""
    import csv

    from tbparse import SummaryReader

    with (run["out"] / "metrics.csv").open() as f:
        table = list(csv.DictReader(f))
    reader = SummaryReader(str(run["out"] / "tensorboard"), extra_columns={"dir_name"})
    scalars = reader.scalars
    for column, tag in [("return_mean", "rollout/ep_rew_mean"),
                        ("length_mean", "rollout/ep_len_mean"),
                        ("success_rate", "rollout/success_rate")]:
        got = scalars[scalars["tag"] == tag].sort_values("step")
        want = [float(r[column]) for r in table if r[column] not in ("", "nan")]
        np.testing.assert_allclose(got["value"], want, rtol=1e-6)
    table_hp = reader.hparams
    names = set(table_hp["tag"])
    assert {"algo.learning_rate", "network.hidden_sizes", "run.seed", "env.id"} <= names
    assert "hparam/final/success_rate" in set(scalars["tag"])


def test_overwrite_replaces_the_run_and_intermediate_checkpoints_do_not_change_results(
        run, tmp_path, monkeypatch, capsys):
    """--overwrite deletes the earlier run's outputs (and only those) and
    trains afresh; this run writes no intermediate checkpoint (one chunk
    after the first update) and still reproduces the run that did, bit for
    bit. Also: --quiet prints no progress, --wandb logs to W&B (offline)."""
    import shutil

    folder = tmp_path / "run"
    shutil.copytree(run["out"], folder)
    (folder / "notes.txt").write_text("my notes")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    fake_wandb = None if _wandb_installed() else _install_fake_wandb(monkeypatch)
    code, out, err = _cli(["train", "--config", str(run["config"]), "--out", str(folder),
                           "--overwrite", "--quiet", "--set", "run.log_every=8",
                           "--set", "run.checkpoint_every=null",
                           "--set", "run.checkpoint_minutes=null",
                           "--wandb", "plume-jax-tests"], capsys)
    assert code == 0, err
    assert "[train]" not in out
    assert (folder / "notes.txt").read_text() == "my notes"
    assert not (folder / "checkpoints").exists()
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["checkpoints_written"] == 1 and "resumed_from" not in summary
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    assert rows == run["rows"]
    if fake_wandb is None:
        (wandb_file,) = (folder / "wandb").glob("offline-run-*/run-*.wandb")
        assert b"train/success_rate" in wandb_file.read_bytes()
    else:  # wandb is optional: the calls plume-jax makes, recorded
        assert fake_wandb.init_kwargs["project"] == "plume-jax-tests"
        assert any("train/success_rate" in logged for logged, _ in fake_wandb.logged)
        assert fake_wandb.finished


def _wandb_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("wandb") is not None


def _install_fake_wandb(monkeypatch):
    """A stand-in ``wandb`` module (W&B is an optional extra, not installed in
    CI) recording what plume-jax asks of it: ``init``, ``log``, ``finish``."""
    import importlib.machinery
    import sys
    import types

    class Run:
        def __init__(self, **kwargs):
            self.init_kwargs, self.logged, self.summary, self.finished = kwargs, [], {}, False

        def log(self, values, step=None):
            self.logged.append((dict(values), step))

        def finish(self):
            self.finished = True

    module = types.ModuleType("wandb")
    module.__spec__ = importlib.machinery.ModuleSpec("wandb", None)
    runs = []

    def init(**kwargs):
        runs.append(Run(**kwargs))
        return runs[-1]

    module.init = init
    monkeypatch.setitem(sys.modules, "wandb", module)

    class Recorder:
        def __getattr__(self, name):
            return getattr(runs[-1], name)

    return Recorder()

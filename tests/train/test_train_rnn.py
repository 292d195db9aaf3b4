"""``network.type: rnn`` (a vanilla tanh RNN, ``flax.linen.SimpleCell``; Singh
et al. 2023's other recurrent agent): its cell is flax's, its state is
zeroed at episode starts, and a tiny PPO training on the trivial Gaussian
preset of ``test_train_run`` trains, is deterministic, resumes, sweeps,
exports, and its exported policy acts as the training network and runs in
``plume-jax evaluate`` and the Gymnasium env. One CLI training (6 updates)
is shared by the module; each further training compiles its own program
(about 10 s each on 2 CPU cores; the sweep's, 19 s, is marked slow)."""

from __future__ import annotations

import contextlib
import io
import json

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml
from flax import traverse_util

import plume_jax
from agents import make_agent
from agents.actor_critic import simple_cell
from agents.trained import TrainedAgent, TrainedPolicy, initial_carry
from plume_jax.cli import main
from plume_jax.train.algorithms import networks
from plume_jax.train.algorithms.ppo import PPO, Hparams, ppo_static
from plume_jax.train.checkpoint import load_checkpoint
from plume_jax.train.config import NetworkConfig, load_train_config
from plume_jax.train.run import train

TRIVIAL_ENV = {"grid_size": [16, 16], "sigma": 4.0, "goal_radius": 1.5, "max_steps": 40,
               "start": {"type": "fixed", "position": [4, 7]}}
NUM_UPDATES = 6
CONFIG = {
    "env": {"id": "PlumeNav-Gaussian-v0", "overrides": TRIVIAL_ENV},
    "algo": {"total_steps": 16 * 32 * NUM_UPDATES, "num_envs": 16, "num_steps": 32,
             "update_epochs": 2, "num_minibatches": 2, "learning_rate": 3e-3,
             "normalize_obs": True, "ent_coef": 0.0},
    "network": {"type": "rnn", "hidden_sizes": [16, 16], "rnn_size": 8, "prev_action": True,
                "obs_delta": True},
    "run": {"seed": 0, "log_every": 2, "checkpoint_every": 3, "tensorboard": False},
    "eval": {"num_envs": 32},
}


def _random_params(net: networks.ActorCritic, in_dim: int, seed: int = 1):
    """Parameters of the right shapes, every entry random (biases too)."""
    shapes = jax.eval_shape(lambda k: networks.init_params(net, k, in_dim), jax.random.key(0))
    rng = np.random.default_rng(seed)
    return jax.tree.map(lambda x: jnp.asarray(rng.normal(0.0, 0.5, x.shape), jnp.float32),
                        shapes)


def test_the_rnn_cell_is_flax_simple_cell():
    """The exported forward pass's cell (``agents.actor_critic.simple_cell``,
    no flax) is ``flax.linen.SimpleCell`` on the same parameters, and the
    network declares SimpleCell's names under ``rnn/cell``."""
    cell = nn.SimpleCell(5)
    x = jax.random.normal(jax.random.key(1), (3, 4))
    h = jax.random.normal(jax.random.key(2), (3, 5))
    variables = cell.init(jax.random.key(3), h, x)
    flat = {f"rnn/cell/{k}": v for k, v in
            traverse_util.flatten_dict(variables["params"], sep="/").items()}
    expected, _ = cell.apply(variables, h, x)
    np.testing.assert_allclose(simple_cell(flat, h, x), expected, rtol=1e-6, atol=1e-7)
    net = networks.ActorCritic(NetworkConfig(type="rnn", hidden_sizes=(6, 6), rnn_size=5), 3,
                               True)
    names = traverse_util.flatten_dict(_random_params(net, 4)["params"], sep="/")
    assert {k for k in names if k.startswith("rnn/")} == set(flat)
    assert names["rnn/cell/h/kernel"].shape == (5, 5) and names["embed/kernel"].shape == (4, 6)


def test_rnn_state_is_zeroed_at_episode_starts():
    """Row 0 starts an episode at t = 3: from there its outputs are those of
    the network run afresh on ``x[3:]`` (zero state), whatever state it
    carried; row 1 does not, and its outputs depend on the carried state
    (so the first check is not vacuous)."""
    cfg = NetworkConfig(type="rnn", hidden_sizes=(8, 8), rnn_size=6)
    net = networks.ActorCritic(cfg, 3, True)
    params = _random_params(net, 2)
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(6, 2, 2)), jnp.float32)
    hidden = jnp.asarray(rng.normal(size=(2, 6)), jnp.float32)
    starts = np.zeros((6, 2), bool)
    starts[3, 0] = True
    fresh_start = np.zeros((3, 2), bool)
    fresh_start[0] = True

    @jax.jit  # both passes in one program: one compile, not one per eager scan
    def both(params, hidden, x, starts, fresh_start):
        return (networks.apply_network(net, params, hidden, x, starts),
                networks.apply_network(net, params, jnp.zeros_like(hidden), x[3:], fresh_start))

    (_, (logits, _), value), (_, (fresh, _), fresh_value) = both(
        params, hidden, x, jnp.asarray(starts), jnp.asarray(fresh_start))
    np.testing.assert_allclose(logits[3:, 0], fresh[:, 0], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(value[3:, 0], fresh_value[:, 0], rtol=1e-6, atol=1e-6)
    assert np.abs(np.asarray(logits[3:, 1]) - np.asarray(fresh[:, 1])).max() > 1e-3


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """``plume-jax train`` of the rnn on the trivial preset, through the CLI
    (checkpoints at updates 3 and 6)."""
    folder = tmp_path_factory.mktemp("train_rnn")
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    out = folder / "out"
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(["train", "--config", str(path), "--out", str(out), "--quiet"])
    assert code == 0, stdout.getvalue() + stderr.getvalue()
    cfg = load_train_config(path)
    env, params = cfg.make_env()
    algo = PPO(env, params, ppo_static(cfg))
    hp = Hparams.create(learning_rate=1e-3, ent_coef=0.0, vf_coef=0.5, gamma=0.99,
                        gae_lambda=0.95, clip_eps=0.2, max_grad_norm=0.5)
    template = jax.eval_shape(algo.init, jax.random.key(0), hp, params)
    runner, _ = load_checkpoint(out / "checkpoint", template)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return {"out": out, "config": cfg, "algo": algo, "runner": runner, "rows": rows,
            "summary": json.loads((out / "summary.json").read_text())}


def _same_params(a, b) -> bool:
    return all(np.array_equal(np.asarray(x), np.asarray(y))
               for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True))


def test_rnn_training_exports_an_rnn_policy(run):
    spec = json.loads((run["out"] / "policy" / "policy.json").read_text())
    assert spec["network"]["type"] == "rnn" and spec["network"]["rnn_size"] == 8
    arrays = np.load(run["out"] / "policy" / "policy.npz")
    assert arrays["rnn/cell/h/kernel"].shape == (8, 8)
    assert not any(name.startswith("gru/") for name in arrays.files)
    assert [r["update"] for r in run["rows"]] == list(range(1, NUM_UPDATES + 1))
    assert run["summary"]["evaluation"]["success_rate"] > 0.5  # 3 cells from the source


@pytest.mark.slow
def test_rnn_training_is_deterministic(run):
    """The same config and seed train the same parameters, bit for bit."""
    again = train(run["config"], None, progress=False, evaluate=False)
    assert _same_params(again.runner.params, run["runner"].params)
    assert again.rows == run["rows"]


def test_rnn_training_resumes_exactly(run, tmp_path):
    resumed = train(run["config"], tmp_path, progress=False, evaluate=False,
                    resume=run["out"] / "checkpoints" / "update_00000003")
    assert [r["update"] for r in resumed.rows] == list(range(4, NUM_UPDATES + 1))
    assert _same_params(resumed.runner.params, run["runner"].params)


def _greedy_actions_of_the_training_network(algo, runner, obs_seq, starts):
    """The training code's per-step computation (features, normalisation,
    previous action, network step) over one env's sequence, acting greedily."""

    @jax.jit
    def rollout(params, stats, obs_seq, starts):
        hidden = jnp.zeros((1, algo.hidden_dim), jnp.float32)
        prev_action = jnp.zeros((1,), jnp.int32)
        prev_tobs = jnp.zeros((1, algo.obs_dim), jnp.float32)
        actions = []
        for t in range(obs_seq.shape[0]):
            start = starts[t][None]
            tobs = algo.preprocess(obs_seq[t][None])
            x = algo.net_input(algo.features(tobs, prev_tobs, start), stats, prev_action, start)
            hidden, dist, _ = algo.step_net(params, hidden, x, start)
            prev_action, prev_tobs = networks.mode(True, dist), tobs
            actions.append(prev_action[0])
        return jnp.stack(actions)

    return np.asarray(rollout(runner.params, runner.obs_stats, jnp.asarray(obs_seq),
                              jnp.asarray(starts)))


def test_exported_rnn_policy_acts_as_the_training_network(run):
    """Over a sequence with an episode boundary (the carried state matters),
    the policy loaded from disk takes the training network's greedy actions."""
    rng = np.random.default_rng(2)
    obs_seq = rng.uniform(0.0, 1.0, (12, 1)).astype(np.float32)
    starts = np.zeros(12, bool)
    starts[[0, 7]] = True
    expected = _greedy_actions_of_the_training_network(run["algo"], run["runner"], obs_seq,
                                                       starts)
    policy = TrainedPolicy.load(run["out"] / "policy")
    act = jax.jit(policy.act)
    carry, got = initial_carry(policy.spec), []
    for t in range(12):
        if starts[t]:
            carry = initial_carry(policy.spec)
        action, carry = act(carry, obs_seq[t], jax.random.key(0))
        got.append(int(action))
    assert got == expected.tolist()
    assert carry.hidden.shape == (8,) and np.abs(np.asarray(carry.hidden)).max() > 0


def test_exported_rnn_policy_runs_in_evaluate_and_the_gymnasium_env(run, tmp_path):
    from plume_jax.gym import PlumeGymEnv

    scenario = tmp_path / "trivial.yaml"
    scenario.write_text(yaml.safe_dump({
        "name": "trivial", "env": {"preset": "PlumeNav-Gaussian-v0", "overrides": TRIVIAL_ENV},
        "agent": "random_walk", "episodes": 8, "seed": 1}))
    out = tmp_path / "eval"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main(["evaluate", "--scenario", str(scenario), "--agent", "trained",
                     "--agent-param", f"path={run['out'] / 'policy'}", "--out", str(out)])
    assert code == 0
    (report,) = [json.loads(p.read_text()) for p in out.glob("*.json")
                 if "metrics" in json.loads(p.read_text())]
    assert report["metrics"]["episodes"] == 8 and report["metrics"]["success_rate"] > 0.5
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", **TRIVIAL_ENV)
    policy = make_agent("trained", env, path=str(run["out"] / "policy"))
    agent = TrainedAgent(policy)
    genv = PlumeGymEnv(env, params)
    obs, info = genv.reset(seed=0)
    agent.reset()
    for _ in range(40):
        obs, _, terminated, truncated, info = genv.step(agent.act(obs))
        if terminated or truncated:
            break
    genv.close()
    assert terminated and info["goal_reached"]


@pytest.mark.slow  # 19 s on 2 cores (its own vmapped program); the default run's longest is ~15 s
def test_an_rnn_sweep_trains_every_member(tmp_path):
    """A 2-member sweep (seeds 0, 1) of 2 updates: one vmapped program; each
    member's exported policy is an rnn policy that loads and acts."""
    base = {**CONFIG, "algo": {**CONFIG["algo"], "total_steps": 16 * 32 * 2},
            "run": {**CONFIG["run"], "checkpoint_every": None}}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"base": base, "grid": {"run.seed": [0, 1]}}))
    out = tmp_path / "sweep"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["sweep", "--config", str(path), "--out", str(out), "--quiet"]) == 0
    policies = sorted(out.glob("members/*/policy"))
    assert len(policies) == 2
    loaded = [TrainedPolicy.load(p) for p in policies]
    assert all(p.spec["network"]["type"] == "rnn" for p in loaded)
    assert not _same_params(loaded[0].params, loaded[1].params)  # two seeds
    action, _ = loaded[0].act(initial_carry(loaded[0].spec), np.zeros(1, np.float32),
                              jax.random.key(0))
    assert 0 <= int(action) < 5

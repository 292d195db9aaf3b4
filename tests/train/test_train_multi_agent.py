"""PPO on multi-agent envs (``plume_jax.envs.multi_agent.MultiAgentPlumeEnv``):
one network shared by every agent, per-agent rewards, values and GAE, the
episode boundary from the env's ``done_mode``, frozen agents masked out of
the loss, a centralised critic as an option; the exported policy as the
``trained`` agent of ``plume-jax evaluate`` and in the PettingZoo env.

Small Gaussian envs keep compile times down; the swarm preset itself is
trained in the slow tests."""

from __future__ import annotations

import contextlib
import io
import json
import math
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml

import plume_jax
from plume_jax.core.errors import ValidationError
from plume_jax.envs.multi_agent import MultiAgentPlumeEnv
from plume_jax.train.algorithms import networks
from plume_jax.train.config import NetworkConfig, train_config
from plume_jax.train.algorithms.ppo import PPO, Hparams, PPOStatic, agent_boundaries
from plume_jax.train.algorithms.returns import gae

CONFIGS = pathlib.Path(__file__).resolve().parents[2] / "configs"
SMALL = {"grid_size": [16, 16], "sigma": 4.0, "goal_radius": 1.5, "max_steps": 30}
HP = dict(learning_rate=3e-3, ent_coef=0.01, vf_coef=0.5, gamma=0.95, gae_lambda=0.9,
          clip_eps=0.2, max_grad_norm=0.5)


def _hp(**over) -> Hparams:
    return Hparams.create(**{**HP, **over})


def _static(network: NetworkConfig, num_updates: int = 3, **over) -> PPOStatic:
    values = dict(num_envs=4, num_steps=16, update_epochs=2, num_minibatches=2,
                  num_updates=num_updates, normalize_obs=True, network=network)
    return PPOStatic(**{**values, **over})


def _train(env, params, static, seed=0):
    algo = PPO(env, params, static)
    hp = _hp()
    # init and run as one program: one compile
    runner, metrics = jax.jit(lambda k: algo.run(algo.init(k, hp, params), hp, params,
                                                 static.num_updates))(jax.random.key(seed))
    return algo, jax.device_get(runner), jax.device_get(metrics)


# --------------------------------------------------------------- one agent
NETS = {
    "mlp": NetworkConfig(hidden_sizes=(16, 16), obs_transform="log", obs_delta=True,
                         prev_action=True),
    "gru": NetworkConfig(type="gru", hidden_sizes=(16, 16), gru_size=8, obs_delta=True,
                         prev_action=True),
}


@pytest.fixture(scope="module", params=[
    pytest.param(name, marks=pytest.mark.slow) if name == "gru" else name
    for name in sorted(NETS)])
def one_agent_runs(request):
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", **SMALL)
    ma_env = MultiAgentPlumeEnv.from_env(env, num_agents=1)
    static = _static(NETS[request.param])
    return _train(env, params, static), _train(ma_env, params, static)


def test_one_agent_env_trains_like_the_single_agent_env(one_agent_runs):
    """A MultiAgentPlumeEnv with one agent ([N, 1] observations, rewards and
    flags) gives single-agent PPO's first updates, to float tolerance."""
    (_, single_runner, single), (ma_algo, ma_runner, multi) = one_agent_runs
    assert ma_algo.multi_agent and ma_algo.num_agents == 1
    assert np.all(np.isfinite(single["loss"]))
    assert np.nansum(single["episodes"]) > 0  # episodes ended: boundaries were exercised
    for name in single:
        np.testing.assert_allclose(multi[name], single[name], rtol=1e-4, atol=1e-6,
                                   err_msg=name)
    for a, b in zip(jax.tree.leaves(ma_runner.params), jax.tree.leaves(single_runner.params)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert set(multi) - set(single) == {"agent_steps", "first_arrival_mean", "arrivals_mean",
                                        "collisions_mean"}


# --------------------------------------------------------------- boundaries
def test_agent_boundaries_on_constructed_cases():
    """Rows: env 0 goes on (agent 1 arrived: terminated, agent 0 continues);
    env 1's episode ended at a teammate's arrival (every agent terminated);
    env 2 hit the time limit (the arrived agent terminated, the others
    truncated)."""
    terminated = np.asarray([[False, True, False], [True, False, False], [True, False, False]])
    truncated = np.asarray([[False, False, False], [False, False, False], [False, True, True]])
    done = np.asarray([False, True, True])
    term, trunc = jax.device_get(agent_boundaries(terminated, truncated, done))
    np.testing.assert_array_equal(term, [[False, True, False], [True, True, True],
                                         [True, False, False]])
    np.testing.assert_array_equal(trunc, truncated)
    # one agent: the single-agent rule (terminated wins over truncated)
    term, trunc = agent_boundaries(np.asarray([[True], [False], [False]]),
                                   np.asarray([[True], [True], [False]]),
                                   np.asarray([True, True, False]))
    np.testing.assert_array_equal(term[:, 0], [True, False, False])
    np.testing.assert_array_equal(trunc[:, 0], [False, True, False])


def test_outcome_of_a_constructed_step():
    """Per-row flags and per-env team metrics of one batched step: env 0
    (done_mode all) has agent 0 arrived before and agent 2 arriving now;
    env 1's first agent arrives and ends the episode."""
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", **SMALL)
    env = MultiAgentPlumeEnv.from_env(env, num_agents=3)
    algo = PPO(env, params, _static(NETS["mlp"], num_envs=2))
    terminated = jnp.asarray([[True, False, True], [False, True, False]])
    info = {"done": jnp.asarray([False, True]), "goal_reached": terminated,
            "blocked": jnp.asarray([[True, True, False], [False, False, True]])}
    arrived = jnp.asarray([True, False, False, False, False, False])
    out = jax.device_get(algo.outcome(jnp.ones((2, 3)), terminated, jnp.zeros((2, 3), bool),
                                      info, arrived))
    np.testing.assert_array_equal(out["terminated"], [1, 0, 1, 1, 1, 1])
    np.testing.assert_array_equal(out["truncated"], np.zeros(6))
    np.testing.assert_array_equal(out["done"], [0, 0, 0, 1, 1, 1])
    np.testing.assert_array_equal(out["arrived"], [1, 0, 1, 0, 0, 0])
    np.testing.assert_array_equal(out["success"], [False, True])
    np.testing.assert_array_equal(out["first_arrival"], [False, True])
    np.testing.assert_array_equal(out["arrivals"], [2, 1])
    np.testing.assert_array_equal(out["blocked"], [2, 1])


TINY = {"grid_size": [6, 6], "sigma": 2.0, "goal_radius": 1.5, "max_steps": 12}
AGENTS = 3


@pytest.fixture(scope="module", params=["all", "any"])
def tiny_rollout(request):
    """One rollout of the untrained policy on a 6x6 grid with 3 agents, where
    agents arrive at different times and the time limit also ends episodes;
    and the env's own outputs for the same steps, replayed with the
    rollout's keys and actions through ``vmap(env.step)``."""
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", **TINY)
    env = MultiAgentPlumeEnv.from_env(env, num_agents=AGENTS, done_mode=request.param)
    num_envs, num_steps = 8, 48
    algo = PPO(env, params, _static(NETS["mlp"], num_envs=num_envs, num_steps=num_steps))
    hp = _hp()

    @jax.jit
    def run(init_key):
        runner = algo.init(init_key, hp, params)  # in the same program: one compile
        key = jax.random.key(1)
        _, traj, last = algo.rollout(runner, hp, params, key)
        adv, target = gae(traj.reward, traj.value, traj.terminated, traj.truncated,
                          traj.final_value, last, hp.gamma, hp.gae_lambda)

        def replay(state, inp):
            k, action = inp
            _, k_env = jax.random.split(k)
            _, state, reward, term, trunc, info = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                jax.random.split(k_env, num_envs), state, jnp.reshape(action, (num_envs, -1)),
                params)
            return state, (reward, term, trunc, info["done"])

        _, raw = jax.lax.scan(replay, runner.env_state,
                              (jax.random.split(key, num_steps), traj.action))
        return traj, last, adv, target, raw, algo.episode_metrics(traj, jnp.asarray(1))

    traj, last, adv, target, raw, metrics = jax.device_get(run(jax.random.key(0)))
    return request.param, traj, last, adv, target, raw, metrics


def test_gae_per_agent_follows_the_done_mode(tiny_rollout):
    """Per-agent advantages equal a reference recursion over the env's own
    outputs: an agent's return ends at its arrival or when the team's
    episode ends (no bootstrap), or at the time limit (bootstrap from the
    final observation); an arrived agent waiting for its team (done_mode
    "all") is frozen, earns nothing and is masked out of the loss."""
    done_mode, traj, last, adv, target, raw, _ = tiny_rollout
    reward, term, trunc, done = raw   # [T, N, A], [T, N, A], [T, N, A], [T, N]
    steps, num_envs = done.shape
    rows = num_envs * AGENTS
    np.testing.assert_allclose(traj.reward, reward.reshape(steps, rows))  # same steps
    g, lam = HP["gamma"], HP["gae_lambda"]
    ref = np.zeros((steps, rows))
    frozen = np.zeros((steps, rows), bool)
    for n in range(num_envs):
        for a in range(AGENTS):
            r = n * AGENTS + a
            arrived = False
            for t in range(steps):
                frozen[t, r] = arrived
                arrived = bool(term[t, n, a]) and not done[t, n]
            nxt = 0.0
            for t in reversed(range(steps)):
                if trunc[t, n, a] and not term[t, n, a]:    # time limit
                    boot, stop = traj.final_value[t, r], True
                elif term[t, n, a] or done[t, n]:           # arrived, or the team's end
                    boot, stop = 0.0, True
                else:
                    boot, stop = (traj.value[t + 1, r] if t + 1 < steps else last[r]), False
                nxt = reward[t, n, a] + g * boot - traj.value[t, r] + (
                    0.0 if stop else g * lam * nxt)
                ref[t, r] = nxt
    np.testing.assert_allclose(adv, ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(target, adv + traj.value, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(traj.active, ~frozen)
    assert np.all(reward.reshape(steps, rows)[frozen] == 0.0)
    # the rollout exercised what the test is about
    team_end = done & ~trunc.any(axis=2)
    assert team_end.any() and (done & trunc.any(axis=2)).any()
    if done_mode == "all":
        assert frozen.any()   # agents that arrived waited for their team
    else:
        assert not frozen.any()
        # some episode ended at an arrival with teammates still searching
        assert (team_end & ~term.all(axis=2)).any()


@pytest.mark.parametrize("tiny_rollout", ["all"], indirect=True)  # frozen agents exist only there
def test_frozen_agents_do_not_change_the_loss(tiny_rollout):
    """Whatever is stored for an agent's frozen steps (inputs, actions,
    advantages) leaves the loss and its gradient unchanged."""
    done_mode, traj, last, adv, target, raw, _ = tiny_rollout
    assert done_mode == "all"
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", **TINY)
    env = MultiAgentPlumeEnv.from_env(env, num_agents=AGENTS, done_mode="all")
    algo = PPO(env, params, _static(NETS["mlp"], num_envs=8, num_steps=48))
    net_params = networks.init_params(algo.net, jax.random.key(2), algo.in_dim)
    flat = lambda a: jnp.reshape(jnp.asarray(a), (-1,) + np.shape(a)[2:])  # noqa: E731
    mb = {"x": flat(traj.x), "start": flat(traj.start), "action": flat(traj.action),
          "logp": flat(traj.logp), "value": flat(traj.value), "adv": flat(adv),
          "target": flat(target), "mask": flat(traj.active.astype(np.float32))}
    frozen = ~np.asarray(mb["mask"], bool)
    assert frozen.any()
    noisy = dict(mb)
    rng = np.random.default_rng(0)
    for name in ("x", "adv", "target", "logp", "value"):
        noise = rng.normal(0.0, 5.0, np.shape(mb[name])).astype(np.float32)
        where = frozen.reshape((-1,) + (1,) * (np.ndim(mb[name]) - 1))
        noisy[name] = jnp.where(where, mb[name] + noise, mb[name])
    noisy["action"] = jnp.where(frozen, (mb["action"] + 1) % algo.action_dim, mb["action"])
    grad = jax.jit(jax.value_and_grad(algo.loss, has_aux=True))
    (l1, aux1), g1 = grad(net_params, mb, _hp())
    (l2, aux2), g2 = grad(net_params, noisy, _hp())
    np.testing.assert_allclose(l1, l2, rtol=1e-5, atol=1e-7)
    for a, b in zip(jax.tree.leaves((aux1, g1)), jax.tree.leaves((aux2, g2))):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_team_metrics_of_a_rollout(tiny_rollout):
    """Per-update team metrics, from the env's own outputs."""
    done_mode, traj, last, adv, target, raw, metrics = tiny_rollout
    reward, term, trunc, done = raw
    episodes = done.sum()
    assert metrics["episodes"] == episodes
    np.testing.assert_allclose(metrics["success_rate"],
                               (done & ~trunc.any(axis=2)).sum() / episodes, rtol=1e-6)
    np.testing.assert_allclose(metrics["arrivals_mean"],
                               (term.sum(axis=2) * done).sum() / episodes, rtol=1e-6)
    if done_mode == "all":  # success: every agent arrived
        assert np.all(term.all(axis=2)[done & ~trunc.any(axis=2)])
    assert 0 < metrics["first_arrival_mean"] <= TINY["max_steps"]
    assert metrics["collisions_mean"] == 0.0  # collisions are off in this env


# --------------------------------------------------------------- sharing
def _rows(rng, envs, agents, dim):
    return jnp.asarray(rng.normal(0.0, 1.0, (1, envs * agents, dim)).astype(np.float32))


def test_every_agent_acts_through_one_set_of_weights():
    """The network of a 3-agent env has exactly the single-agent network's
    parameters (same tree, same shapes; from the same key, the same values),
    and an agent's action distribution depends on its own input only."""
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", **SMALL)
    multi = MultiAgentPlumeEnv.from_env(env, num_agents=3)
    net = NETS["gru"]
    single_algo = PPO(env, params, _static(net))
    multi_algo = PPO(multi, params, _static(net))
    a = networks.init_params(single_algo.net, jax.random.key(0), single_algo.in_dim)
    b = networks.init_params(multi_algo.net, jax.random.key(0), multi_algo.in_dim)
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(x, y)
    rng = np.random.default_rng(0)
    x = _rows(rng, 2, 3, multi_algo.in_dim)
    hidden = jnp.zeros((6, multi_algo.hidden_dim))
    starts = jnp.ones((1, 6), bool)
    _, (logits, _), value = multi_algo.net.apply(b, hidden, x, starts)
    # the same rows one at a time through the single-agent network (compiled once)
    single = jax.jit(single_algo.net.apply)
    for r in range(6):
        _, (lr, _), vr = single(a, hidden[r:r + 1], x[:, r:r + 1], starts[:, :1])
        np.testing.assert_allclose(logits[0, r], lr[0, 0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(value[0, r], vr[0, 0], rtol=1e-5, atol=1e-6)


def test_gradient_comes_from_every_agent():
    """One update's gradient is the mask-weighted sum of the gradients of each
    agent's transitions alone (advantages not normalised, so the per-agent
    terms separate), and every agent's part is non-zero."""
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", **SMALL)
    multi = MultiAgentPlumeEnv.from_env(env, num_agents=3)
    algo = PPO(multi, params, _static(NETS["mlp"], normalize_advantages=False, clip_value=False))
    net_params = networks.init_params(algo.net, jax.random.key(1), algo.in_dim)
    rng = np.random.default_rng(1)
    rows = 8 * 3
    mb = {"x": jnp.asarray(rng.normal(size=(rows, algo.in_dim)).astype(np.float32)),
          "start": jnp.zeros(rows, bool),
          "action": jnp.asarray(rng.integers(0, algo.action_dim, rows).astype(np.int32)),
          "logp": jnp.asarray(np.full(rows, -1.6, np.float32)),
          "value": jnp.zeros(rows), "adv": jnp.asarray(rng.normal(size=rows).astype(np.float32)),
          "target": jnp.asarray(rng.normal(size=rows).astype(np.float32)),
          "mask": jnp.ones(rows)}
    grad = jax.jit(jax.grad(lambda p, m: algo.loss(p, m, _hp(ent_coef=0.0))[0]))
    total = grad(net_params, mb)
    agent = np.arange(rows) % 3
    parts = [grad(net_params, {**mb, "mask": jnp.asarray((agent == i).astype(np.float32))})
             for i in range(3)]
    combined = jax.tree.map(lambda *g: sum(g) / 3.0, *parts)
    for t, c in zip(jax.tree.leaves(total), jax.tree.leaves(combined)):
        np.testing.assert_allclose(t, c, rtol=1e-4, atol=1e-6)
    for part in parts:
        assert max(float(np.max(np.abs(g))) for g in jax.tree.leaves(part)) > 1e-4
    assert not np.allclose(jax.tree.leaves(parts[0])[0], jax.tree.leaves(parts[1])[0])


# --------------------------------------------------------------- centralised critic
def test_joint_features_put_the_acting_agent_first_then_the_others_in_order():
    feats = jnp.arange(2 * 3 * 2, dtype=jnp.float32).reshape(1, 6, 2)  # 2 envs x 3 agents
    joint = np.asarray(networks.joint_features(feats, 3))[0]
    f = np.asarray(feats)[0]
    for env_index in range(2):
        for i in range(3):
            expect = np.concatenate([f[env_index * 3 + (i + j) % 3] for j in range(3)])
            np.testing.assert_array_equal(joint[env_index * 3 + i], expect)


@pytest.mark.parametrize("kind", sorted(NETS))
def test_centralised_value_reads_the_team_and_the_actor_only_its_agent(kind):
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", **SMALL)
    multi = MultiAgentPlumeEnv.from_env(env, num_agents=3)
    net = NetworkConfig(**{**NETS[kind].__dict__, "critic": "centralised"})
    algo = PPO(multi, params, _static(net))
    p = networks.init_params(algo.net, jax.random.key(0), algo.in_dim)
    rng = np.random.default_rng(0)
    x = _rows(rng, 2, 3, algo.in_dim)
    hidden = jnp.zeros((6, algo.hidden_dim))
    starts = jnp.ones((1, 6), bool)
    apply = jax.jit(algo.net.apply)  # one compile for both inputs
    _, (logits, _), value = apply(p, hidden, x, starts)
    changed = x.at[0, 1].add(3.0)  # env 0, agent 1
    _, (logits2, _), value2 = apply(p, hidden, changed, starts)
    moved = np.abs(np.asarray(value2 - value))[0] > 1e-6
    np.testing.assert_array_equal(moved, [True, True, True, False, False, False])
    same_logits = np.all(np.isclose(logits2, logits), axis=-1)[0]
    np.testing.assert_array_equal(same_logits, [True, False, True, True, True, True])
    # the critic's first layer takes the whole team's features
    width = 3 * (algo.in_dim if kind == "mlp" else net.gru_size)
    assert p["params"]["critic_0"]["kernel"].shape[0] == width


def test_centralised_critic_is_refused_for_a_single_agent_before_compiling():
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", **SMALL)
    net = NetworkConfig(critic="centralised")
    for one in (env, MultiAgentPlumeEnv.from_env(env, num_agents=1)):
        with pytest.raises(ValidationError, match="network.critic"):
            PPO(one, params, _static(net))
    data = {"env": {"id": "PlumeNav-Gaussian-v0", "overrides": SMALL},
            "algo": {"total_steps": 4 * 16, "num_envs": 4, "num_steps": 16},
            "network": {"critic": "centralised"}}
    from plume_jax.train.run import train

    with pytest.raises(ValidationError, match="centralised critic"):
        train(train_config(data), None, progress=False, evaluate=False)
    with pytest.raises(ValidationError, match="network.critic"):
        train_config({**data, "network": {"critic": "global"}})


# --------------------------------------------------------------- end to end
TEAM = {**SMALL, "num_agents": 3, "done_mode": "any", "collisions": True}
E2E_UPDATES = 6
E2E = {
    "env": {"id": "PlumeNav-Gaussian-v0", "overrides": TEAM},
    "algo": {"total_steps": 8 * 16 * E2E_UPDATES, "num_envs": 8, "num_steps": 16,
             "update_epochs": 2, "num_minibatches": 2, "learning_rate": 3e-3,
             "normalize_obs": True},
    "network": {"type": "gru", "hidden_sizes": [16, 16], "gru_size": 8, "obs_delta": True,
                "prev_action": True, "critic": "centralised"},
    "run": {"seed": 0, "log_every": 3},
    "eval": {"num_envs": 64},
}


def _cli(args):
    from plume_jax.cli import main

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = main(args)
    return code, buffer.getvalue()


@pytest.fixture(scope="module")
def team_run(tmp_path_factory):
    """``plume-jax train`` on a 3-agent env (GRU, centralised critic), through the CLI."""
    folder = tmp_path_factory.mktemp("team")
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(E2E))
    out = folder / "out"
    code, stdout = _cli(["train", "--config", str(path), "--out", str(out)])
    assert code == 0, stdout
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return {"out": out, "stdout": stdout, "rows": rows, "folder": folder,
            "summary": json.loads((out / "summary.json").read_text())}


@pytest.mark.slow
def test_training_a_multi_agent_env_reports_team_metrics(team_run):
    """The crash of issue 15 (any multi-agent env in the trainer) is gone, and
    metrics.csv, summary.json and the printed summary speak of the team."""
    rows, summary = team_run["rows"], team_run["summary"]
    assert [r["update"] for r in rows] == list(range(1, E2E_UPDATES + 1))
    header = (team_run["out"] / "metrics.csv").read_text().splitlines()[0].split(",")
    for name in ("agent_steps", "first_arrival_mean", "arrivals_mean", "collisions_mean",
                 "success_rate"):
        assert name in header
    assert rows[-1]["agent_steps"] == 3 * rows[-1]["env_steps"]
    assert any(r["episodes"] for r in rows)
    assert summary["num_agents"] == 3 and summary["agent_steps_per_second_excl_compile"] > 0
    ev = summary["evaluation"]
    assert ev["episodes"] == 64 and 0.0 <= ev["success_rate"] <= 1.0
    for name in ("first_arrival_rate", "mean_arrivals", "mean_collisions"):
        assert name in ev
    # done_mode "any": success is the first arrival
    assert ev["first_arrival_rate"] == ev["success_rate"]
    assert "first arrival" in team_run["stdout"] or ev["mean_steps_to_first_arrival"] is None
    spec = json.loads((team_run["out"] / "policy" / "policy.json").read_text())
    assert spec["num_agents"] == 3 and spec["network"]["critic"] == "centralised"


@pytest.mark.slow
def test_exported_team_policy_acts_like_the_training_network(team_run):
    """Every agent's action from the exported policy (run per agent by
    ``make_agent("trained", env)``) is the argmax of the training network's
    logits for that agent's row."""
    from agents import make_agent
    from plume_jax.train.checkpoint import load_checkpoint
    from plume_jax.train.algorithms.ppo import ppo_static

    cfg = train_config(E2E)
    env, params = cfg.make_env()
    algo = PPO(env, params, ppo_static(cfg))
    template = jax.eval_shape(algo.init, jax.random.key(0), _hp(), params)
    runner, _ = load_checkpoint(team_run["out"] / "checkpoint", template)
    obs, _ = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(jax.random.key(5), 4),
                                                     params)
    rows = algo.rows // algo.static.num_envs * 4
    start = jnp.ones(rows, bool)
    feat = algo.features(algo.preprocess(algo.to_rows(obs)), jnp.zeros((rows, algo.obs_dim)),
                         start)
    x = algo.net_input(feat, runner.obs_stats, jnp.zeros(rows, jnp.int32), start)
    _, (logits, _), _ = algo.step_net(runner.params, jnp.zeros((rows, algo.hidden_dim)), x, start)
    policy = make_agent("trained", env, path=str(team_run["out"] / "policy"))
    carry = jax.vmap(policy.init)(jax.random.split(jax.random.key(0), 4))
    actions, _ = jax.vmap(policy.act)(carry, obs, jax.random.split(jax.random.key(1), 4))
    np.testing.assert_array_equal(np.asarray(actions).reshape(-1),
                                  np.argmax(np.asarray(logits), axis=-1))
    from agents.trained import TrainedPolicy

    with pytest.raises(ValidationError, match="centralised"):
        TrainedPolicy.load(team_run["out"] / "policy").value(carry, obs[0, 0])


@pytest.mark.slow
def test_plume_jax_evaluate_runs_the_trained_team_policy(team_run):
    """``plume-jax evaluate --agent trained`` on a multi-agent scenario gives
    the trainer's own greedy evaluation of the same seed: both reset the envs
    from the first key of the seed's split, and the greedy policy on the
    noiseless Gaussian plume is deterministic, so the episodes are the same."""
    folder = team_run["folder"]
    ev = team_run["summary"]["evaluation"]
    scenario = {"name": "team", "env": {"preset": "PlumeNav-Gaussian-v0", "overrides": TEAM},
                "agent": {"name": "cast_and_surge"}, "episodes": ev["episodes"],
                "seed": ev["seed"]}
    (folder / "team.yaml").write_text(yaml.safe_dump(scenario))
    policy = team_run["out"] / "policy"
    code, stdout = _cli(["evaluate", "--scenario", str(folder / "team.yaml"), "--agent",
                         "trained", "--agent-param", f"path={policy}", "--out",
                         str(folder / "eval")])
    assert code == 0, stdout
    report = json.loads((folder / "eval" / "team__trained.json").read_text())
    metrics = report.get("metrics", report)
    assert metrics["successes"] == ev["successes"], (metrics, ev)
    if ev["successes"]:
        assert math.isclose(metrics["mean_steps"], ev["mean_steps_to_first_arrival"],
                            rel_tol=1e-9)


@pytest.mark.slow
def test_trained_agents_act_in_the_pettingzoo_env(team_run):
    """docs/training.md's example: one ``TrainedAgent`` per PettingZoo agent,
    each from its own observation, until the episode is over for all of them
    (on the small team env and the policy trained above)."""
    pytest.importorskip("pettingzoo")
    from tests.docs_blocks import tagged

    code = tagged("pettingzoo-trained")[0]
    assert 'plume_jax.make("PlumeNav-Swarm-v0")' in code
    code = code.replace('plume_jax.make("PlumeNav-Swarm-v0")',
                        f'plume_jax.make("PlumeNav-Gaussian-v0", **{TEAM!r})')
    code = code.replace('"runs/train_swarm/policy"', repr(str(team_run["out"] / "policy")))
    namespace: dict = {}
    exec(compile(code, "docs/training.md PettingZoo example", "exec"), namespace)
    pz, agents = namespace["pz"], namespace["agents"]
    assert pz.agents == [] and sorted(agents) == pz.possible_agents
    assert all(math.isfinite(r) for r in namespace["rewards"].values())
    assert all(namespace["terminations"][a] or namespace["truncations"][a]
               for a in namespace["rewards"])
    assert all(a._carry is not None for a in agents.values())


@pytest.mark.slow
def test_a_sweep_of_a_multi_agent_config_agrees_with_the_single_run(team_run):
    """``vmap`` over members: member 0 (seed 0) of a 2-seed sweep agrees with
    the CLI run of the same config over the first updates; each member's
    greedy evaluation is the team's."""
    from plume_jax.train.sweep import run_sweep, sweep_config

    sweep = run_sweep(sweep_config({"base": E2E, "grid": {"run.seed": [0, 1]}}), None,
                      progress=False)
    from plume_jax.train.progress import metric_rows

    rows = [r for r in metric_rows(sweep.metrics) if r["member"] == 0]
    for a, b in zip(team_run["rows"][:3], rows[:3]):
        for k in ("return_mean", "success_rate", "loss", "vf_loss", "entropy",
                  "first_arrival_mean", "arrivals_mean", "collisions_mean"):
            if a[k] is None or b[k] is None:
                assert a[k] == b[k], k
            else:
                assert math.isclose(a[k], b[k], rel_tol=1e-3, abs_tol=1e-5), (k, a[k], b[k])
    results = sweep.summary["results"]
    assert len(results) == 2 and all(0.0 <= r["eval_success_rate"] <= 1.0 for r in results)


SHARDED_TEAM_SCRIPT = """
import json
import jax, numpy as np
from plume_jax.train.config import train_config
from plume_jax.train.run import train

assert jax.device_count() == 4, jax.devices()
base = json.loads('CONFIG')
base["algo"]["total_steps"] = 8 * 16 * 3
runs = {}
for devices in (4, 1):
    cfg = train_config({**base, "run": {"devices": devices, "seed": 0}})
    runs[devices] = train(cfg, None, progress=False, evaluate=False)
r4, r1 = runs[4], runs[1]
out = {"devices": [r4.summary["devices"], r1.summary["devices"]],
       "hidden_shard_rows": r4.runner.hidden.addressable_shards[0].data.shape[0],
       "obs_shard_shape": list(r4.runner.obs.addressable_shards[0].data.shape),
       "param_diff": max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
                         for a, b in zip(jax.tree.leaves(r4.runner.params),
                                         jax.tree.leaves(r1.runner.params))),
       "loss": [[r["loss"] for r in r4.rows], [r["loss"] for r in r1.rows]]}
print("RESULT" + json.dumps(out))
"""


@pytest.mark.slow
def test_a_multi_agent_run_shards_its_envs_and_their_agents_over_four_devices():
    """Like a single-agent run, the env batch (and with it each env's agent
    rows) is split over devices, and the result is the unsharded run's."""
    from tests.train.test_train_sharding import _run

    config = {**E2E, "network": {**E2E["network"], "type": "mlp"}}
    result = _run(SHARDED_TEAM_SCRIPT.replace("CONFIG", json.dumps(config)))
    assert result["devices"] == [4, 1]
    assert result["obs_shard_shape"][:2] == [8 // 4, 3]        # 2 envs x 3 agents per device
    assert result["hidden_shard_rows"] == 8 * 3 // 4            # their agent rows
    assert result["param_diff"] < 1e-4
    sharded, plain = result["loss"]
    assert sharded == pytest.approx(plain, rel=1e-3, abs=1e-5)


# --------------------------------------------------------------- the swarm preset
@pytest.mark.slow
def test_gaussian_config_with_the_swarm_id_trains_instead_of_crashing():
    """Issue 15: the shipped Gaussian config with only the id changed to
    PlumeNav-Swarm-v0 crashed with a vmap rank error; now it trains (one
    small update on a smaller grid to keep the test short) and evaluates."""
    from plume_jax.train.config import read_yaml
    from plume_jax.train.run import train

    data = read_yaml(CONFIGS / "train_gaussian.yaml")
    data["env"]["id"] = "PlumeNav-Swarm-v0"
    data["env"]["overrides"].update({
        "grid_size": [32, 24], "max_steps": 10,
        "plume": {"capacity": 32, "warmup_steps": 8, "source": [4.0, 12.0]},
        "start": {"min_distance": 3.0, "max_distance": 20.0}})
    data["algo"].update({"total_steps": 16, "num_envs": 2, "num_steps": 8})
    data["eval"] = {"num_envs": 4}
    result = train(train_config(data), None, progress=False)
    assert result.summary["num_agents"] == 8
    assert result.rows[0]["agent_steps"] == 8 * 16
    assert math.isfinite(result.rows[0]["loss"])
    assert result.summary["evaluation"]["episodes"] == 4


@pytest.mark.slow
# the full 1M-step training took 481-499 s idle and 1,120 s beside the other xdist worker
# (2026-12-06), the slow suite's longest test. 40 % of the budget is not enough: 980 vs 999
# of 1000 successes (intervals apart), 32.9 vs 58.8 mean steps, in 335 s (2026-12-06)
@pytest.mark.timeout(3000)
def test_shipped_swarm_config_against_cast_and_surge(tmp_path):
    """configs/train_swarm.yaml against the README's cast-and-surge swarm on the
    same scenario and seeds, with the project's evaluator: the trained team
    reaches the source about as often (both near 100 %: their 95 % intervals
    overlap; a plain ``>=`` failed on 997 vs 999 of 1000, a difference well
    within sampling noise) and sooner on average (about half the steps)."""
    from agents import make_agent
    from plume_jax.evaluate import rollout
    from plume_jax.evaluate.scenario import wilson_interval
    from plume_jax.evaluate.scenario import load_scenario

    out = tmp_path / "run"
    # the run's own final evaluation is cut to 8 episodes: the test evaluates 1000 itself
    code, stdout = _cli(["train", "--config", str(CONFIGS / "train_swarm.yaml"), "--out",
                         str(out), "--set", "eval.num_envs=8", "--quiet"])
    assert code == 0, stdout
    scenario = load_scenario(CONFIGS / "scenarios" / "swarm_cast_and_surge_8.yaml")
    env, params = plume_jax.make(scenario["env"]["preset"], **scenario["env"]["overrides"])
    key = jax.random.key(scenario["seed"])
    steps = int(params.max_steps)
    n = scenario["episodes"]
    trained = rollout(env, params, make_agent("trained", env, path=str(out / "policy")), key,
                      n, steps, until_done=True)
    baseline = rollout(env, params, make_agent("cast_and_surge", env), key, n, steps,
                       until_done=True)

    def mean_steps(result):
        return float(np.mean(np.asarray(result.episode_length)[np.asarray(result.success)]))

    _, trained_upper = wilson_interval(int(np.sum(trained.success)), n)
    baseline_lower, _ = wilson_interval(int(np.sum(baseline.success)), n)
    report = (f"success {int(np.sum(trained.success))} vs {int(np.sum(baseline.success))} of {n}, "
              f"mean steps {mean_steps(trained):.1f} vs {mean_steps(baseline):.1f}")
    print(report)
    assert trained_upper >= baseline_lower, report
    assert mean_steps(trained) < 0.75 * mean_steps(baseline), report


def test_a_sweep_over_the_number_of_agents_runs_each_count_as_its_own_program():
    """The agent count and done_mode fix shapes and code paths (static):
    members that differ in them are never stacked into one program (they
    once were, and every member silently trained with the first member's env)."""
    from plume_jax.train.sweep import program_groups, setup, sweep_config

    base = {"env": {"id": "PlumeNav-Gaussian-v0", "overrides": {**SMALL, "num_agents": 2}},
            "algo": {"total_steps": 4 * 16, "num_envs": 4, "num_steps": 16}}
    for key, values in (("env.num_agents", [2, 3, 2]), ("env.done_mode", ["any", "all", "any"])):
        sweep = sweep_config({"base": base, "grid": {key: values}})
        assert program_groups(sweep) == [[0, 2], [1]]
        with pytest.raises(ValidationError):
            setup(sweep)  # all members in one program
        assert setup(sweep, [1]).runs[0].env.num_agents == (3 if key == "env.num_agents" else 2)

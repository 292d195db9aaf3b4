"""The training-algorithm interface (plume_jax.train.algorithms.base): a new
algorithm defined in this file — REINFORCE with a running-mean baseline —
trains, resumes, sweeps, exports and evaluates through the CLI with no
library file touched; it is named in configs by its import path
``tests.train.test_algorithm_interface:Reinforce`` (the repository root on PYTHONPATH)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import types

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import yaml

from plume_jax.core.errors import ValidationError
from plume_jax.train import networks
from plume_jax.train.algorithms.base import Algorithm, algo_setting, algorithm_class
from plume_jax.settings.checks import real
from plume_jax.train.config import train_config
from plume_jax.train.algorithms.ppo import PPO_SETTINGS, network_policy, obs_dim, resolve_gamma

ROOT = pathlib.Path(__file__).resolve().parents[2]
NAME = "tests.train.test_algorithm_interface:Reinforce"


@chex.dataclass(frozen=True)
class ReinforceRunner:
    params: dict
    opt_state: tuple
    env_state: object
    obs: jax.Array
    ep_return: jax.Array
    ep_length: jax.Array
    baseline: jax.Array
    key: jax.Array
    update: jax.Array


class Reinforce(Algorithm):
    """REINFORCE on rollouts of ``num_steps`` steps of ``num_envs`` envs:
    returns-to-go within the rollout (cut at episode ends), minus a running
    mean baseline, one Adam step per update; a discrete-action MLP."""

    name = NAME
    SETTINGS = {
        "learning_rate": PPO_SETTINGS["learning_rate"],  # shared declarations
        "gamma": PPO_SETTINGS["gamma"],
        "baseline_decay": algo_setting(0.9, real(low=0.0, high=1.0), static=False,
                                       doc="decay of the running-mean return baseline"),
    }

    def __init__(self, config, env, env_params):
        self.env = env
        self.config = config
        self.num_updates = config.num_updates
        self.steps_per_update = config.steps_per_update
        self.num_envs, self.num_steps = config.algo["num_envs"], config.algo["num_steps"]
        self.action_dim = int(env.action_space(env_params).n)
        self.obs_dim = obs_dim(env, env_params)
        self.static = types.SimpleNamespace(network=config.network, normalize_obs=False)
        self.net = networks.ActorCritic(config.network, self.action_dim, True)

    @classmethod
    def from_config(cls, config, env, env_params, mesh=None):
        return cls(config, env, env_params)

    def hparams(self, config, env_params):
        a = config.algo
        return {"learning_rate": jnp.float32(a["learning_rate"]),
                "gamma": jnp.float32(resolve_gamma(self.env, env_params, a["gamma"])),
                "baseline_decay": jnp.float32(a["baseline_decay"])}

    def init(self, key, hp, env_params):
        k_net, k_env, k_run = jax.random.split(key, 3)
        params = networks.init_params(self.net, k_net, self.obs_dim)
        obs, env_state = jax.vmap(self.env.reset, in_axes=(0, None))(
            jax.random.split(k_env, self.num_envs), env_params)
        return ReinforceRunner(params=params, opt_state=optax.adam(1.0).init(params),
                               env_state=env_state, obs=obs,
                               ep_return=jnp.zeros(self.num_envs),
                               ep_length=jnp.zeros(self.num_envs, jnp.int32),
                               baseline=jnp.float32(0.0), key=jax.random.key_data(k_run),
                               update=jnp.int32(0))

    def logits(self, params, obs):
        x = obs.reshape(obs.shape[0], -1).astype(jnp.float32)
        _, (logits, _), _ = self.net.apply(params, jnp.zeros((x.shape[0], 1)), x[None],
                                           jnp.zeros((1, x.shape[0]), bool))
        return logits[0]

    def update(self, runner, hp, env_params):
        key = jax.random.wrap_key_data(runner.key)
        key, k_roll = jax.random.split(key)

        def step(carry, k):
            env_state, obs, ret, length = carry
            k_act, k_env = jax.random.split(k)
            action = jax.random.categorical(k_act, self.logits(runner.params, obs))
            obs2, env_state, reward, term, trunc, info = jax.vmap(
                self.env.step, in_axes=(0, 0, 0, None))(
                jax.random.split(k_env, self.num_envs), env_state, action, env_params)
            done = term | trunc
            ret, length = ret + reward, length + 1
            out = (obs, action, reward, done, term, ret, length)
            return (env_state, obs2, jnp.where(done, 0.0, ret), jnp.where(done, 0, length)), out

        (env_state, obs, ret, length), (xs, acts, rews, done, term, rets, lens) = jax.lax.scan(
            step, (runner.env_state, runner.obs, runner.ep_return, runner.ep_length),
            jax.random.split(k_roll, self.num_steps))

        def to_go(g, inp):
            r, d = inp
            g = r + hp["gamma"] * g * (1.0 - d)
            return g, g

        _, g = jax.lax.scan(to_go, jnp.zeros(self.num_envs), (rews, done.astype(jnp.float32)),
                            reverse=True)
        baseline = hp["baseline_decay"] * runner.baseline + (1 - hp["baseline_decay"]) * g.mean()

        def loss(params):
            logp = jax.nn.log_softmax(jax.vmap(self.logits, in_axes=(None, 0))(params, xs))
            chosen = jnp.take_along_axis(logp, acts[..., None], -1)[..., 0]
            return -jnp.mean(chosen * (g - baseline))

        value, grads = jax.value_and_grad(loss)(runner.params)
        updates, opt_state = optax.adam(hp["learning_rate"]).update(grads, runner.opt_state)
        update = runner.update + 1
        d = done.astype(jnp.float32)
        episodes = d.sum()
        mean = lambda x: jnp.where(episodes > 0, (d * x).sum() / jnp.maximum(episodes, 1), jnp.nan)
        metrics = {"update": update, "env_steps": update.astype(jnp.float32)
                   * self.steps_per_update, "episodes": episodes, "return_mean": mean(rets),
                   "length_mean": mean(lens), "success_rate": mean(term.astype(jnp.float32)),
                   "loss": value}
        return runner.replace(params=optax.apply_updates(runner.params, updates),
                              opt_state=opt_state, env_state=env_state, obs=obs, ep_return=ret,
                              ep_length=length, baseline=baseline,
                              key=jax.random.key_data(key), update=update), metrics

    def policy(self, runner):
        return network_policy(self, runner)


CONFIG = {"env": {"id": "PlumeNav-Gaussian-v0", "overrides": {"grid_size": [16, 16],
                                                               "max_steps": 24}},
          "algo": {"algorithm": NAME, "total_steps": 512, "num_envs": 16, "num_steps": 16,
                   "learning_rate": 0.01, "baseline_decay": 0.5},
          "network": {"hidden_sizes": [8]},
          "run": {"seed": 0, "log_every": 1, "checkpoint_every": 1},
          "eval": {"num_envs": 8, "num_steps": 24}}


def test_an_algorithm_outside_the_library_is_named_by_its_import_path():
    assert algorithm_class(NAME) is Reinforce
    cfg = train_config(CONFIG)
    assert cfg.algo["baseline_decay"] == 0.5
    with pytest.raises(ValidationError, match=r"algo\.baseline_decay"):
        train_config({**CONFIG, "algo": {**CONFIG["algo"], "algorithm": "ppo"}})
    with pytest.raises(ValidationError, match=r"algo\.algorithm"):
        train_config({**CONFIG, "algo": {**CONFIG["algo"], "algorithm": "no_such:Thing"}})
    with pytest.raises(ValidationError, match=r"algo\.algorithm"):
        train_config({**CONFIG, "algo": {**CONFIG["algo"], "algorithm": "os.path:join"}})


def _cli(*args, cwd):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "plume_jax", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_a_new_algorithm_trains_resumes_sweeps_exports_and_evaluates_through_the_cli(tmp_path):
    """The issue's proof: the algorithm above, through plume-jax train, train
    --resume, sweep (2 members) and evaluate, with no library file touched."""
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(CONFIG))
    _cli("train", "--config", "t.yaml", "--out", "run", "--total-steps", "256", "--quiet",
         cwd=tmp_path)
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows] == [1]
    _cli("train", "--config", "t.yaml", "--resume", "run", "--quiet", cwd=tmp_path)
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows] == [1, 2]
    spec = json.loads((tmp_path / "run" / "policy" / "policy.json").read_text())
    assert spec["algorithm"] == NAME and spec["trained_env_steps"] == 512
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["evaluation"]["episodes"] == 8

    (tmp_path / "s.yaml").write_text(yaml.safe_dump(
        {"base": "t.yaml", "grid": {"algo.baseline_decay": [0.5, 0.9]}}))
    _cli("sweep", "--config", "s.yaml", "--out", "sweep", "--quiet", cwd=tmp_path)
    results = json.loads((tmp_path / "sweep" / "results.json").read_text())
    assert len(results["results"]) == 2 and len(results["programs"]) == 1
    for member in (tmp_path / "sweep" / "members").iterdir():
        assert (member / "policy" / "policy.npz").exists()

    scenario = {"name": "reinforce_gaussian", "env": {"preset": "PlumeNav-Gaussian-v0",
                                                     "overrides": CONFIG["env"]["overrides"]},
                "agent": {"name": "trained", "params": {"path": str(tmp_path / "run" /
                                                                    "policy")}},
                "episodes": 4, "seed": 7}
    (tmp_path / "sc.yaml").write_text(yaml.safe_dump(scenario))
    _cli("evaluate", "--scenario", "sc.yaml", "--out", "ev", "--quiet", cwd=tmp_path)
    assert any((tmp_path / "ev").rglob("*.json"))


def test_the_exported_policy_acts_as_the_trained_network(tmp_path):
    """The export of the new algorithm, loaded by agents.trained, gives the
    logits' argmax of the network it trained."""
    from agents.trained import TrainedPolicy
    from plume_jax.train.trainer import train

    cfg = train_config({**CONFIG, "algo": {**CONFIG["algo"], "total_steps": 256}})
    result = train(cfg, tmp_path / "r", progress=False, evaluate=False)
    policy = TrainedPolicy.load(tmp_path / "r" / "policy")
    env, params = cfg.make_env()
    obs, _ = env.reset(jax.random.key(3), params)
    action, _ = policy.act(policy.init(None), obs, jax.random.key(0))
    expected = int(jnp.argmax(result.algo.logits(result.runner.params, obs[None])[0]))
    assert int(action) == expected
    np.testing.assert_array_equal(
        np.asarray(result.policy().params["actor_out/kernel"]),
        np.asarray(policy.params["actor_out/kernel"]))

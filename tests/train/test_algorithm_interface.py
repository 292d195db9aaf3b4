"""The training-algorithm interface (plume_jax.train.algorithms.base).

docs/training.md's "Adding an algorithm" example, taken verbatim from the
page, trains, resumes, sweeps, exports and evaluates through the
``plume-jax`` CLI from a module in the working folder, with no PYTHONPATH
for it. A second REINFORCE, defined in this file with the documented
helpers only, is named by its import path
``tests.train.test_algorithm_interface:Reinforce`` (the repository root on
PYTHONPATH) for the tests that need its network in Python; a broken
method is refused by name before training."""

from __future__ import annotations

import json
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import yaml

from plume_jax.core.errors import ValidationError
from plume_jax.train.algorithms import networks
from plume_jax.train.algorithms.base import (Algorithm, actor_critic, algo_setting,
                                             algorithm_class, network_policy, set_spaces,
                                             typed_key)
from plume_jax.settings.checks import real
from plume_jax.train.config import train_config
from tests.docs_blocks import tagged

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
    SETTINGS = {  # its own learning_rate: an algorithm declares any setting it reads
        "learning_rate": algo_setting(0.01, real(low=0.0, high=1.0, low_inclusive=False),
                                      static=False, doc="Adam step size"),
        "gamma": algo_setting(0.99, real(low=0.0, high=1.0), static=False, doc="discount"),
        "baseline_decay": algo_setting(0.9, real(low=0.0, high=1.0), static=False,
                                       doc="decay of the running-mean return baseline"),
    }

    def __init__(self, config, env, env_params):
        set_spaces(self, env, env_params)
        self.network = config.network
        self.num_updates = config.num_updates
        self.steps_per_update = config.steps_per_update
        self.num_envs, self.num_steps = config.algo["num_envs"], config.algo["num_steps"]
        self.net = actor_critic(self, config.network)

    @classmethod
    def from_config(cls, config, env, env_params, mesh=None):
        return cls(config, env, env_params)

    def hparams(self, config, env_params):
        return {key: jnp.float32(config.algo[key]) for key in self.SETTINGS}

    def init(self, key, hp, env_params):
        k_net, k_env, k_run = jax.random.split(typed_key(key), 3)
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
        key, k_roll = jax.random.split(typed_key(runner.key))

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
        return network_policy(self, runner.params, self.network)


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
    """``plume-jax ARGS`` in ``cwd``, by the console script (``python -m``
    would put ``cwd`` on sys.path itself), with PYTHONPATH holding only the
    repository root: a module in ``cwd`` is not on it."""
    script = shutil.which("plume-jax")
    command = [script] if script else [sys.executable, "-P", "-m", "plume_jax"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([*command, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _rows(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def _example_blocks(language: str) -> list[str]:
    """The ```LANGUAGE blocks of docs/training.md's "Adding an algorithm"."""
    text = (ROOT / "docs" / "training.md").read_text()
    section = text.split("### Adding an algorithm\n")[1].split("\n### ")[0]
    return re.findall(rf"^```{language}\n(.*?)^```", section, flags=re.S | re.M)


def _example_commands() -> list[list[str]]:
    """The page's shell block: one argument list per command."""
    (block,) = _example_blocks("bash")
    return [shlex.split(line, comments=True)
            for line in block.replace("\\\n", " ").splitlines() if line.strip()]


#: What the test adds to each of the page's commands, for time only: no
#: TensorBoard, a small final evaluation, no progress lines.
FAST = ["--set", "run.tensorboard=false", "--set", "eval.num_envs=8",
        "--set", "eval.num_steps=24", "--quiet"]


@pytest.mark.slow  # four plume-jax processes, each importing jax and compiling (~25 s each)
def test_the_docs_example_trains_resumes_sweeps_exports_and_evaluates_from_the_working_folder(
        tmp_path):
    """The issue's proof: docs/training.md's "Adding an algorithm" code block,
    verbatim, as reinforce.py in the working folder (no PYTHONPATH for it),
    with the page's two YAML files as written, through the page's own
    commands: plume-jax train, train --resume, sweep (2 members, one
    program) and evaluate of the exported policy (each with :data:`FAST`'s
    flags; evaluate with 4 episodes)."""
    (tmp_path / "reinforce.py").write_text(tagged("adding-an-algorithm")[0])
    for block in _example_blocks("yaml"):
        name = re.match(r"# (\S+\.yaml)", block)
        assert name, block
        (tmp_path / name.group(1)).write_text(block)
    commands = _example_commands()
    assert [c[:2] for c in commands] == [["plume-jax", "train"], ["plume-jax", "train"],
                                         ["plume-jax", "sweep"], ["plume-jax", "evaluate"]]
    train, resume, sweep, evaluate = (c[1:] for c in commands)

    _cli(*train, *FAST, cwd=tmp_path)
    assert [r["update"] for r in _rows(tmp_path / "run" / "metrics.jsonl")] == [1]
    _cli(*resume, *FAST, cwd=tmp_path)
    assert [r["update"] for r in _rows(tmp_path / "run" / "metrics.jsonl")] == [1, 2]
    spec = json.loads((tmp_path / "run" / "policy" / "policy.json").read_text())
    assert spec["algorithm"] == "reinforce:Reinforce" and spec["trained_env_steps"] == 512
    resolved = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert set(resolved["algo"]) == {"algorithm", "total_steps", "num_envs", "num_steps",
                                     "learning_rate", "gamma", "baseline_decay"}
    assert json.loads((tmp_path / "run" / "summary.json").read_text())[
        "evaluation"]["episodes"] == 8

    _cli(*sweep, *FAST, cwd=tmp_path)
    results = json.loads((tmp_path / "sweep" / "results.json").read_text())
    assert len(results["results"]) == 2 and len(results["programs"]) == 1
    for member in (tmp_path / "sweep" / "members").iterdir():
        assert (member / "policy" / "policy.npz").exists()

    evaluate = [str(ROOT / a) if a.startswith("configs/") else a for a in evaluate]
    _cli(*evaluate, "--episodes", "4", "--out", "ev", "--quiet", cwd=tmp_path)
    assert any((tmp_path / "ev").rglob("*.json"))


def test_the_exported_policy_acts_as_the_trained_network(tmp_path):
    """The export of the new algorithm, loaded by agents.trained, gives the
    logits' argmax of the network it trained."""
    from agents.trained import TrainedPolicy
    from plume_jax.train.run import train

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


class BrokenPolicy(Reinforce):
    """Trains, but its policy reads an attribute nothing sets."""

    name = "tests.train.test_algorithm_interface:BrokenPolicy"

    def policy(self, runner):
        return network_policy(self, runner.params, self.static.network)


class BrokenUpdate(Reinforce):
    """Its update raises while it is traced."""

    name = "tests.train.test_algorithm_interface:BrokenUpdate"

    def update(self, runner, hp, env_params):
        return super().update(runner, {**hp, "baseline_decay": hp["decay"]}, env_params)


@pytest.mark.parametrize("broken,method,error", [(BrokenPolicy, "policy", "AttributeError"),
                                                 (BrokenUpdate, "update", "KeyError")])
def test_a_broken_method_is_one_line_naming_it_before_training(tmp_path, broken, method, error):
    """Regression: a policy() that raised made training finish and then the
    export fail with a raw AttributeError. Now the dry run before training
    (policy on a runner of zeros) or the trace of update names the method in
    one line, and no update has run."""
    from plume_jax.train.run import train

    cfg = train_config({**CONFIG, "algo": {**CONFIG["algo"], "algorithm": broken.name,
                                           "total_steps": 256}})
    with pytest.raises(ValidationError, match=rf"^algo\.algorithm=.*{broken.__name__}"
                                              rf"\.{method}\(\) raised {error}") as info:
        train(cfg, tmp_path / "r", progress=False, evaluate=False)
    assert "\n" not in str(info.value)
    rows = tmp_path / "r" / "metrics.jsonl"
    assert not rows.exists() or not rows.read_text().strip()


def test_an_algorithm_module_in_the_current_folder_is_found_without_pythonpath(
        tmp_path, monkeypatch):
    """Regression: --set algo.algorithm=mymod:MyAlgo needed PYTHONPATH=. (the
    plume-jax console script does not put the current folder on sys.path),
    while bench --add found its modules there. sys.path is left as it was."""
    (tmp_path / "algos_here.py").write_text(
        "from tests.train.test_algorithm_interface import Reinforce\n\n\n"
        "class Here(Reinforce):\n    name = 'algos_here:Here'\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    before = list(sys.path)
    cls = algorithm_class("algos_here:Here")
    assert cls.__name__ == "Here" and sys.path == before
    with pytest.raises(ValidationError, match=r"^algo\.algorithm='algos_nowhere:Here'"):
        algorithm_class("algos_nowhere:Here")
